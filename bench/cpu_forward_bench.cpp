// CPU backend forward throughput: prefill and decode tokens/s for the committed golden fixtures (flash_schedule,
// odd_dims) and synthetic models (`mid`: hidden 1024, 8 layers, 64 FP4 experts top-6; any `dsv4 make-model` preset
// such as `bundled`, generated into a temp dir), in exact and reference numerics, for each thread count. Prints a
// Markdown table (for docs/performance-log.md).
//
//   cmake --preset release && cmake --build --preset release --target cpu_forward_bench dsv4
//   build/release/bench/cpu_forward_bench [--models flash_schedule,odd_dims,mid] [--numerics exact,reference]
//       [--threads 1,2] [--prefill 256] [--decode 32] [--repeats 3] [--synthetic-dir DIR]
//
// Method: per (model, numerics, threads) one warm-up pass (maps the weight pages), then `repeats` runs of: a fresh
// sequence, one prefill step of `prefill` tokens, then `decode` single-token steps; the median of each is reported.
// Only the last row's logits are requested (as in serving). Wall-clock time (steady_clock) includes the lm head.
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "bench_program.h"
#include "core/block_dequant.h"
#include "core/error.h"
#include "model/model_loader.h"
#include "model/synthetic_checkpoint.h"
#include "runtime/sequence_runner.h"

namespace dsv4 {
namespace {

namespace fs = std::filesystem;

struct BenchOptions {
    std::vector<std::string> models = {"flash_schedule", "odd_dims", "mid"};
    std::vector<std::string> numerics = {"exact", "reference"};
    std::vector<int> threads;
    int prefill = 256;
    int decode = 32;
    int repeats = 3;
    std::string synthetic_dir;  // keeps generated presets (DIR/<preset>) between runs
};

BenchOptions parse_args(int argc, char** argv) {
    BenchOptions o;
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        DSV4_CHECK(i + 1 < argc, "{} needs a value", arg);
        const std::string value = argv[++i];
        if (arg == "--models") {
            o.models = bench::split_list(value);
        } else if (arg == "--numerics") {
            o.numerics = bench::split_list(value);
        } else if (arg == "--threads") {
            for (const auto& t : bench::split_list(value)) o.threads.push_back(std::stoi(t));
        } else if (arg == "--prefill") {
            o.prefill = std::stoi(value);
        } else if (arg == "--decode") {
            o.decode = std::stoi(value);
        } else if (arg == "--repeats") {
            o.repeats = std::stoi(value);
        } else if (arg == "--synthetic-dir") {
            o.synthetic_dir = value;
        } else {
            fail("unknown argument {}", arg);
        }
    }
    DSV4_CHECK(o.prefill >= 1 && o.decode >= 1 && o.repeats >= 1, "--prefill, --decode and --repeats must be >= 1");
    if (o.threads.empty()) {
        o.threads = {1};
        if (omp_get_max_threads() > 1) o.threads.push_back(omp_get_max_threads());
    }
    return o;
}

// The directory of a model name: a committed fixture, or a synthetic preset generated once (kept under
// --synthetic-dir when given, else in a temporary directory removed afterwards).
fs::path model_dir(const std::string& name, const BenchOptions& o, fs::path& temp_to_remove) {
    const fs::path fixture = fs::path(DSV4_SOURCE_DIR) / "tests" / "fixtures" / name;
    if (fs::is_directory(fixture)) return fixture;
    const SyntheticModel model = synthetic_preset(name);  // throws naming the known presets
    fs::path dir;
    if (o.synthetic_dir.empty()) {
        dir = fs::temp_directory_path() / ("dsv4_bench_" + name + "_" + std::to_string(::getpid()));
        temp_to_remove = dir;
    } else {
        dir = fs::path(o.synthetic_dir) / name;
    }
    if (!fs::exists(dir / "model.safetensors.index.json")) {
        std::fprintf(stderr, "generating the synthetic %s model in %s ...\n", name.c_str(), dir.c_str());
        write_synthetic_checkpoint(dir, model, SyntheticOptions{});
    }
    return dir;
}

struct Timing {
    double prefill_s = 0;
    double decode_s = 0;  // all decode steps
};

Timing run_once(DeepseekV4& model, const std::vector<int32_t>& prompt, int decode, int32_t blocks) {
    using clock = std::chrono::steady_clock;
    SequenceRunner runner(model, 0, blocks);
    const auto t0 = clock::now();
    std::vector<float> logits = runner.feed(prompt, false);
    const auto t1 = clock::now();
    // Greedy continuation, so decode reads the experts real routing picks.
    for (int i = 0; i < decode; ++i) {
        const auto next = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
        logits = runner.feed(std::vector<int32_t>{next}, false);
    }
    const auto t2 = clock::now();
    return {std::chrono::duration<double>(t1 - t0).count(), std::chrono::duration<double>(t2 - t1).count()};
}

void bench_model(const std::string& name, const fs::path& dir, const BenchOptions& o) {
    for (const auto& numerics : o.numerics) {
        for (int threads : o.threads) {
            auto backend = make_cpu_backend(parse_numerics(numerics), threads);
            StateConfig state;
            state.max_slots = 1;
            state.block_tokens = 256;
            state.rewind_capacity = 0;
            state.num_blocks = (o.prefill + o.decode + state.block_tokens - 1) / state.block_tokens;
            auto loaded = load_model(dir, *backend, state);
            const int64_t vocab = loaded->model->config().vocab_size;
            std::vector<int32_t> prompt(static_cast<size_t>(o.prefill));
            for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>((i * 7919 + 11) % vocab);
            run_once(*loaded->model, prompt, std::min(o.decode, 4), state.num_blocks);  // warm-up
            std::vector<double> prefill, decode;
            for (int r = 0; r < o.repeats; ++r) {
                const Timing t = run_once(*loaded->model, prompt, o.decode, state.num_blocks);
                prefill.push_back(t.prefill_s);
                decode.push_back(t.decode_s / o.decode);
            }
            const double p = bench::median(prefill), d = bench::median(decode);
            std::printf("| %-14s | %-9s | %7d | %12.1f | %12.1f | %10.2f |\n", name.c_str(), numerics.c_str(), threads,
                        o.prefill / p, 1.0 / d, d * 1e3);
            std::fflush(stdout);
        }
    }
}

int run(int argc, char** argv) {
    const BenchOptions o = parse_args(argc, argv);
    std::printf(
        "CPU forward: prefill %d tokens in one step, then %d decode steps; median of %d; SIMD %s; %d hardware "
        "threads\n\n",
        o.prefill, o.decode, o.repeats, std::string(simd_isa_name(active_simd_isa())).c_str(), omp_get_num_procs());
    std::printf("| model          | numerics  | threads | prefill tok/s | decode tok/s | decode ms |\n");
    std::printf("|----------------|-----------|---------|--------------:|-------------:|----------:|\n");
    for (const auto& name : o.models) {
        fs::path temp;
        try {
            bench_model(name, model_dir(name, o, temp), o);
        } catch (...) {
            if (!temp.empty()) fs::remove_all(temp);
            throw;
        }
        if (!temp.empty()) fs::remove_all(temp);
    }
    return 0;
}

}  // namespace
}  // namespace dsv4

int main(int argc, char** argv) {
    return dsv4::bench::run_program(dsv4::run, argc, argv);
}
