// mlx-overlay Metal SIMT emulator: the host C++ shim of the Metal features
// MLX's quantized mat-vec kernels use. Kernel code is compiled verbatim after
// this header (see overlay_tool/emulator/extract.py).
//
// Numerics:
//  * float is IEEE binary32 (SSE on x86-64: no excess precision). Contraction
//    of a*b+c into FMA is decided by the compiler flags (-ffp-contract=off by
//    default; =fast -mfma when the emulator is built with contract=True).
//  * half is IEEE binary16 and bfloat16_t is bfloat16 (MLX's `bfloat`); every
//    operation between two of them is computed in binary32 and rounded once to
//    nearest-even. binary32 has p=24 >= 2p+2 for p=11 (half) and p=8 (bfloat),
//    so this double rounding equals one correct rounding for + - * / (Figueroa
//    1995); the emulator's self-test checks it against exact arithmetic.
//  * Mixed half/bfloat op float gives float, half op integer gives half, as in
//    the Metal Shading Language.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "emu_runtime.h"

namespace emu {

inline uint16_t f32_to_bf16_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u); // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u); // round to nearest even
  return (uint16_t)(u >> 16);
}
inline float bf16_bits_to_f32(uint16_t b) {
  uint32_t u = (uint32_t)b << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

template <typename A>
inline constexpr bool is_int_v = std::is_integral_v<A> || std::is_enum_v<A>;
template <typename A>
inline constexpr bool is_fp_v = std::is_floating_point_v<A>;

} // namespace emu

struct half;
struct bfloat16_t;

namespace emu {
template <typename A>
inline constexpr bool is_narrow_v =
    std::is_same_v<std::decay_t<A>, ::half> || std::is_same_v<std::decay_t<A>, ::bfloat16_t>;
}

// IEEE binary16 with one rounding per operation.
struct half {
  _Float16 v;
  half() = default;
  half(const half&) = default;
  half& operator=(const half&) = default;
  template <typename A, std::enable_if_t<std::is_arithmetic_v<A>, int> = 0>
  constexpr half(A a) : v((_Float16)a) {}
  inline half(const bfloat16_t& b);
  constexpr operator float() const { return (float)v; }
  static half from_bits(uint16_t b) {
    half h;
    std::memcpy(&h.v, &b, 2);
    return h;
  }
  uint16_t bits() const {
    uint16_t b;
    std::memcpy(&b, &v, 2);
    return b;
  }
  half operator-() const { return half(-(float)v); }
  half operator+() const { return *this; }
};

// bfloat16 (MLX bfloat16_t == Metal bfloat), one rounding (RNE) per operation.
struct bfloat16_t {
  uint16_t bits_;
  bfloat16_t() = default;
  bfloat16_t(const bfloat16_t&) = default;
  bfloat16_t& operator=(const bfloat16_t&) = default;
  template <typename A, std::enable_if_t<std::is_arithmetic_v<A>, int> = 0>
  bfloat16_t(A a) : bits_(emu::f32_to_bf16_bits((float)a)) {}
  bfloat16_t(const half& h) : bits_(emu::f32_to_bf16_bits((float)h)) {}
  operator float() const { return emu::bf16_bits_to_f32(bits_); }
  static bfloat16_t from_bits(uint16_t b) {
    bfloat16_t h;
    h.bits_ = b;
    return h;
  }
  uint16_t bits() const { return bits_; }
  bfloat16_t operator-() const { return bfloat16_t::from_bits(bits_ ^ 0x8000u); }
  bfloat16_t operator+() const { return *this; }
};
inline half::half(const bfloat16_t& b) : v((_Float16)(float)b) {}
typedef bfloat16_t bfloat;
typedef half float16_t;

// Arithmetic. N op N -> N (computed in float, rounded once); N op float/double
// -> float; N op integer -> N; half op bfloat -> float.
#define EMU_NARROW_OPS(N)                                                        \
  inline N operator+(N a, N b) { return N((float)a + (float)b); }                \
  inline N operator-(N a, N b) { return N((float)a - (float)b); }                \
  inline N operator*(N a, N b) { return N((float)a * (float)b); }                \
  inline N operator/(N a, N b) { return N((float)a / (float)b); }                \
  template <typename A, std::enable_if_t<emu::is_fp_v<A>, int> = 0>              \
  inline float operator+(N a, A b) { return (float)a + (float)b; }               \
  template <typename A, std::enable_if_t<emu::is_fp_v<A>, int> = 0>              \
  inline float operator-(N a, A b) { return (float)a - (float)b; }               \
  template <typename A, std::enable_if_t<emu::is_fp_v<A>, int> = 0>              \
  inline float operator*(N a, A b) { return (float)a * (float)b; }               \
  template <typename A, std::enable_if_t<emu::is_fp_v<A>, int> = 0>              \
  inline float operator/(N a, A b) { return (float)a / (float)b; }               \
  template <typename A, std::enable_if_t<emu::is_fp_v<A>, int> = 0>              \
  inline float operator+(A a, N b) { return (float)a + (float)b; }               \
  template <typename A, std::enable_if_t<emu::is_fp_v<A>, int> = 0>              \
  inline float operator-(A a, N b) { return (float)a - (float)b; }               \
  template <typename A, std::enable_if_t<emu::is_fp_v<A>, int> = 0>              \
  inline float operator*(A a, N b) { return (float)a * (float)b; }               \
  template <typename A, std::enable_if_t<emu::is_fp_v<A>, int> = 0>              \
  inline float operator/(A a, N b) { return (float)a / (float)b; }               \
  template <typename A, std::enable_if_t<emu::is_int_v<A>, int> = 0>             \
  inline N operator+(N a, A b) { return a + N(b); }                              \
  template <typename A, std::enable_if_t<emu::is_int_v<A>, int> = 0>             \
  inline N operator-(N a, A b) { return a - N(b); }                              \
  template <typename A, std::enable_if_t<emu::is_int_v<A>, int> = 0>             \
  inline N operator*(N a, A b) { return a * N(b); }                              \
  template <typename A, std::enable_if_t<emu::is_int_v<A>, int> = 0>             \
  inline N operator/(N a, A b) { return a / N(b); }                              \
  template <typename A, std::enable_if_t<emu::is_int_v<A>, int> = 0>             \
  inline N operator+(A a, N b) { return N(a) + b; }                              \
  template <typename A, std::enable_if_t<emu::is_int_v<A>, int> = 0>             \
  inline N operator-(A a, N b) { return N(a) - b; }                              \
  template <typename A, std::enable_if_t<emu::is_int_v<A>, int> = 0>             \
  inline N operator*(A a, N b) { return N(a) * b; }                              \
  template <typename A, std::enable_if_t<emu::is_int_v<A>, int> = 0>             \
  inline N operator/(A a, N b) { return N(a) / b; }                              \
  template <typename A>                                                          \
  inline N& operator+=(N& a, const A& b) { return a = N(a + b); }                \
  template <typename A>                                                          \
  inline N& operator-=(N& a, const A& b) { return a = N(a - b); }                \
  template <typename A>                                                          \
  inline N& operator*=(N& a, const A& b) { return a = N(a * b); }                \
  template <typename A>                                                          \
  inline N& operator/=(N& a, const A& b) { return a = N(a / b); }                \
  inline N& operator++(N& a) { return a = a + N(1); }                            \
  inline N& operator--(N& a) { return a = a - N(1); }                            \
  inline bool operator==(N a, N b) { return (float)a == (float)b; }              \
  inline bool operator!=(N a, N b) { return (float)a != (float)b; }              \
  inline bool operator<(N a, N b) { return (float)a < (float)b; }                \
  inline bool operator>(N a, N b) { return (float)a > (float)b; }                \
  inline bool operator<=(N a, N b) { return (float)a <= (float)b; }              \
  inline bool operator>=(N a, N b) { return (float)a >= (float)b; }              \
  template <typename A, std::enable_if_t<std::is_arithmetic_v<A>, int> = 0>      \
  inline bool operator==(N a, A b) { return (float)a == b; }                     \
  template <typename A, std::enable_if_t<std::is_arithmetic_v<A>, int> = 0>      \
  inline bool operator!=(N a, A b) { return (float)a != b; }                     \
  template <typename A, std::enable_if_t<std::is_arithmetic_v<A>, int> = 0>      \
  inline bool operator<(N a, A b) { return (float)a < b; }                       \
  template <typename A, std::enable_if_t<std::is_arithmetic_v<A>, int> = 0>      \
  inline bool operator>(N a, A b) { return (float)a > b; }                       \
  template <typename A, std::enable_if_t<std::is_arithmetic_v<A>, int> = 0>      \
  inline bool operator<=(N a, A b) { return (float)a <= b; }                     \
  template <typename A, std::enable_if_t<std::is_arithmetic_v<A>, int> = 0>      \
  inline bool operator>=(N a, A b) { return (float)a >= b; }                     \
  template <typename A, std::enable_if_t<std::is_arithmetic_v<A>, int> = 0>      \
  inline bool operator==(A a, N b) { return a == (float)b; }                     \
  template <typename A, std::enable_if_t<std::is_arithmetic_v<A>, int> = 0>      \
  inline bool operator!=(A a, N b) { return a != (float)b; }                     \
  template <typename A, std::enable_if_t<std::is_arithmetic_v<A>, int> = 0>      \
  inline bool operator<(A a, N b) { return a < (float)b; }                       \
  template <typename A, std::enable_if_t<std::is_arithmetic_v<A>, int> = 0>      \
  inline bool operator>(A a, N b) { return a > (float)b; }                       \
  template <typename A, std::enable_if_t<std::is_arithmetic_v<A>, int> = 0>      \
  inline bool operator<=(A a, N b) { return a <= (float)b; }                     \
  template <typename A, std::enable_if_t<std::is_arithmetic_v<A>, int> = 0>      \
  inline bool operator>=(A a, N b) { return a >= (float)b; }

EMU_NARROW_OPS(half)
EMU_NARROW_OPS(bfloat16_t)
#undef EMU_NARROW_OPS

#define EMU_MIXED_NARROW(OP)                                                     \
  inline float operator OP(half a, bfloat16_t b) { return (float)a OP(float) b; } \
  inline float operator OP(bfloat16_t a, half b) { return (float)a OP(float) b; }
EMU_MIXED_NARROW(+)
EMU_MIXED_NARROW(-)
EMU_MIXED_NARROW(*)
EMU_MIXED_NARROW(/)
#undef EMU_MIXED_NARROW

namespace std {
template <>
class numeric_limits<half> {
 public:
  static constexpr bool is_specialized = true;
  static half max() { return half::from_bits(0x7bff); }
  static half min() { return half::from_bits(0x0400); }
  static half lowest() { return half::from_bits(0xfbff); }
  static half infinity() { return half::from_bits(0x7c00); }
  static half epsilon() { return half::from_bits(0x1400); }
};
template <>
class numeric_limits<bfloat16_t> {
 public:
  static constexpr bool is_specialized = true;
  static bfloat16_t max() { return bfloat16_t::from_bits(0x7f7f); }
  static bfloat16_t min() { return bfloat16_t::from_bits(0x0080); }
  static bfloat16_t lowest() { return bfloat16_t::from_bits(0xff7f); }
  static bfloat16_t infinity() { return bfloat16_t::from_bits(0x7f80); }
  static bfloat16_t epsilon() { return bfloat16_t::from_bits(0x3c00); }
};
} // namespace std

// ---- scalar and vector types ---------------------------------------------------
typedef unsigned int uint;
typedef unsigned short ushort;
typedef unsigned char uchar;
typedef unsigned long ulong;

namespace emu {
template <typename T, int N>
struct vec;
template <typename T>
struct vec<T, 2> {
  T x, y;
  vec() = default;
  template <typename A, std::enable_if_t<std::is_arithmetic_v<A> || is_narrow_v<A>, int> = 0>
  explicit vec(A a) : x(T(a)), y(T(a)) {}
  vec(T a, T b) : x(a), y(b) {}
  template <typename U>
  explicit vec(const vec<U, 2>& o) : x(T(o.x)), y(T(o.y)) {}
  T& operator[](int i) { return (&x)[i]; }
  const T& operator[](int i) const { return (&x)[i]; }
};
template <typename T>
struct vec<T, 3> {
  T x, y, z;
  vec() = default;
  template <typename A, std::enable_if_t<std::is_arithmetic_v<A> || is_narrow_v<A>, int> = 0>
  explicit vec(A a) : x(T(a)), y(T(a)), z(T(a)) {}
  vec(T a, T b, T c) : x(a), y(b), z(c) {}
  template <typename U>
  explicit vec(const vec<U, 3>& o) : x(T(o.x)), y(T(o.y)), z(T(o.z)) {}
  T& operator[](int i) { return (&x)[i]; }
  const T& operator[](int i) const { return (&x)[i]; }
};
template <typename T>
struct vec<T, 4> {
  T x, y, z, w;
  vec() = default;
  template <typename A, std::enable_if_t<std::is_arithmetic_v<A> || is_narrow_v<A>, int> = 0>
  explicit vec(A a) : x(T(a)), y(T(a)), z(T(a)), w(T(a)) {}
  vec(T a, T b, T c, T d) : x(a), y(b), z(c), w(d) {}
  template <typename U>
  explicit vec(const vec<U, 4>& o) : x(T(o.x)), y(T(o.y)), z(T(o.z)), w(T(o.w)) {}
  T& operator[](int i) { return (&x)[i]; }
  const T& operator[](int i) const { return (&x)[i]; }
};

#define EMU_VEC_OP(OP)                                                          \
  template <typename T, int N>                                                  \
  inline vec<T, N> operator OP(const vec<T, N>& a, const vec<T, N>& b) {        \
    vec<T, N> r;                                                                \
    for (int i = 0; i < N; i++) r[i] = T(a[i] OP b[i]);                         \
    return r;                                                                   \
  }                                                                             \
  template <typename T, int N, typename S,                                      \
            std::enable_if_t<std::is_arithmetic_v<S> || is_narrow_v<S>, int> = 0> \
  inline vec<T, N> operator OP(const vec<T, N>& a, S b) {                       \
    vec<T, N> r;                                                                \
    for (int i = 0; i < N; i++) r[i] = T(a[i] OP T(b));                         \
    return r;                                                                   \
  }                                                                             \
  template <typename T, int N, typename S,                                      \
            std::enable_if_t<std::is_arithmetic_v<S> || is_narrow_v<S>, int> = 0> \
  inline vec<T, N> operator OP(S a, const vec<T, N>& b) {                       \
    vec<T, N> r;                                                                \
    for (int i = 0; i < N; i++) r[i] = T(T(a) OP b[i]);                         \
    return r;                                                                   \
  }                                                                             \
  template <typename T, int N, typename S>                                      \
  inline vec<T, N>& operator OP##=(vec<T, N>& a, const S& b) {                  \
    return a = a OP b;                                                          \
  }
EMU_VEC_OP(+)
EMU_VEC_OP(-)
EMU_VEC_OP(*)
EMU_VEC_OP(/)
#undef EMU_VEC_OP
} // namespace emu

#define EMU_VEC_TYPES(T, NAME)             \
  typedef emu::vec<T, 2> NAME##2;          \
  typedef emu::vec<T, 3> NAME##3;          \
  typedef emu::vec<T, 4> NAME##4;
EMU_VEC_TYPES(float, float)
EMU_VEC_TYPES(half, half)
EMU_VEC_TYPES(bfloat16_t, bfloat)
EMU_VEC_TYPES(int, int)
EMU_VEC_TYPES(uint, uint)
EMU_VEC_TYPES(short, short)
EMU_VEC_TYPES(ushort, ushort)
EMU_VEC_TYPES(char, char)
EMU_VEC_TYPES(uchar, uchar)
EMU_VEC_TYPES(long, long)
EMU_VEC_TYPES(ulong, ulong)
EMU_VEC_TYPES(bool, bool)
#undef EMU_VEC_TYPES

// ---- the metal namespace -------------------------------------------------------
namespace metal {

enum class mem_flags { mem_none = 0, mem_device = 1, mem_threadgroup = 2, mem_texture = 4 };

template <typename T, typename U>
inline T as_type(const U& u) {
  static_assert(sizeof(T) == sizeof(U), "as_type: sizes differ");
  T t;
  std::memcpy(&t, &u, sizeof(T));
  return t;
}

template <typename T>
inline T min(T a, T b) {
  if constexpr (std::is_floating_point_v<T> || emu::is_narrow_v<T>) {
    // Metal fmin semantics: a NaN operand is ignored.
    if (a != a) return b;
    if (b != b) return a;
  }
  return (b < a) ? b : a;
}
template <typename T>
inline T max(T a, T b) {
  if constexpr (std::is_floating_point_v<T> || emu::is_narrow_v<T>) {
    if (a != a) return b;
    if (b != b) return a;
  }
  return (a < b) ? b : a;
}
template <typename T, typename U, std::enable_if_t<!std::is_same_v<T, U>, int> = 0>
inline std::common_type_t<T, U> min(T a, U b) {
  using C = std::common_type_t<T, U>;
  return min<C>(C(a), C(b));
}
template <typename T, typename U, std::enable_if_t<!std::is_same_v<T, U>, int> = 0>
inline std::common_type_t<T, U> max(T a, U b) {
  using C = std::common_type_t<T, U>;
  return max<C>(C(a), C(b));
}
template <typename T>
inline T clamp(T x, T lo, T hi) {
  return min(max(x, lo), hi);
}
template <typename T>
inline T abs(T x) {
  return x < T(0) ? T(-x) : x;
}
inline float fma(float a, float b, float c) { return std::fma(a, b, c); }
inline float sqrt(float x) { return std::sqrt(x); }
inline float rsqrt(float x) { return 1.0f / std::sqrt(x); }
inline float exp(float x) { return std::exp(x); }
inline float log(float x) { return std::log(x); }
inline float floor(float x) { return std::floor(x); }
inline float ceil(float x) { return std::ceil(x); }
inline float round(float x) { return std::round(x); }
inline float rint(float x) { return std::rint(x); }
inline float fabs(float x) { return std::fabs(x); }
inline float log2(float x) { return std::log2(x); }
inline bool isnan(float x) { return std::isnan(x); }
inline bool isfinite(float x) { return std::isfinite(x); }
inline bool signbit(float x) { return std::signbit(x); }

// Metal's vec<T, N> and dot(). dot(a, b) is modelled as the left-to-right sum
// ((a.x*b.x + a.y*b.y) + a.z*b.z) + a.w*b.w in T, one rounding per operation
// (contraction as the build flags decide); the GPU's order is not documented.
template <typename T, int N>
using vec = emu::vec<T, N>;
template <typename T, int N>
inline T dot(const emu::vec<T, N>& a, const emu::vec<T, N>& b) {
  T r = T(a[0] * b[0]);
  for (int i = 1; i < N; i++) r = T(r + T(a[i] * b[i]));
  return r;
}

// metal::precise:: — IEEE-exact versions (the emulator's defaults already are).
namespace precise {
inline float divide(float a, float b) { return a / b; }
inline float sqrt(float x) { return std::sqrt(x); }
inline float rsqrt(float x) { return 1.0f / std::sqrt(x); }
inline float fma(float a, float b, float c) { return std::fma(a, b, c); }
inline float exp(float x) { return std::exp(x); }
inline float log(float x) { return std::log(x); }
} // namespace precise
namespace fast {
inline float divide(float a, float b) { return a / b; }
inline float sqrt(float x) { return std::sqrt(x); }
inline float rsqrt(float x) { return 1.0f / std::sqrt(x); }
inline float exp(float x) { return std::exp(x); }
inline float log(float x) { return std::log(x); }
} // namespace fast

// ---- simdgroup collectives (32 lanes, fixed order: see emu_runtime.h) --------
#define EMU_SITE const char *emu_file = __builtin_FILE(), int emu_line = __builtin_LINE()

template <typename T>
inline T simd_sum(T v, EMU_SITE) {
  return emu::collective<T>(&emu::resolve_sum<T>, "simd_sum", v, 0, emu_file, emu_line);
}
template <typename T>
inline T simd_max(T v, EMU_SITE) {
  return emu::collective<T>(&emu::resolve_max<T>, "simd_max", v, 0, emu_file, emu_line);
}
template <typename T>
inline T simd_min(T v, EMU_SITE) {
  return emu::collective<T>(&emu::resolve_min<T>, "simd_min", v, 0, emu_file, emu_line);
}
template <typename T>
inline T simd_shuffle_down(T v, ushort delta, EMU_SITE) {
  return emu::collective<T>(&emu::resolve_shuffle_down<T>, "simd_shuffle_down", v,
                            (int)delta, emu_file, emu_line);
}
template <typename T>
inline T simd_shuffle_up(T v, ushort delta, EMU_SITE) {
  return emu::collective<T>(&emu::resolve_shuffle_up<T>, "simd_shuffle_up", v,
                            (int)delta, emu_file, emu_line);
}
template <typename T>
inline T simd_shuffle_xor(T v, ushort mask, EMU_SITE) {
  return emu::collective<T>(&emu::resolve_shuffle_xor<T>, "simd_shuffle_xor", v,
                            (int)mask, emu_file, emu_line);
}
template <typename T>
inline T simd_shuffle(T v, ushort lane, EMU_SITE) {
  return emu::collective<T>(&emu::resolve_shuffle<T>, "simd_shuffle", v, (int)lane,
                            emu_file, emu_line);
}
template <typename T>
inline T simd_broadcast(T v, ushort lane, EMU_SITE) {
  return emu::collective<T>(&emu::resolve_shuffle<T>, "simd_broadcast", v, (int)lane,
                            emu_file, emu_line);
}
template <typename T>
inline T simd_prefix_exclusive_sum(T v, EMU_SITE) {
  return emu::collective<T>(&emu::resolve_prefix_exclusive_sum<T>,
                            "simd_prefix_exclusive_sum", v, 0, emu_file, emu_line);
}
template <typename T>
inline T simd_prefix_inclusive_sum(T v, EMU_SITE) {
  return emu::collective<T>(&emu::resolve_prefix_inclusive_sum<T>,
                            "simd_prefix_inclusive_sum", v, 0, emu_file, emu_line);
}
// quad_sum: the sum over the 4 lanes of each quadgroup (lanes 4q..4q+3) in the
// shuffle-down ladder order (v0 + v2) + (v1 + v3), broadcast to the quad.
template <typename T>
inline T quad_sum(T v, EMU_SITE) {
  return emu::collective<T>(&emu::resolve_quad_sum<T>, "quad_sum", v, 0, emu_file, emu_line);
}
inline void simdgroup_barrier(mem_flags, EMU_SITE) {
  (void)emu::collective<int>(&emu::resolve_nop, "simdgroup_barrier", 0, 0, emu_file,
                             emu_line);
}
inline void threadgroup_barrier(mem_flags, EMU_SITE) {
  (void)emu::collective<int>(&emu::resolve_nop, "threadgroup_barrier", 0, 0, emu_file,
                             emu_line, emu::AT_TG_BARRIER);
}
#undef EMU_SITE

} // namespace metal

using namespace metal;

// ---- Metal words ---------------------------------------------------------------
// Address spaces are erased for running (the type-check pass keeps them).
#define device
#define constant
#define thread
#define threadgroup
#define METAL_FUNC inline
#define EMU_THREADGROUP_DECL static thread_local
