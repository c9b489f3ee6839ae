"""Synthesis: bandwidth bounds and schedules built for a machine from its topology."""

from msccl_py.synthesis.bound import Bound, Cut, bound

__all__ = ["bound", "Bound", "Cut"]
