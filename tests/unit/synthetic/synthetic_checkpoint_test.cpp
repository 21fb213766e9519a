// Synthetic checkpoints: exactly the expected tensor set, accepted by the loader and the weight binder, values that
// decode (with the format decoders, independently of the generator's encoders) to within the quantisation error of
// the generating values, realistic statistics, a balanced hash-routing table, determinism, and a finite forward pass
// on the CPU backend.
#include "model/synthetic_checkpoint.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <iterator>
#include <set>

#include "backend/backend.h"
#include "core/error.h"
#include "core/float_formats.h"
#include "loader/checkpoint.h"
#include "model/model_loader.h"
#include "model/synthetic_values.h"
#include "model/weight_binding.h"
#include "runtime/sequence_runner.h"
#include "st_writer.h"

namespace dsv4 {
namespace {

using test::TempDir;

struct Written {
    TempDir dir;
    SyntheticModel model;
    ModelConfig config;
    std::vector<TensorSpec> specs;
    SyntheticResult result;

    std::filesystem::path path() const { return dir / "model"; }
};

std::unique_ptr<Written> write_preset(const std::string& preset, uint64_t seed = 5, int shards = 2) {
    auto w = std::make_unique<Written>();
    w->model = synthetic_preset(preset);
    w->config = parse_model_config(w->model.config);
    w->specs = expected_tensors(w->config, w->model.drafts);
    SyntheticOptions options;
    options.seed = seed;
    options.shards = shards;
    w->result = write_synthetic_checkpoint(w->path(), w->model, options);
    return w;
}

const TensorSpec& find_spec(const Written& w, const std::string& name) {
    for (const auto& s : w.specs) {
        if (s.name == name) return s;
    }
    throw Error("no spec " + name);
}

std::vector<float> generating(const Written& w, const std::string& name) {
    const TensorSpec& spec = find_spec(w, name);
    const LogicalShape shape = synthetic_logical_shape(spec);
    std::vector<float> values(static_cast<size_t>(shape.rows * shape.cols));
    synthetic_rows(spec, 5, 0, shape.rows, values.data());
    return values;
}

// ceil(log2(amax / qmax)) in double arithmetic (an independent formula for the scale exponent).
int ceil_log2_ratio(double amax, double qmax) {
    return static_cast<int>(std::ceil(std::log2(amax / qmax)));
}

class SyntheticPresets : public ::testing::TestWithParam<std::string> {};

TEST_P(SyntheticPresets, HoldsExactlyTheExpectedTensorsAndBinds) {
    auto w = write_preset(GetParam());
    Checkpoint checkpoint = Checkpoint::open(w->path());
    EXPECT_TRUE(checkpoint.warnings().empty()) << checkpoint.warnings().front();
    EXPECT_EQ(checkpoint.files().size(), 2u);
    std::set<std::string> want, got;
    for (const auto& s : w->specs) want.insert(s.name);
    for (const auto& t : checkpoint.tensors()) got.insert(std::string(t.name));
    EXPECT_EQ(got, want);
    for (const auto& s : w->specs) {
        const TensorView& v = checkpoint.at(s.name);
        EXPECT_EQ(v.dtype, s.dtype) << s.name;
        EXPECT_TRUE(std::equal(v.shape.begin(), v.shape.end(), s.shape.begin(), s.shape.end())) << s.name;
    }
    const BoundWeights bound = bind_weights(w->config, checkpoint);
    EXPECT_EQ(bound.size(), w->specs.size());
    EXPECT_EQ(bound.drafts.kind, w->model.drafts.kind);
    EXPECT_EQ(bound.drafts.stages, w->model.drafts.stages);
    EXPECT_EQ(w->result.tensors, w->specs.size());
    EXPECT_EQ(w->result.total_bytes, checkpoint.total_bytes());
    EXPECT_EQ(synthetic_checkpoint_bytes(w->model), checkpoint.total_bytes());
    EXPECT_EQ(load_model_config(w->path() / "config.json").num_layers, w->config.num_layers);
}

INSTANTIATE_TEST_SUITE_P(Presets, SyntheticPresets, ::testing::Values("tiny", "random-v4"));

TEST(SyntheticValues, Fp8WeightsDecodeToTheGeneratingValues) {
    auto w = write_preset("tiny");
    Checkpoint checkpoint = Checkpoint::open(w->path());
    for (const std::string base : {"layers.0.attn.wq_b", "layers.2.attn.wo_a", "layers.5.ffn.shared_experts.w2"}) {
        const TensorView& codes = checkpoint.at(base + ".weight");
        const TensorView& scales = checkpoint.at(base + ".scale");
        const int64_t rows = codes.shape[0], cols = codes.shape[1], scale_cols = scales.shape[1];
        const std::vector<float> v = generating(*w, base + ".weight");
        // Block scales: the exponent of amax / 448, rounded up.
        for (int64_t br = 0; br < scales.shape[0]; ++br) {
            for (int64_t bc = 0; bc < scale_cols; ++bc) {
                double amax = 0;
                for (int64_t r = br * 128; r < std::min(rows, br * 128 + 128); ++r) {
                    for (int64_t c = bc * 128; c < std::min(cols, bc * 128 + 128); ++c) {
                        amax = std::max(amax, std::fabs(static_cast<double>(v[r * cols + c])));
                    }
                }
                EXPECT_EQ(scales.data[br * scale_cols + bc], ceil_log2_ratio(amax, 448.0) + 127) << base;
            }
        }
        // Values: |decoded - generated| <= half an e4m3 step at the scaled magnitude (3 mantissa bits; subnormal
        // step 2^-9), times the block scale.
        int64_t bad = 0;
        double err2 = 0, ref2 = 0;
        for (int64_t r = 0; r < rows; ++r) {
            for (int64_t c = 0; c < cols; ++c) {
                const double s = decode_ue8m0(scales.data[(r / 128) * scale_cols + c / 128]);
                const double decoded = decode_e4m3(codes.data[r * cols + c]) * s;
                const double x = v[r * cols + c];
                const double bound = std::max(std::fabs(x) * 0x1p-4, s * 0x1p-10) * (1 + 1e-9);
                bad += !(std::fabs(decoded - x) <= bound);
                err2 += (decoded - x) * (decoded - x);
                ref2 += x * x;
            }
        }
        EXPECT_EQ(bad, 0) << base;
        EXPECT_LT(std::sqrt(err2 / ref2), 0.04) << base << ": relative RMS quantisation error";
    }
}

TEST(SyntheticValues, Fp4ExpertsDecodeToTheGeneratingValues) {
    auto w = write_preset("tiny");
    Checkpoint checkpoint = Checkpoint::open(w->path());
    for (const std::string base : {"layers.0.ffn.experts.0.w1", "layers.3.ffn.experts.7.w2"}) {
        const TensorView& packed = checkpoint.at(base + ".weight");
        const TensorView& scales = checkpoint.at(base + ".scale");
        const int64_t rows = packed.shape[0], cols = packed.shape[1] * 2;
        ASSERT_EQ(scales.shape[1], cols / 32);
        const std::vector<float> v = generating(*w, base + ".weight");
        int64_t bad = 0;
        for (int64_t r = 0; r < rows; ++r) {
            for (int64_t b = 0; b < cols / 32; ++b) {
                double amax = 0;
                for (int64_t c = b * 32; c < b * 32 + 32; ++c)
                    amax = std::max(amax, std::fabs(double{v[r * cols + c]}));
                const uint8_t scale = scales.data[r * (cols / 32) + b];
                EXPECT_EQ(scale, ceil_log2_ratio(amax, 6.0) + 127) << base << " row " << r;
                const double s = decode_ue8m0(scale);
                for (int64_t c = b * 32; c < b * 32 + 32; ++c) {
                    // Low nibble = even element. e2m1 grid steps: 0.5 below 2, 1 below 4, 2 up to 6.
                    const uint8_t byte = packed.data[r * (cols / 2) + c / 2];
                    const double decoded = decode_e2m1(c % 2 == 0 ? byte & 0x0F : byte >> 4) * s;
                    const double x = v[r * cols + c];
                    bad += !(std::fabs(decoded - x) <= std::max(0.25, std::fabs(x / s) / 4) * s * (1 + 1e-9));
                }
            }
        }
        EXPECT_EQ(bad, 0) << base;
    }
}

TEST(SyntheticValues, PlainTensorsFollowTheirDistributions) {
    auto w = write_preset("tiny");
    Checkpoint checkpoint = Checkpoint::open(w->path());
    auto stats = [](const std::vector<double>& x) {
        double mean = 0, var = 0;
        for (double v : x) mean += v;
        mean /= static_cast<double>(x.size());
        for (double v : x) var += (v - mean) * (v - mean);
        return std::pair{mean, std::sqrt(var / static_cast<double>(x.size()))};
    };
    auto bf16_values = [&](const std::string& name) {
        const TensorView& t = checkpoint.at(name);
        std::vector<double> out;
        for (int64_t i = 0; i < t.numel(); ++i) {
            uint16_t bits = 0;
            std::memcpy(&bits, t.data + 2 * i, 2);
            out.push_back(decode_bf16(bits));
        }
        return out;
    };
    auto f32_values = [&](const std::string& name) {
        const TensorView& t = checkpoint.at(name);
        std::vector<double> out;
        for (int64_t i = 0; i < t.numel(); ++i) {
            float f = 0;
            std::memcpy(&f, t.data + 4 * i, 4);
            out.push_back(f);
        }
        return out;
    };
    // Bytes equal the generating values rounded to the format.
    const std::vector<float> head = generating(*w, "head.weight");
    const auto head_stored = bf16_values("head.weight");
    for (size_t i = 0; i < head.size(); ++i) ASSERT_EQ(head_stored[i], round_to_bf16(head[i])) << i;
    const auto [head_mean, head_std] = stats(head_stored);
    EXPECT_NEAR(head_mean, 0.0, 0.01);
    EXPECT_NEAR(head_std, 1.0 / std::sqrt(128.0), 0.03 / std::sqrt(128.0));  // N(0, fan_in^-1/2)

    const auto [embed_mean, embed_std] = stats(bf16_values("embed.weight"));
    EXPECT_NEAR(embed_mean, 0.0, 0.02);
    EXPECT_NEAR(embed_std, 1.0, 0.02);

    std::vector<double> norms;
    for (int l = 0; l < 6; ++l) {
        for (const auto& n : bf16_values("layers." + std::to_string(l) + ".attn_norm.weight")) norms.push_back(n);
    }
    const auto [norm_mean, norm_std] = stats(norms);
    EXPECT_NEAR(norm_mean, 1.0, 0.02);
    EXPECT_NEAR(norm_std, 0.1, 0.01);

    const auto fn = f32_values("layers.1.hc_ffn_fn");  // [24, 4 * 128]: N(0, 2 / sqrt(512))
    const std::vector<float> fn_gen = generating(*w, "layers.1.hc_ffn_fn");
    for (size_t i = 0; i < fn.size(); ++i) ASSERT_EQ(fn[i], fn_gen[i]);
    EXPECT_NEAR(stats(fn).second, 2.0 / std::sqrt(512.0), 0.05 * 2.0 / std::sqrt(512.0));

    for (double s : f32_values("layers.2.hc_attn_scale")) EXPECT_TRUE(s >= 0.5 && s <= 2.0) << s;
    const auto [bias_mean, bias_std] = stats(f32_values("layers.4.ffn.gate.bias"));
    EXPECT_LT(bias_std, 0.3) << "router bias is small";
    EXPECT_GT(bias_std, 0.0);
    (void)bias_mean;
}

TEST(SyntheticValues, HashRoutingTableIsDistinctAndBalanced) {
    for (auto [vocab, k, experts] : {std::tuple{512, 3, 8}, {129280, 6, 256}, {1000, 4, 4}, {77, 1, 5}}) {
        const auto table = synthetic_expert_table(vocab, k, experts, 9, "layers.0.ffn.gate.tid2eid");
        ASSERT_EQ(table.size(), static_cast<size_t>(vocab) * k);
        std::vector<int64_t> load(experts);
        for (int t = 0; t < vocab; ++t) {
            std::set<int64_t> row(table.begin() + t * k, table.begin() + (t + 1) * k);
            ASSERT_EQ(row.size(), static_cast<size_t>(k)) << "token " << t << " repeats an expert";
            for (int64_t e : row) {
                ASSERT_TRUE(e >= 0 && e < experts);
                ++load[e];
            }
        }
        const auto [lo, hi] = std::minmax_element(load.begin(), load.end());
        EXPECT_LE(*hi - *lo, 1) << "vocab " << vocab << " k " << k << " experts " << experts;
    }
    // Not a fixed pattern: different tokens get different sets, and the seed matters.
    const auto a = synthetic_expert_table(512, 3, 8, 1, "x");
    const auto b = synthetic_expert_table(512, 3, 8, 2, "x");
    EXPECT_NE(a, b);
    std::set<std::vector<int64_t>> distinct;
    for (int t = 0; t < 512; ++t) distinct.insert({a.begin() + 3 * t, a.begin() + 3 * t + 3});
    EXPECT_GT(distinct.size(), 200u);
}

std::vector<uint8_t> read_file(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(SyntheticCheckpoint, SameSeedSameBytesOtherSeedOtherBytes) {
    auto a = write_preset("tiny", 11);
    auto b = write_preset("tiny", 11);
    auto c = write_preset("tiny", 12);
    for (const auto& entry : std::filesystem::directory_iterator(a->path())) {
        const auto name = entry.path().filename();
        EXPECT_EQ(read_file(entry.path()), read_file(b->path() / name)) << name;
    }
    EXPECT_NE(read_file(a->path() / "model-00001-of-00002.safetensors"),
              read_file(c->path() / "model-00001-of-00002.safetensors"));
    // Values do not depend on the shard layout.
    auto d = write_preset("tiny", 11, 5);
    Checkpoint ca = Checkpoint::open(a->path()), cd = Checkpoint::open(d->path());
    EXPECT_EQ(cd.files().size(), 5u);
    for (const auto& t : ca.tensors()) {
        const TensorView& other = cd.at(t.name);
        ASSERT_EQ(other.nbytes, t.view->nbytes);
        EXPECT_EQ(std::memcmp(other.data, t.view->data, other.nbytes), 0) << t.name;
    }
}

TEST(SyntheticCheckpoint, TruncationAndBadPresetNames) {
    SyntheticModel m = synthetic_preset("flash-0731");
    truncate_synthetic_model(m, 5, 4);
    const ModelConfig c = parse_model_config(m.config);
    EXPECT_EQ(c.num_layers, 5);
    EXPECT_EQ(c.n_routed_experts, 4);
    EXPECT_EQ(c.n_experts_per_tok, 4);
    EXPECT_EQ(c.num_hash_layers, 3);
    EXPECT_EQ(c.layers[4].attention, AttentionType::kCsa);
    EXPECT_EQ(c.layers[3].attention, AttentionType::kHca);
    ASSERT_TRUE(c.dspark.has_value());
    EXPECT_EQ(c.dspark->target_layer_ids, (std::vector<int>{2, 3, 4}));
    EXPECT_EQ(m.config["compress_ratios"].size(), 8u);  // 5 backbone + 3 DSpark stages
    EXPECT_THROW(synthetic_preset("huge"), Error);
    SyntheticModel f = synthetic_preset("flash");
    EXPECT_THROW(truncate_synthetic_model(f, 44, std::nullopt), Error);
    EXPECT_THROW(truncate_synthetic_model(f, std::nullopt, 0), Error);
    // The full Flash shapes: the byte count the spec recomputes for the original checkpoint (model-spec 1.6).
    EXPECT_EQ(synthetic_checkpoint_bytes(f), 159'609'485'896ull);
    EXPECT_EQ(synthetic_checkpoint_bytes(synthetic_preset("flash-0731")), 166'878'536'440ull);
}

TEST(SyntheticCheckpoint, TruncatedDsparkModelBinds) {
    TempDir dir;
    SyntheticModel m = synthetic_preset("flash-0731");
    truncate_synthetic_model(m, 3, 2);
    // Shrink the widths so the test stays small; the key set is what matters here.
    for (auto [key, value] : {std::pair{"vocab_size", 1024},
                              {"hidden_size", 128},
                              {"num_attention_heads", 2},
                              {"head_dim", 128},
                              {"q_lora_rank", 64},
                              {"o_groups", 2},
                              {"o_lora_rank", 32},
                              {"index_n_heads", 4},
                              {"index_head_dim", 64},
                              {"moe_intermediate_size", 64},
                              {"dspark_markov_rank", 16},
                              {"dspark_noise_token_id", 1000}}) {
        m.config[key] = value;
    }
    SyntheticOptions options;
    write_synthetic_checkpoint(dir / "m", m, options);
    Checkpoint checkpoint = Checkpoint::open(dir / "m");
    const BoundWeights bound = bind_weights(parse_model_config(m.config), checkpoint);
    EXPECT_EQ(bound.drafts.kind, DraftKind::kDspark);
    EXPECT_EQ(bound.drafts.stages, 3);
}

class SyntheticForward : public ::testing::TestWithParam<std::string> {};

TEST_P(SyntheticForward, LogitsAreFiniteAndDependOnPosition) {
    auto w = write_preset(GetParam());
    auto backend = make_cpu_backend(Numerics::kExact, 0);
    StateConfig state;
    state.max_slots = 1;
    state.num_blocks = 2;
    state.block_tokens = 256;
    auto loaded = load_model(w->path(), *backend, state);
    std::vector<int32_t> tokens;
    for (int i = 0; i < 12; ++i) tokens.push_back(static_cast<int32_t>((i * 7919 + 3) % w->config.vocab_size));
    SequenceRunner runner(*loaded->model, 0, 2);
    std::vector<float> logits = runner.feed(tokens, true);
    const auto vocab = static_cast<size_t>(w->config.vocab_size);
    ASSERT_EQ(logits.size(), tokens.size() * vocab);
    for (float x : logits) ASSERT_TRUE(std::isfinite(x));
    double spread = 0;
    for (size_t i = 0; i < vocab; ++i) spread = std::max(spread, double{std::fabs(logits[i])});
    EXPECT_GT(spread, 0.1) << "logits carry signal";
    for (size_t p = 1; p < tokens.size(); ++p) {
        double diff = 0;
        for (size_t i = 0; i < vocab; ++i) diff = std::max(diff, double{std::fabs(logits[p * vocab + i] - logits[i])});
        EXPECT_GT(diff, 1e-3) << "position " << p << " equals position 0";
    }
    // Decode one more token: also finite.
    std::vector<float> next = runner.feed(std::vector<int32_t>{5}, false);
    for (float x : next) ASSERT_TRUE(std::isfinite(x));
}

INSTANTIATE_TEST_SUITE_P(Presets, SyntheticForward, ::testing::Values("tiny", "random-v4"));

}  // namespace
}  // namespace dsv4
