// Device backends the engine can run on, by EngineConfig::device name. "cpu" is built in. The CUDA build hooks in
// by registering "cuda" (register_device_backend, before Engine::create; or add it to builtin_devices() in
// device_registry.cpp under its build flag). Registration from a static initializer inside a static library is
// not enough: the linker drops unreferenced objects.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "config/model_config.h"
#include "dsv4/engine.h"
#include "engine/capacity_plan.h"
#include "state/state_layout.h"

namespace dsv4 {

struct DeviceBackend {
    // A fresh backend for the configuration (numerics, threads, device index ...).
    std::function<std::unique_ptr<Backend>(const EngineConfig&)> create;
    // How the backend stores K=V rows and indexer keys (sizes the state: state/state_layout.h).
    std::function<StateDtype(const EngineConfig&)> state_dtype;
    // The memory the capacity planner (engine/capacity_plan.h) places weights, workspace and state in, read before
    // anything is allocated. E.g. GPU: cudaMemGetInfo, --gpu-memory-utilization and the backend's workspace.
    std::function<MemoryFigures(const EngineConfig&)> memory;
    // The FP8 dialect the device computes in natively (EngineConfig::fp8_dialect empty).
    Fp8Dialect native_fp8_dialect = Fp8Dialect::kOcp;
};

// Host memory the system reports available (MemAvailable), for the CPU device and the host tiers.
int64_t available_host_bytes();

// EngineConfig::fp8_dialect resolved: ocp | fnuz, or the device's native dialect when empty. Anything else is a
// dsv4::Error naming the accepted values.
Fp8Dialect engine_fp8_dialect(const EngineConfig& config);

// EngineConfig::kv_cache_dtype as a StateDtype: f32 | bf16 | fp8, or auto = f32 in exact numerics and fp8 in
// reference and fast numerics (the reference's own roundings are exactly what fp8_ds_mla stores). Anything else is
// a dsv4::Error naming the accepted values.
StateDtype engine_state_dtype(const EngineConfig& config);

// The model the engine will run: model_dir's config.json, or the synthetic preset's (EngineConfig::synthetic_preset).
// Throws dsv4::Error for a missing directory or an unknown preset.
ModelConfig engine_model_config(const EngineConfig& config);

void register_device_backend(const std::string& device, DeviceBackend backend);
// Throws dsv4::Error listing the known devices when `device` is not one of them.
const DeviceBackend& find_device_backend(const std::string& device);
std::vector<std::string> device_backend_names();

}  // namespace dsv4
