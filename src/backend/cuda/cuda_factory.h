// Entry points of the CUDA backend for host code that is compiled without nvcc (CLI, engine, tests).
// Available when the build has DSV4_WITH_CUDA (cmake -DDSV4_CUDA=ON); guard calls with #ifdef DSV4_WITH_CUDA.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "backend/backend.h"

namespace dsv4 {

// How a CUDA backend is set up. Filled from EngineConfig (or a CLI's flags); the environment may override the tuning
// knobs, read in one place: cuda_options_from_env().
struct CudaOptions {
    int device = 0;
    int64_t workspace_mib = 6144;  // step scratch: 6 GiB covers an 8K-token prefill chunk of the Flash shapes
    // Fast numerics: activation rows from which linears run on tensor cores, and (token, expert) pairs from which the
    // routed experts are grouped by expert for tensor-core GEMMs (H200, 4-layer Flash: at 16 tokens the GEMVs are
    // faster, at 32 the GEMMs; docs/performance-log.md).
    int64_t min_gemm_rows = 32;
    int64_t min_grouped_pairs = 128;
    bool profile_ops = false;  // profiling times every op instead of the model's regions
};

// `base` with the environment's overrides (documented in docs/operations.md): DSV4_CUDA_WORKSPACE_MB,
// DSV4_MIN_GROUPED_PAIRS, DSV4_MIN_GEMM_ROWS, DSV4_PROFILE_OPS (set: per-op profiling). A value that is not a
// positive integer is a dsv4::Error naming the variable.
CudaOptions cuda_options_from_env(CudaOptions base);

std::unique_ptr<Backend> make_cuda_backend(Numerics numerics, const CudaOptions& options);
// The backend with default options and the environment's overrides.
std::unique_ptr<Backend> make_cuda_backend(Numerics numerics);
// Whether a CUDA device can be used here; when not, `why` (if given) says why (no driver, no device, ...).
bool cuda_available(std::string* why = nullptr);

// The two device ceilings every benchmark reports next to its numbers (measured in the same run, METHOD.md):
// device-to-device copy bandwidth (bytes read + written) and a large bf16 GEMM through cuBLAS.
struct DeviceCeilings {
    std::string device_name;
    double copy_tb_per_s = 0.0;
    double bf16_gemm_tflops = 0.0;
    size_t free_bytes = 0;
    size_t total_bytes = 0;
};
DeviceCeilings measure_device_ceilings();

}  // namespace dsv4
