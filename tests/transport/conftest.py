"""Fixtures of the transport tests: launches ended and checked for leftovers (see launching.py)."""

from launching import launches  # noqa: F401  (a fixture)
