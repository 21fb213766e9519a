// Programmatic dependent launch (Hopper): every kernel of this backend is launched through launch_kernel(), which
// lets it start before its predecessor in the stream has finished, and every kernel begins with pdl_begin(), which
// waits for the predecessor's completion (its writes visible) before anything else and then lets its own successor
// launch. A decode step is a chain of short dependent kernels; without this each one's launch, block scheduling and
// first loads wait for the previous grid to drain (~1 us a node in a graph on the H200, hopper-kernels.md 4).
// The rule that keeps it safe: nothing a kernel does before pdl_begin() may touch memory a previous kernel writes;
// a kernel that does work before it (the streamed GEMV requests weight tiles) says so where it calls it.
#pragma once

#include <cuda_runtime.h>

#include <utility>

#include "backend/cuda/kernels.h"

namespace dsv4::cuda {

// Waits until the grids this one depends on have completed and their memory is visible; then allows the dependent
// grid to launch (its blocks wait in their own pdl_begin()). Without a programmatic launch both are no-ops.
__device__ __forceinline__ void pdl_begin() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Whether a launch on `stream` is programmatic: enabled, and the stream is being captured into a graph. Decode runs
// from graphs, where a programmatic edge joins two kernel nodes only (a memcpy or memset node keeps its full edge);
// eager launches (prefill chunks, tests) keep plain stream order, where nothing was measured to gain.
inline bool programmatic_on(cudaStream_t stream) {
    if (!programmatic_launch()) return false;
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    return cudaStreamIsCapturing(stream, &status) == cudaSuccess && status == cudaStreamCaptureStatusActive;
}

// kernel<<<grid, block, shared, stream>>>(args...), programmatic where programmatic_on(). Launch errors stay the
// thread's last error, as with <<<>>> (the callers check it).
template <typename... Params, typename... Args>
void launch_kernel(void (*kernel)(Params...), dim3 grid, dim3 block, size_t shared, cudaStream_t stream,
                   Args&&... args) {
    cudaLaunchAttribute attribute{};
    attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attribute.val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t config{};
    config.gridDim = grid;
    config.blockDim = block;
    config.dynamicSmemBytes = shared;
    config.stream = stream;
    config.attrs = &attribute;
    config.numAttrs = programmatic_on(stream) ? 1 : 0;
    cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
}

}  // namespace dsv4::cuda
