"""NCCL baselines, calibration against nccl-tests logs, and the per-size tuner.

This package sits on top of the simulator and the library (NCCL's ring and
tree orders come from :mod:`msccl_py.topologies.rings`, which the
``nccl_ring``/``nccl_tree`` library programs use too): ``nccl`` models
NCCL's own choice, ``logs`` reads nccl-tests / rccl-tests output,
``calibrate`` fits a machine's α and β to such logs, and ``tune`` picks the
best library program per size range (``ranges`` finds and merges them,
``selection`` models how each runtime picks a file, ``report`` writes the
table) and writes a folder the runtime loads.
"""
