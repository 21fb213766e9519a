// The trained demo model (models/demo, docs/demo-model.md) on the CPU backend in exact numerics: the held-out bits per
// byte it was committed with (regression check, and agreement with the PyTorch trainer's value), its tokenizer against
// HF `tokenizers` ids, and the loader's view of both drafter layouts (MTP in models/demo, DSpark in demo-dspark).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "backend/backend.h"
#include "config/model_config.h"
#include "core/npy.h"
#include "loader/checkpoint.h"
#include "model/model_loader.h"
#include "model/weight_binding.h"
#include "runtime/heldout_score.h"
#include "tokenizer/tokenizer.h"

namespace dsv4 {
namespace {

namespace fs = std::filesystem;

fs::path source_dir() {
    const char* env = std::getenv("DSV4_SOURCE_DIR");
    return env != nullptr ? fs::path(env) : fs::path(DSV4_SOURCE_DIR);
}

nlohmann::json read_json(const fs::path& path) {
    std::ifstream in(path);
    EXPECT_TRUE(in.good()) << path;
    return nlohmann::json::parse(in);
}

TEST(DemoModel, HeldoutBitsPerByteExact) {
    const nlohmann::json quality = read_json(source_dir() / "tests" / "data" / "demo_quality.json");
    const NpyTensor<int32_t> heldout =
        read_npy_i32((source_dir() / "tests" / "data" / "demo_heldout_tokens.npy").string());
    ASSERT_EQ(heldout.shape.size(), 2u);
    const int64_t rows = quality.at("ci_rows").get<int64_t>(), len = heldout.shape[1];
    ASSERT_LE(rows, heldout.shape[0]);

    auto backend = make_cpu_backend(Numerics::kExact, 1);
    StateConfig state;
    state.max_slots = 1;
    state.block_tokens = 256;
    state.num_blocks = static_cast<int>((len + 255) / 256);
    state.rewind_capacity = 0;
    auto loaded = load_model(source_dir() / "models" / "demo", *backend, state);
    const std::vector<double> nats = row_nats(*loaded->model, heldout.values, rows, len);

    const auto tok = tokenizer::Tokenizer::load((source_dir() / "models" / "demo" / "tokenizer.json").string());
    for (int64_t r = 0; r < rows; ++r) {
        int64_t bytes = 0;
        for (int64_t i = 1; i < len; ++i)
            bytes += static_cast<int64_t>(tok.token_bytes(heldout.values[r * len + i]).size());
        EXPECT_EQ(bytes, quality["ci_bytes"][r].get<int64_t>()) << "row " << r;
        const double committed = quality["ci_exact_nats"][r].get<double>();
        const double pytorch = quality["ci_pytorch_nats"][r].get<double>();
        // Exact numerics are float32 arithmetic: other SIMD paths may move the last bits, nothing more.
        EXPECT_NEAR(nats[r], committed, 1e-6 * committed) << "row " << r << ": held-out nats changed";
        EXPECT_NEAR(nats[r], pytorch, 1e-5 * pytorch) << "row " << r << ": disagrees with HF transformers";
        std::printf("demo held-out row %lld: %.4f nats, %.5f bits per byte\n", static_cast<long long>(r), nats[r],
                    bits_per_byte(nats[r], bytes));
    }
}

TEST(DemoModel, TokenizerMatchesHfTokenizers) {
    const auto tok = tokenizer::Tokenizer::load((source_dir() / "models" / "demo" / "tokenizer.json").string());
    std::ifstream in(source_dir() / "tests" / "data" / "demo_tokenizer_golden.jsonl");
    ASSERT_TRUE(in.good());
    std::string line;
    int checked = 0;
    while (std::getline(in, line)) {
        const nlohmann::json row = nlohmann::json::parse(line);
        const std::string text = row.at("text").get<std::string>();
        EXPECT_EQ(tok.encode(text), row.at("ids").get<std::vector<int32_t>>()) << text;
        ++checked;
    }
    EXPECT_GT(checked, 100);
    // The V4 special tokens keep V4's text; BOS / EOS are ids 0 / 1 as in config.json.
    EXPECT_EQ(tok.token_to_id("<｜begin▁of▁sentence｜>"), 0);
    EXPECT_EQ(tok.token_to_id("<｜end▁of▁sentence｜>"), 1);
    EXPECT_TRUE(tok.token_to_id("<｜User｜>").has_value());
    EXPECT_TRUE(tok.token_to_id("<｜Assistant｜>").has_value());
    EXPECT_TRUE(tok.token_to_id("</think>").has_value());
}

void expect_drafts(const std::string& dir, DraftKind kind, int stages) {
    const fs::path path = source_dir() / "models" / dir;
    const ModelConfig config = load_model_config(path / "config.json");
    const Checkpoint checkpoint = Checkpoint::open(path);
    const BindingReport report = validate_weights(config, checkpoint);
    EXPECT_TRUE(report.ok()) << report.describe();
    EXPECT_EQ(report.drafts.kind, kind) << dir;
    EXPECT_EQ(report.drafts.stages, stages) << dir;
    size_t draft_tensors = 0;
    for (const auto& t : checkpoint.tensors()) draft_tensors += t.name.rfind("mtp.", 0) == 0 ? 1 : 0;
    EXPECT_GT(draft_tensors, 0u);
    EXPECT_EQ(report.matched, report.expected);
}

TEST(DemoModel, DrafterTensorsAreRecognised) {
    expect_drafts("demo", DraftKind::kMtp, 1);
    expect_drafts("demo-dspark", DraftKind::kDspark, kDsparkStages);
}

}  // namespace
}  // namespace dsv4
