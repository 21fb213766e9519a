#include "engine/device_registry.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <mutex>

#include "config/model_config.h"
#include "core/error.h"
#include "engine/step_budget.h"
#ifdef DSV4_WITH_CUDA
#include <cuda_runtime.h>

#include "backend/cuda/cuda_factory.h"
#endif

namespace dsv4 {
namespace {

constexpr int64_t kGiB = int64_t{1} << 30;

DeviceBackend cpu_device() {
    DeviceBackend d;
    d.create = [](const EngineConfig& c) {
        return make_cpu_backend(parse_numerics(c.numerics), c.threads, engine_fp8_dialect(c));
    };
    d.state_dtype = engine_state_dtype;
    // Weights are read in place from the mapped checkpoint; the automatic state
    // is the slots plus up to 1 GiB, within half of the available memory.
    d.memory = [](const EngineConfig&) {
        MemoryFigures m;
        m.name = "host memory";
        m.total_bytes = m.free_bytes = available_host_bytes();
        m.holds_weights = false;  // (the CPU backend makes no synthetic weights: it says so when asked)
        m.auto_state_cap_bytes = kGiB;
        return m;
    };
    return d;
}

#ifdef DSV4_WITH_CUDA
// The CUDA backend's options from the engine's configuration, then the environment's overrides.
CudaOptions cuda_options(const EngineConfig& c) {
    CudaOptions o;
    o.workspace_mib = cuda_workspace_mib(c);
    o.fp8_dialect = engine_fp8_dialect(c);
    o.batch_invariant = c.batch_invariant;
    return cuda_options_from_env(o);
}

DeviceBackend cuda_device() {
    DeviceBackend d;
    d.create = [](const EngineConfig& c) { return make_cuda_backend(parse_numerics(c.numerics), cuda_options(c)); };
    d.state_dtype = engine_state_dtype;
    // gpu_memory_utilization x total memory (at most what is free), the workspace and 1 GiB kept for runtime
    // allocations (graphs, cuBLAS handles).
    d.memory = [](const EngineConfig& c) {
        size_t free_bytes = 0, total_bytes = 0;
        const cudaError_t status = cudaMemGetInfo(&free_bytes, &total_bytes);
        DSV4_CHECK(status == cudaSuccess, "cannot read the GPU's memory (cudaMemGetInfo: {})",
                   cudaGetErrorString(status));
        MemoryFigures m;
        m.name = "GPU";
        m.total_bytes = static_cast<int64_t>(total_bytes);
        m.free_bytes = static_cast<int64_t>(free_bytes);
        m.utilization = c.gpu_memory_utilization;
        m.workspace_bytes = cuda_options(c).workspace_mib << 20;
        m.reserve_bytes = kGiB;
        return m;
    };
    return d;
}
#endif

// Built-in devices.
struct Registry {
    Registry() {
        devices.emplace("cpu", cpu_device());
#ifdef DSV4_WITH_CUDA
        devices.emplace("cuda", cuda_device());
#endif
    }
    std::mutex mutex;
    std::map<std::string, DeviceBackend> devices;
};

Registry& registry() {
    static Registry r;
    return r;
}

}  // namespace

int64_t available_host_bytes() {
    const long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || page <= 0) return 4 * kGiB;
    return static_cast<int64_t>(pages) * page;
}

StateDtype engine_state_dtype(const EngineConfig& c) {
    const std::string& name = c.kv_cache_dtype;
    if (name == "auto") return parse_numerics(c.numerics) == Numerics::kExact ? StateDtype::kF32 : StateDtype::kFp8;
    DSV4_CHECK(name == "f32" || name == "bf16" || name == "fp8",
               "--kv-cache-dtype '{}' is not a sequence-state dtype (auto, f32, bf16 or fp8)", name);
    return parse_state_dtype(name);
}

Fp8Dialect engine_fp8_dialect(const EngineConfig& c) {
    if (c.fp8_dialect.empty()) return find_device_backend(c.device).native_fp8_dialect;
    DSV4_CHECK(c.fp8_dialect == "ocp" || c.fp8_dialect == "fnuz",
               "--fp8-dialect '{}' is not an FP8 dialect (ocp or fnuz)", c.fp8_dialect);
    return parse_fp8_dialect(c.fp8_dialect);
}

void register_device_backend(const std::string& device, DeviceBackend backend) {
    DSV4_CHECK(backend.create && backend.state_dtype && backend.memory,
               "device backend '{}' is "
               "missing a function",
               device);
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    r.devices[device] = std::move(backend);
}

const DeviceBackend& find_device_backend(const std::string& device) {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    auto it = r.devices.find(device);
    if (it == r.devices.end()) {
        std::string known;
        for (const auto& [name, backend] : r.devices) known += (known.empty() ? "" : ", ") + name;
        fail("device '{}' is not available in this build (known: {})", device, known);
    }
    return it->second;
}

std::vector<std::string> device_backend_names() {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    std::vector<std::string> names;
    for (const auto& [name, backend] : r.devices) names.push_back(name);
    return names;
}

}  // namespace dsv4
