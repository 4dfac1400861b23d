// mlx-overlay emulator: what fp_quantized.h (and fp4.h, fp8.h) needs on top of
// typecheck_prelude.h for the address-space type check. Declarations only:
// the check compiles, it never runs.
#include "typecheck_prelude.h"

typedef half float16_t;
struct bfloat16_t {
  bfloat16_t(float);
};

namespace metal {
bool isnan(float);
bool isfinite(float);
bool signbit(float);
float abs(float);
float log2(float);
float round(float);
template <typename T> T quad_sum(T);

// Metal's vec<T, N>: a struct here (OpenCL's vector types do not convert
// between element types by a cast); address spaces stay as the kernels write
// them.
template <typename T, int N>
struct vec {
  T v[N];
  template <typename... A>
  vec(A... a);
};
template <typename T, int N>
T dot(vec<T, N>, vec<T, N>);
} // namespace metal
using namespace metal;
#define float4 vec<float, 4>
