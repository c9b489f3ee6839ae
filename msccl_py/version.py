"""The package version, at the bottom of the house so that caches can key on it."""

__version__ = "0.1.0"
