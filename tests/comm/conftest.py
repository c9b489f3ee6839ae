"""Fixtures of the comm tests: launches ended and checked for leftovers (see launching.py)."""

from launching import launches  # noqa: F401  (a fixture)
