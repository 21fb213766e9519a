// Entry points of the CUDA backend for host code that is compiled without nvcc (CLI, engine, tests).
// Available when the build has DSV4_WITH_CUDA (cmake -DDSV4_CUDA=ON); guard calls with #ifdef DSV4_WITH_CUDA.
#pragma once

#include <memory>
#include <string>

#include "backend/backend.h"

namespace dsv4 {

std::unique_ptr<Backend> make_cuda_backend(Numerics numerics, int device = 0);
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
