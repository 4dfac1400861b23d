// mlx-overlay emulator: Metal -> C++ for OpenCL prelude for the address-space
// type check (clang++ -x clcpp -cl-std=clc++2021 -fsyntax-only).
//
// Metal's address spaces map one to one onto OpenCL's named address spaces,
// which C++ for OpenCL keeps as distinct pointer types: passing or casting a
// `thread` (__private) pointer where a `device` (__global) one is expected is
// an error here, as it is in the Metal compiler.
#pragma OPENCL EXTENSION cl_khr_fp16 : enable

#define device __global
#define constant __constant
#define threadgroup __local
#define thread __private
#define METAL_FUNC inline

typedef uchar uint8_t;
typedef char int8_t;
typedef ushort uint16_t;
typedef short int16_t;
typedef uint uint32_t;
typedef int int32_t;
typedef ulong uint64_t;
typedef long int64_t;

// bfloat16_t is only declared: instantiate the check with float and half.
struct bfloat16_t;

namespace metal {
enum class mem_flags { mem_none = 0, mem_device = 1, mem_threadgroup = 2, mem_texture = 4 };
template <typename T> T simd_sum(T);
template <typename T> T simd_max(T);
template <typename T> T simd_min(T);
template <typename T> T simd_shuffle_down(T, ushort);
template <typename T> T simd_shuffle_up(T, ushort);
template <typename T> T simd_shuffle_xor(T, ushort);
template <typename T> T simd_shuffle(T, ushort);
template <typename T> T simd_broadcast(T, ushort);
template <typename T> T simd_prefix_exclusive_sum(T);
template <typename T> T simd_prefix_inclusive_sum(T);
void simdgroup_barrier(mem_flags);
void threadgroup_barrier(mem_flags);
template <typename T> T min(T, T);
template <typename T> T max(T, T);
template <typename T> T clamp(T, T, T);
template <typename T, typename U> T as_type(U);
namespace precise {
float divide(float, float);
float sqrt(float);
float fma(float, float, float);
} // namespace precise
namespace fast {
float divide(float, float);
} // namespace fast
} // namespace metal
using namespace metal;
