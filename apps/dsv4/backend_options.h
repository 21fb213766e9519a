// Options shared by the commands that build a backend themselves (logits, bpb, bench offline): the FP8 dialect flag
// and the backend made through the engine's device registry from an EngineConfig, as serve and generate make theirs.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "backend/backend.h"
#include "dsv4/engine.h"
#include "engine/device_registry.h"
#include "engine/step_budget.h"

namespace dsv4::cli {

inline void add_fp8_dialect_option(CLI::App& app, std::string& value) {
    app.add_option("--fp8-dialect", value,
                   "FP8 dialect of weights in memory, activation quantization and fp8 caches: ocp | fnuz (default: the "
                   "device's native one, ocp on cpu and cuda; fnuz = AMD MI300X numerics)")
        ->check(CLI::IsMember({"ocp", "fnuz"}));
}

// The engine configuration of the one-sequence tools (bench offline, logits, bpb): their backend and its capacity
// plan read the same one.
inline EngineConfig cli_engine_config(const std::string& device, const std::string& numerics, int threads,
                                      const std::string& fp8_dialect) {
    EngineConfig c;
    c.device = device;
    c.numerics = numerics;
    c.threads = threads;
    c.fp8_dialect = fp8_dialect;
    c.cuda_workspace_mib = kMinWorkspaceMib;  // one sequence's steps: an 8K-token chunk of flash-160 used 5,298 MiB
    return c;
}

inline std::unique_ptr<Backend> make_cli_backend(const std::string& device, const std::string& numerics, int threads,
                                                 const std::string& fp8_dialect) {
    return find_device_backend(device).create(cli_engine_config(device, numerics, threads, fp8_dialect));
}

}  // namespace dsv4::cli
