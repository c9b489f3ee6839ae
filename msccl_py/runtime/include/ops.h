// Reduction operators of the interpreter, per element and per 16-byte pack.
//
// Integer sums and products wrap (computed unsigned) so results match NumPy;
// 16-bit floats use the half2/bf162 intrinsics on the device and float
// arithmetic rounded back on the host emulation.
#pragma once
#include "platform.h"

namespace msccl {

struct OpSum {};
struct OpProd {};
struct OpMax {};
struct OpMin {};

template <class T> struct Arith {
  static MSCCL_DEV T add(T a, T b) { return a + b; }
  static MSCCL_DEV T mul(T a, T b) { return a * b; }
  static MSCCL_DEV T max(T a, T b) { return a > b ? a : b; }
  static MSCCL_DEV T min(T a, T b) { return a < b ? a : b; }
};
template <class T, class U> struct WrapArith {
  static MSCCL_DEV T add(T a, T b) { return (T)((U)a + (U)b); }
  static MSCCL_DEV T mul(T a, T b) { return (T)((U)a * (U)b); }
  static MSCCL_DEV T max(T a, T b) { return a > b ? a : b; }
  static MSCCL_DEV T min(T a, T b) { return a < b ? a : b; }
};
template <> struct Arith<int> : WrapArith<int, unsigned int> {};
template <> struct Arith<long long> : WrapArith<long long, unsigned long long> {};
template <> struct Arith<unsigned char> : WrapArith<unsigned char, unsigned int> {};

#ifdef __CUDACC__
template <> struct Arith<half_t> {
  static MSCCL_DEV half_t add(half_t a, half_t b) { return __hadd(a, b); }
  static MSCCL_DEV half_t mul(half_t a, half_t b) { return __hmul(a, b); }
  static MSCCL_DEV half_t max(half_t a, half_t b) { return __hmax(a, b); }
  static MSCCL_DEV half_t min(half_t a, half_t b) { return __hmin(a, b); }
};
template <> struct Arith<bf16_t> {
  static MSCCL_DEV bf16_t add(bf16_t a, bf16_t b) { return __hadd(a, b); }
  static MSCCL_DEV bf16_t mul(bf16_t a, bf16_t b) { return __hmul(a, b); }
  static MSCCL_DEV bf16_t max(bf16_t a, bf16_t b) { return __hmax(a, b); }
  static MSCCL_DEV bf16_t min(bf16_t a, bf16_t b) { return __hmin(a, b); }
};
#else
template <> struct Arith<half_t> {
  static half_t add(half_t a, half_t b) { return to_half(to_float(a) + to_float(b)); }
  static half_t mul(half_t a, half_t b) { return to_half(to_float(a) * to_float(b)); }
  static half_t max(half_t a, half_t b) { return to_float(a) > to_float(b) ? a : b; }
  static half_t min(half_t a, half_t b) { return to_float(a) < to_float(b) ? a : b; }
};
template <> struct Arith<bf16_t> {
  static bf16_t add(bf16_t a, bf16_t b) { return to_bf16(to_float(a) + to_float(b)); }
  static bf16_t mul(bf16_t a, bf16_t b) { return to_bf16(to_float(a) * to_float(b)); }
  static bf16_t max(bf16_t a, bf16_t b) { return to_float(a) > to_float(b) ? a : b; }
  static bf16_t min(bf16_t a, bf16_t b) { return to_float(a) < to_float(b) ? a : b; }
};
#endif

template <class T, class Op> struct Reduce;
template <class T> struct Reduce<T, OpSum> {
  static MSCCL_DEV T apply(T a, T b) { return Arith<T>::add(a, b); }
};
template <class T> struct Reduce<T, OpProd> {
  static MSCCL_DEV T apply(T a, T b) { return Arith<T>::mul(a, b); }
};
template <class T> struct Reduce<T, OpMax> {
  static MSCCL_DEV T apply(T a, T b) { return Arith<T>::max(a, b); }
};
template <class T> struct Reduce<T, OpMin> {
  static MSCCL_DEV T apply(T a, T b) { return Arith<T>::min(a, b); }
};

// Element-wise reduction of two 16-byte packs.
template <class T, class Op> struct ReducePack {
  static MSCCL_DEV pack16_t apply(pack16_t a, pack16_t b) {
    constexpr int n = 16 / sizeof(T);
    T x[n], y[n];
    memcpy(x, &a, 16);
    memcpy(y, &b, 16);
#pragma unroll
    for (int i = 0; i < n; i++) x[i] = Reduce<T, Op>::apply(x[i], y[i]);
    memcpy(&a, x, 16);
    return a;
  }
};

#ifdef __CUDACC__
template <class H2, class Op> struct Reduce2;
template <class H2> struct Reduce2<H2, OpSum> {
  static MSCCL_DEV H2 apply(H2 a, H2 b) { return __hadd2(a, b); }
};
template <class H2> struct Reduce2<H2, OpProd> {
  static MSCCL_DEV H2 apply(H2 a, H2 b) { return __hmul2(a, b); }
};
template <class H2> struct Reduce2<H2, OpMax> {
  static MSCCL_DEV H2 apply(H2 a, H2 b) { return __hmax2(a, b); }
};
template <class H2> struct Reduce2<H2, OpMin> {
  static MSCCL_DEV H2 apply(H2 a, H2 b) { return __hmin2(a, b); }
};
template <class H2, class Op> struct ReducePack2 {
  static MSCCL_DEV pack16_t apply(pack16_t a, pack16_t b) {
    H2 x[4], y[4];
    memcpy(x, &a, 16);
    memcpy(y, &b, 16);
#pragma unroll
    for (int i = 0; i < 4; i++) x[i] = Reduce2<H2, Op>::apply(x[i], y[i]);
    memcpy(&a, x, 16);
    return a;
  }
};
// bytes: four per 32-bit SIMD instruction
template <class Op> struct Bytes4;
template <> struct Bytes4<OpSum> { static MSCCL_DEV unsigned apply(unsigned a, unsigned b) { return __vadd4(a, b); } };
template <> struct Bytes4<OpMax> { static MSCCL_DEV unsigned apply(unsigned a, unsigned b) { return __vmaxu4(a, b); } };
template <> struct Bytes4<OpMin> { static MSCCL_DEV unsigned apply(unsigned a, unsigned b) { return __vminu4(a, b); } };
template <class Op> struct ReduceBytes {
  static MSCCL_DEV pack16_t apply(pack16_t a, pack16_t b) {
    a.x = Bytes4<Op>::apply(a.x, b.x);
    a.y = Bytes4<Op>::apply(a.y, b.y);
    a.z = Bytes4<Op>::apply(a.z, b.z);
    a.w = Bytes4<Op>::apply(a.w, b.w);
    return a;
  }
};
template <> struct ReducePack<unsigned char, OpSum> : ReduceBytes<OpSum> {};
template <> struct ReducePack<unsigned char, OpMax> : ReduceBytes<OpMax> {};
template <> struct ReducePack<unsigned char, OpMin> : ReduceBytes<OpMin> {};
template <class Op> struct ReducePack<half_t, Op> : ReducePack2<__half2, Op> {};
template <class Op> struct ReducePack<bf16_t, Op> : ReducePack2<__nv_bfloat162, Op> {};
#endif

}  // namespace msccl
