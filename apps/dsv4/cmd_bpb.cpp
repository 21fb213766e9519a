// `dsv4 bpb`: held-out bits per byte of a token matrix (int32 .npy [rows, T], e.g. the demo model's
// tests/data/demo_heldout_tokens.npy: BOS + 511 held-out tokens per row). Each row is fed as a fresh sequence and
// every token after the first is scored; bytes are the UTF-8 bytes of the scored tokens (the tokenizer's token
// bytes). Prints one JSON object.
#include <cstdio>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "backend/backend.h"
#include "backend_options.h"
#include "command.h"
#include "core/error.h"
#include "core/npy.h"
#include "model/model_loader.h"
#include "runtime/heldout_score.h"
#include "tokenizer/tokenizer.h"

namespace dsv4::cli {
namespace {

struct BpbOptions {
    std::string model;
    std::string tokens;
    std::string tokenizer;
    int64_t rows = 0;
    std::string numerics = "exact";
    std::string device = "cpu";
    int threads = 0;
    std::string kv_cache_dtype = "f32";
    std::string fp8_dialect;
    bool per_row = false;
};

void run(const BpbOptions& o) {
    NpyTensor<int32_t> t = read_npy_i32(o.tokens);
    DSV4_CHECK(t.shape.size() == 2 && t.shape[0] > 0 && t.shape[1] >= 2,
               "{}: expected an int32 token matrix [rows, T >= 2]", o.tokens);
    DSV4_CHECK(o.rows >= 0, "--rows must be >= 0");
    const int64_t rows = o.rows == 0 ? t.shape[0] : std::min<int64_t>(o.rows, t.shape[0]);
    const int64_t len = t.shape[1];
    const std::string tok_path =
        o.tokenizer.empty() ? (std::filesystem::path(o.model) / "tokenizer.json").string() : o.tokenizer;
    const tokenizer::Tokenizer tok = tokenizer::Tokenizer::load(tok_path);

    std::unique_ptr<Backend> backend = make_cli_backend(o.device, o.numerics, o.threads, o.fp8_dialect);
    DSV4_CHECK(std::filesystem::is_directory(o.model), "model directory {} does not exist", o.model);
    StateConfig state;
    state.max_slots = 1;
    state.block_tokens = 256;
    state.rewind_capacity = 0;
    state.kv_dtype = parse_state_dtype(o.kv_cache_dtype);
    state.num_blocks = static_cast<int>((len + state.block_tokens - 1) / state.block_tokens);
    auto loaded = load_model(o.model, *backend, state);

    const std::vector<double> nats = row_nats(*loaded->model, t.values, rows, len);
    int64_t bytes = 0;
    for (int64_t r = 0; r < rows; ++r) {
        for (int64_t i = 1; i < len; ++i) bytes += static_cast<int64_t>(tok.token_bytes(t.values[r * len + i]).size());
    }
    double total = 0.0;
    for (double n : nats) total += n;
    nlohmann::json out{{"rows", rows},
                       {"tokens_per_row", len - 1},
                       {"bytes", bytes},
                       {"nats", total},
                       {"bits_per_byte", bits_per_byte(total, bytes)},
                       {"numerics", o.numerics},
                       {"fp8_dialect", fp8_dialect_name(backend->fp8_dialect())},
                       {"device", o.device}};
    if (o.per_row) out["row_nats"] = nats;
    std::printf("%s\n", out.dump().c_str());
}

const CommandRegistrar kRegistrar{
    "bpb", "Held-out bits per byte of a token matrix ([rows, T] int32 .npy, each row from BOS)", [](CLI::App& app) {
        auto o = std::make_shared<BpbOptions>();
        app.add_option("--model", o->model, "Model directory (config.json + safetensors)")->required();
        app.add_option("--tokens", o->tokens, "int32 .npy token matrix [rows, T]")->required();
        app.add_option("--tokenizer", o->tokenizer, "tokenizer.json for the byte counts (default: the model's)");
        app.add_option("--rows", o->rows, "Score the first N rows (0 = all)");
        app.add_option("--numerics", o->numerics, "exact | reference | fast");
        app.add_option("--device", o->device, "cpu | cuda");
        app.add_option("--threads", o->threads, "CPU threads (0 = all)");
        app.add_option("--kv-cache-dtype", o->kv_cache_dtype, "Stored K=V rows and indexer keys: f32 | bf16 | fp8");
        add_fp8_dialect_option(app, o->fp8_dialect);
        app.add_flag("--per-row", o->per_row, "Also print each row's nats");
        app.callback([o] { run(*o); });
    }};

}  // namespace
}  // namespace dsv4::cli
