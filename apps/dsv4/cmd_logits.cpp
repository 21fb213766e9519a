// `dsv4 logits`: float32 logits [T, vocab] of every position of an int32 token file, fed whole, in chunks, or
// prefill-then-decode (the result must not depend on how the prompt is fed). The golden tests' CLI twin.
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "backend/backend.h"
#include "backend_options.h"
#include "command.h"
#include "core/error.h"
#include "core/npy.h"
#include "model/model_loader.h"
#include "runtime/sequence_runner.h"

namespace dsv4::cli {
namespace {

struct LogitsOptions {
    std::string model;
    std::string tokens;
    std::string out;
    int64_t prefill_chunk = 0;
    int64_t decode_from = -1;
    std::string numerics = "exact";
    std::string device = "cpu";
    int threads = 0;
    std::string kv_cache_dtype = "f32";
    std::string fp8_dialect;
};

std::vector<int32_t> read_tokens(const std::string& path, int64_t vocab) {
    NpyTensor<int32_t> t = read_npy_i32(path);
    DSV4_CHECK(t.shape.size() == 1 || (t.shape.size() == 2 && t.shape[0] == 1),
               "{}: expected a 1-D token array, got "
               "{} dimensions",
               path, t.shape.size());
    DSV4_CHECK(!t.values.empty(), "{}: the token file is empty", path);
    for (size_t i = 0; i < t.values.size(); ++i) {
        DSV4_CHECK(t.values[i] >= 0 && t.values[i] < vocab,
                   "{}: token {} at index {} is outside the vocabulary "
                   "[0, {})",
                   path, t.values[i], i, vocab);
    }
    return t.values;
}

void run(const LogitsOptions& o) {
    std::unique_ptr<Backend> backend = make_cli_backend(o.device, o.numerics, o.threads, o.fp8_dialect);
    DSV4_CHECK(std::filesystem::is_directory(o.model), "model directory {} does not exist", o.model);
    const ModelConfig config = load_model_config(std::filesystem::path(o.model) / "config.json");
    std::vector<int32_t> tokens = read_tokens(o.tokens, config.vocab_size);
    const auto t = static_cast<int64_t>(tokens.size());
    StateConfig state;
    state.max_slots = 1;
    state.block_tokens = 256;
    state.rewind_capacity = 0;
    state.kv_dtype = parse_state_dtype(o.kv_cache_dtype);
    state.num_blocks = static_cast<int>((t + state.block_tokens - 1) / state.block_tokens);
    auto loaded = load_model(o.model, *backend, state);
    if (loaded->fp8_conversion.blocks > 0) {
        std::fprintf(stderr, "FP8 weights converted to %s at load: %s\n",
                     std::string(fp8_dialect_label(backend->fp8_dialect())).c_str(),
                     loaded->fp8_conversion.describe().c_str());
    }
    DeepseekV4& model = *loaded->model;
    DSV4_CHECK(o.prefill_chunk >= 0, "--prefill-chunk must be >= 0");
    DSV4_CHECK(o.decode_from < t, "--decode-from {} must be below the token count {}", o.decode_from, t);
    SequenceRunner runner(model, 0, state.num_blocks);
    std::vector<float> logits;
    logits.reserve(t * model.config().vocab_size);
    const int64_t prefill_end = o.decode_from >= 0 ? o.decode_from : t;
    const int64_t chunk = o.prefill_chunk > 0 ? o.prefill_chunk : std::max<int64_t>(prefill_end, 1);
    auto feed = [&](int64_t begin, int64_t len) {
        auto part = runner.feed(std::span(tokens).subspan(begin, len), true);
        logits.insert(logits.end(), part.begin(), part.end());
    };
    for (int64_t begin = 0; begin < prefill_end; begin += chunk) feed(begin, std::min(chunk, prefill_end - begin));
    for (int64_t i = prefill_end; i < t; ++i) feed(i, 1);
    write_npy_f32(o.out, logits.data(), {t, model.config().vocab_size});
    std::fprintf(stderr, "wrote %s: [%lld, %lld] float32 logits\n", o.out.c_str(), static_cast<long long>(t),
                 static_cast<long long>(model.config().vocab_size));
}

const CommandRegistrar kRegistrar{
    "logits", "Write the float32 logits of every position of a token file", [](CLI::App& app) {
        auto o = std::make_shared<LogitsOptions>();
        app.add_option("--model", o->model, "Model directory (config.json + safetensors)")->required();
        app.add_option("--tokens", o->tokens, "int32 .npy token file [T]")->required();
        app.add_option("--out", o->out, "Output .npy file (float32 [T, vocab])")->required();
        app.add_option("--prefill-chunk", o->prefill_chunk, "Feed the prompt in chunks of N tokens (0 = whole)");
        app.add_option("--decode-from", o->decode_from, "Prefill K tokens, then feed one token per step");
        app.add_option("--numerics", o->numerics, "exact | reference | fast");
        app.add_option("--device", o->device, "cpu | cuda");
        app.add_option("--threads", o->threads, "CPU threads (0 = all)");
        app.add_option("--kv-cache-dtype", o->kv_cache_dtype, "Stored K=V rows and indexer keys: f32 | bf16 | fp8");
        add_fp8_dialect_option(app, o->fp8_dialect);
        app.callback([o] { run(*o); });
    }};

}  // namespace
}  // namespace dsv4::cli
