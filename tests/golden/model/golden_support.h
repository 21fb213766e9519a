// Shared helpers of the golden tests: open a fixture on a CPU backend and compare logits.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/npy.h"
#include "model/model_loader.h"
#include "runtime/sequence_runner.h"
#include "runtime/step_graphs.h"

namespace dsv4::golden {

// The repository root: DSV4_SOURCE_DIR from the environment (binaries run on another machine), else the build's.
inline std::filesystem::path source_dir() {
    const char* env = std::getenv("DSV4_SOURCE_DIR");
    return env != nullptr ? std::filesystem::path(env) : std::filesystem::path(DSV4_SOURCE_DIR);
}

inline std::filesystem::path fixture_dir(const std::string& name) {
    return source_dir() / "tests" / "fixtures" / name;
}

inline std::vector<std::string> fixture_names() {
    return {"flash_schedule", "odd_dims", "tame_reference"};
}

struct Fixture {
    std::unique_ptr<Backend> backend;
    std::unique_ptr<LoadedModel> loaded;
    std::vector<int32_t> tokens;
    NpyTensor<float> reference;  // [T, vocab]
    // Steps as the engine runs them: decode steps record and replay graphs where the backend can (reset it, or
    // open with graphs = false, for eager steps).
    std::unique_ptr<StepGraphs> graphs;

    DeepseekV4& model() { return *loaded->model; }
    int64_t vocab() const { return reference.shape[1]; }
};

inline StateConfig test_state(int slots = 2, StateDtype kv_dtype = StateDtype::kF32) {
    StateConfig s;
    s.kv_dtype = kv_dtype;
    s.max_slots = slots;
    s.block_tokens = 256;
    s.num_blocks = slots * 8;
    s.rewind_capacity = 16;
    return s;
}

inline Fixture open_fixture(const std::string& name, Numerics numerics, const std::string& logits_file = "logits.npy",
                            std::unique_ptr<Backend> backend = nullptr, StateDtype kv_dtype = StateDtype::kF32,
                            bool graphs = true) {
    Fixture f;
    f.backend = backend ? std::move(backend) : make_cpu_backend(numerics, 0);
    f.loaded = load_model(fixture_dir(name), *f.backend, test_state(2, kv_dtype));
    f.tokens = read_npy_i32((fixture_dir(name) / "tokens.npy").string()).values;
    f.reference = read_npy_f32((fixture_dir(name) / logits_file).string());
    f.graphs = std::make_unique<StepGraphs>(f.model(), !graphs);
    return f;
}

// max |got - ref| / max |ref|; NaN anywhere makes it infinite.
inline double relative_max_error(const std::vector<float>& got, const std::vector<float>& ref) {
    double max_ref = 0.0, max_diff = 0.0;
    for (size_t i = 0; i < ref.size(); ++i) {
        if (!std::isfinite(got[i])) return INFINITY;
        max_ref = std::max(max_ref, std::fabs(static_cast<double>(ref[i])));
        max_diff = std::max(max_diff, std::fabs(static_cast<double>(got[i]) - ref[i]));
    }
    return max_diff / max_ref;
}

// Feeds the whole prompt through a fresh sequence in chunks of `chunk` tokens (0 = all at once), then one token per
// step from `decode_from` on (when >= 0). Returns the logits of every position.
inline std::vector<float> run_logits(Fixture& f, int64_t chunk, int64_t decode_from, int32_t slot = 0) {
    SequenceRunner runner(f.model(), slot, 8, f.graphs.get());
    std::vector<float> all;
    const auto t = static_cast<int64_t>(f.tokens.size());
    const int64_t prefill_end = decode_from >= 0 ? decode_from : t;
    const int64_t step = chunk > 0 ? chunk : std::max<int64_t>(prefill_end, 1);
    for (int64_t begin = 0; begin < prefill_end; begin += step) {
        const int64_t len = std::min(step, prefill_end - begin);
        auto part = runner.feed(std::span(f.tokens).subspan(begin, len), true);
        all.insert(all.end(), part.begin(), part.end());
    }
    for (int64_t i = prefill_end; i < t; ++i) {
        auto part = runner.feed(std::span(f.tokens).subspan(i, 1), true);
        all.insert(all.end(), part.begin(), part.end());
    }
    return all;
}

}  // namespace dsv4::golden
