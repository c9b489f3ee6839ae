"""The interpreter's C++/CUDA sources (data, not Python): a package so that wheels ship them.

platform.h (the only #ifdefs: PTX helpers or their std::atomic_ref stand-ins),
ops.h (reductions), interp.h (the kernel), instances.cu (extern "C" entry
points), emulation.cpp (host build), tsan_driver.cpp (ThreadSanitizer driver).
"""
