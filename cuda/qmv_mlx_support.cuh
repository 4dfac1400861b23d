// What the entry translation units (qmv_entry.cu, qmv_matrix_entry.cu) add
// to the kernel part of a qmv.cu: MLX symbols it calls that live in libmlx,
// which the harness does not link. Included after QMV_KERNELS, inside each
// unit's renamed mlx namespace (-Dmlx=...).
#pragma once

#include <cstdio>
#include <cstdlib>

namespace mlx::core {

// CHECK_CUDA_ERROR (cuda_utils.h) reports through this.
void check_cuda_error(const char* name, cudaError_t err) {
  if (err != cudaSuccess) {
    fprintf(stderr, "%s failed: %s\n", name, cudaGetErrorString(err));
    abort();
  }
}

} // namespace mlx::core
