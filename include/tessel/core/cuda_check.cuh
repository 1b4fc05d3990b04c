// Checked calls into the CUDA runtime, cuSPARSE, cuBLAS and NCCL (nvcc-only header).
#pragma once

#include "tessel/core/error.hpp"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cusparse.h>

#define TESSEL_CHECK_CUDA(call)                                                            \
  do {                                                                                     \
    const cudaError_t tessel_cuda_rc_ = (call);                                            \
    if (tessel_cuda_rc_ != cudaSuccess) [[unlikely]]                                       \
      TESSEL_LIB_FAIL("CUDA call {} failed: {}", #call, cudaGetErrorString(tessel_cuda_rc_)); \
  } while (0)

// After every kernel launch: reports launch-configuration errors at the launch site.
#define TESSEL_CHECK_LAUNCH() TESSEL_CHECK_CUDA(cudaGetLastError())

#define TESSEL_CHECK_CUSPARSE(call)                                                        \
  do {                                                                                     \
    const cusparseStatus_t tessel_sp_rc_ = (call);                                         \
    if (tessel_sp_rc_ != CUSPARSE_STATUS_SUCCESS) [[unlikely]]                             \
      TESSEL_LIB_FAIL("cuSPARSE call {} failed: {}", #call,                                \
                      cusparseGetErrorString(tessel_sp_rc_));                              \
  } while (0)

#define TESSEL_CHECK_CUBLAS(call)                                                          \
  do {                                                                                     \
    const cublasStatus_t tessel_bl_rc_ = (call);                                           \
    if (tessel_bl_rc_ != CUBLAS_STATUS_SUCCESS) [[unlikely]]                               \
      TESSEL_LIB_FAIL("cuBLAS call {} failed: status {}", #call,                           \
                      static_cast<int>(tessel_bl_rc_));                                    \
  } while (0)
