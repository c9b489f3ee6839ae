"""Front ends that hand out communicators: joining a launch (``init``), its layout and diagnostics.

``msccl_py.init()`` (:func:`msccl_py.comm.join.init`) joins torchrun, an
``env://`` launch or mpirun and returns this rank's communicator.
"""
