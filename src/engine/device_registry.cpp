#include "engine/device_registry.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <mutex>

#include "config/model_config.h"
#include "core/error.h"
#include "model/tensor_spec.h"
#ifdef DSV4_WITH_CUDA
#include <cuda_runtime.h>

#include "backend/cuda/cuda_factory.h"
#endif

namespace dsv4 {
namespace {

constexpr int64_t kGiB = int64_t{1} << 30;

// Half of the memory the system reports available (the CPU backend allocates and touches its state up front).
int64_t available_host_bytes() {
    const long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || page <= 0) return 4 * kGiB;
    return static_cast<int64_t>(pages) * page;
}

DeviceBackend cpu_device() {
    DeviceBackend d;
    d.create = [](const EngineConfig& c) {
        return make_cpu_backend(parse_numerics(c.numerics), c.threads, engine_fp8_dialect(c));
    };
    d.state_dtype = engine_state_dtype;
    // The slots, plus 1 GiB for blocks and snapshots, within half of the available memory.
    d.default_state_bytes = [](const EngineConfig&, int64_t fixed_bytes) {
        return std::min(fixed_bytes + kGiB, std::max(fixed_bytes + kGiB / 16, available_host_bytes() / 2));
    };
    return d;
}

#ifdef DSV4_WITH_CUDA
// Bytes of the checkpoint's tensors for the engine's model (what the GPU will hold as weights).
int64_t weight_bytes(const EngineConfig& config) {
    const ModelConfig c = engine_model_config(config);
    int64_t bytes = 0;
    for (const TensorSpec& s : expected_tensors(c)) {
        int64_t n = 1;
        for (int64_t d : s.shape) n *= d;
        bytes += n * dtype_bits(s.dtype) / 8;
    }
    return bytes;
}

// The CUDA backend's options from the engine's configuration, then the environment's overrides.
CudaOptions cuda_options(const EngineConfig& c) {
    CudaOptions o;
    if (c.cuda_workspace_mib > 0) o.workspace_mib = c.cuda_workspace_mib;
    o.fp8_dialect = engine_fp8_dialect(c);
    return cuda_options_from_env(o);
}

DeviceBackend cuda_device() {
    DeviceBackend d;
    d.create = [](const EngineConfig& c) { return make_cuda_backend(parse_numerics(c.numerics), cuda_options(c)); };
    d.state_dtype = engine_state_dtype;
    // gpu_memory_utilization x total memory - weights - the workspace - 1 GiB slack.
    d.default_state_bytes = [](const EngineConfig& c, int64_t fixed_bytes) {
        size_t free_bytes = 0, total_bytes = 0;
        if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) return fixed_bytes + kGiB;
        const auto usable = static_cast<int64_t>(c.gpu_memory_utilization * static_cast<double>(total_bytes)) -
                            weight_bytes(c) - (cuda_options(c).workspace_mib << 20) - kGiB;
        return std::max(fixed_bytes + kGiB / 16, usable);
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
    DSV4_CHECK(backend.create && backend.state_dtype && backend.default_state_bytes,
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
