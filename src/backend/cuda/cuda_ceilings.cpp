// Measures the device ceilings: copy bandwidth and bf16 GEMM rate (cuBLAS), medians of repeated timed runs.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_factory.h"
#include "backend/cuda/kernels.h"
#include "core/error.h"

namespace dsv4 {
namespace {

template <typename F>
double median_ms(F&& body, int warmup, int reps) {
    cudaEvent_t a, b;
    DSV4_CUDA(cudaEventCreate(&a));
    DSV4_CUDA(cudaEventCreate(&b));
    for (int i = 0; i < warmup; ++i) body();
    std::vector<float> times;
    for (int i = 0; i < reps; ++i) {
        DSV4_CUDA(cudaEventRecord(a));
        body();
        DSV4_CUDA(cudaEventRecord(b));
        DSV4_CUDA(cudaEventSynchronize(b));
        float ms = 0.0f;
        DSV4_CUDA(cudaEventElapsedTime(&ms, a, b));
        times.push_back(ms);
    }
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    std::sort(times.begin(), times.end());
    return times[times.size() / 2];
}

}  // namespace

DeviceCeilings measure_device_ceilings() {
    DeviceCeilings c;
    cudaDeviceProp prop{};
    DSV4_CUDA(cudaGetDeviceProperties(&prop, 0));
    c.device_name = prop.name;
    const size_t bytes = size_t{2} << 30;
    void *x = nullptr, *y = nullptr;
    DSV4_CUDA(cudaMalloc(&x, bytes));
    DSV4_CUDA(cudaMalloc(&y, bytes));
    DSV4_CUDA(cudaMemset(x, 1, bytes));
    const double copy_ms = median_ms([&] { DSV4_CUDA(cudaMemcpyAsync(y, x, bytes, cudaMemcpyDeviceToDevice)); }, 3, 10);
    c.copy_tb_per_s = 2.0 * static_cast<double>(bytes) / (copy_ms * 1e-3) / 1e12;
    DSV4_CUDA(cudaFree(x));
    DSV4_CUDA(cudaFree(y));

    const int n = 8192;
    void *a = nullptr, *b = nullptr, *d = nullptr;
    const size_t mat = size_t{n} * n * 2;
    DSV4_CUDA(cudaMalloc(&a, mat));
    DSV4_CUDA(cudaMalloc(&b, mat));
    DSV4_CUDA(cudaMalloc(&d, mat));
    // Random-looking (not zero) inputs: zeros run faster than real data (METHOD.md).
    std::vector<uint16_t> host(size_t{n} * n);
    for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<uint16_t>(0x3c00 + (i * 2654435761u >> 20) % 512);
    DSV4_CUDA(cudaMemcpy(a, host.data(), mat, cudaMemcpyHostToDevice));
    DSV4_CUDA(cudaMemcpy(b, host.data(), mat, cudaMemcpyHostToDevice));
    cublasHandle_t handle;
    DSV4_CHECK(cublasCreate(&handle) == CUBLAS_STATUS_SUCCESS, "cublasCreate failed");
    const float alpha = 1.0f, beta = 0.0f;
    const double gemm_ms = median_ms(
        [&] {
            cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, a, CUDA_R_16BF, n, b, CUDA_R_16BF, n, &beta,
                         d, CUDA_R_16BF, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
        },
        3, 10);
    c.bf16_gemm_tflops = 2.0 * n * static_cast<double>(n) * n / (gemm_ms * 1e-3) / 1e12;
    cublasDestroy(handle);
    DSV4_CUDA(cudaFree(a));
    DSV4_CUDA(cudaFree(b));
    DSV4_CUDA(cudaFree(d));
    DSV4_CUDA(cudaMemGetInfo(&c.free_bytes, &c.total_bytes));
    return c;
}

PcieCeilings measure_pcie_ceilings() {
    PcieCeilings c;
    const size_t bytes = size_t{1} << 30;
    void *host = nullptr, *device = nullptr;
    DSV4_CUDA(cudaHostAlloc(&host, bytes, cudaHostAllocPortable | cudaHostAllocMapped));
    DSV4_CUDA(cudaMalloc(&device, bytes + 64));
    std::memset(host, 0x5a, bytes);
    const double copy_ms =
        median_ms([&] { DSV4_CUDA(cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice)); }, 2, 7);
    c.copy_gb_per_s = static_cast<double>(bytes) / (copy_ms * 1e-3) / 1e9;
    int sms = 0;
    DSV4_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    auto* sink = reinterpret_cast<uint32_t*>(static_cast<std::byte*>(device) + bytes);
    const double read_ms = median_ms(
        [&] {
            cuda::launch_read_words(nullptr, host, static_cast<int64_t>(bytes), sms * 8, sink);
            DSV4_CUDA(cudaGetLastError());
        },
        2, 7);
    c.read_in_place_gb_per_s = static_cast<double>(bytes) / (read_ms * 1e-3) / 1e9;
    DSV4_CUDA(cudaFree(device));
    DSV4_CUDA(cudaFreeHost(host));
    return c;
}

}  // namespace dsv4
