// extern "C" entry points of the interpreter, one per dtype x op x scope.
//
// nvcc cannot use CuPy's name_expressions, so every instantiation gets a
// plain C name: msccl_interp_<dtype>_<op>_<scope>. Define
// MSCCL_NO_DEFAULT_INSTANCES and follow the #include with MSCCL_INSTANCE(...)
// lines to build only some entry points.
#include "interp.h"

#define MSCCL_INSTANCE(TN, T, ON, OP, SN, SC)                                           \
  extern "C" __global__ void __launch_bounds__(512, 2)                                  \
      msccl_interp_##TN##_##ON##_##SN(const long long* P) {                             \
    msccl::interp<T, msccl::OP, msccl::SC>(P);                                          \
  }

#ifndef MSCCL_NO_DEFAULT_INSTANCES
#define MSCCL_OPS(TN, T, SN, SC)                 \
  MSCCL_INSTANCE(TN, T, sum, OpSum, SN, SC)      \
  MSCCL_INSTANCE(TN, T, prod, OpProd, SN, SC)    \
  MSCCL_INSTANCE(TN, T, max, OpMax, SN, SC)      \
  MSCCL_INSTANCE(TN, T, min, OpMin, SN, SC)
#define MSCCL_TYPES(SN, SC)                              \
  MSCCL_OPS(float16, msccl::half_t, SN, SC)              \
  MSCCL_OPS(bfloat16, msccl::bf16_t, SN, SC)             \
  MSCCL_OPS(float32, float, SN, SC)                      \
  MSCCL_OPS(float64, double, SN, SC)                     \
  MSCCL_OPS(int32, int, SN, SC)                          \
  MSCCL_OPS(int64, long long, SN, SC)                    \
  MSCCL_OPS(uint8, unsigned char, SN, SC)
MSCCL_TYPES(gpu, ScopeGpu)
MSCCL_TYPES(sys, ScopeSys)
#endif
