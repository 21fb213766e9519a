// The FP8 dialects on whole models (CPU backend, which implements FNUZ fully: MI300X numerics without an MI300X):
//   - exact numerics: an OCP fixture run with FNUZ weights in memory, and its `convert-checkpoint --fp8 fnuz` copy
//     (run in either dialect), give logits bit-identical to the OCP run;
//   - reference numerics: FNUZ with every site's maximum pinned to OCP-equivalent 224 is bit-identical to OCP, so the
//     FNUZ default (activations and K=V rows at 240) differs from OCP only through those maxima (bounded, logged);
//   - a mislabelled checkpoint is refused at load, naming both dialects (OCP bytes claimed FNUZ and the reverse);
//   - the 2x trap itself: OCP bytes decoded as FNUZ halve every weight, and the golden comparison catches it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "backend/cpu/cpu_backend.h"
#include "core/block_dequant.h"
#include "golden_support.h"
#include "model/checkpoint_convert.h"
#include "model/weights_loader.h"

namespace dsv4::golden {
namespace {

namespace fs = std::filesystem;

constexpr double kExactTolerance = 1e-4;
// Prompt prefixes that keep the ASan runs short: every FP8 weight is used from the first token; 80 tokens give the
// CSA indexer 20 entries for its top-16 (reference numerics: FP8 K=V rows and indexer keys really stored and picked).
constexpr int64_t kTokens = 48;
constexpr int64_t kReferenceTokens = 80;

std::vector<int32_t> fixture_tokens(const std::string& name, int64_t count = kTokens) {
    std::vector<int32_t> t = read_npy_i32((fixture_dir(name) / "tokens.npy").string()).values;
    t.resize(std::min<size_t>(t.size(), static_cast<size_t>(count)));
    return t;
}

// The reference logits of those tokens (rows of the full-sequence reference: causal, so a prefix's rows are equal).
std::vector<float> reference_prefix(const std::string& name, const std::string& file, size_t tokens) {
    NpyTensor<float> ref = read_npy_f32((fixture_dir(name) / file).string());
    ref.values.resize(tokens * static_cast<size_t>(ref.shape[1]));
    return ref.values;
}

std::vector<float> run(const fs::path& dir, Backend& backend, const std::vector<int32_t>& tokens,
                       StateDtype kv = StateDtype::kF32) {
    auto loaded = load_model(dir, backend, test_state(1, kv));
    SequenceRunner runner(*loaded->model, 0, 8);
    return runner.feed(tokens, true);
}

std::vector<float> run(const fs::path& dir, Numerics numerics, const Fp8Sites& sites,
                       const std::vector<int32_t>& tokens, StateDtype kv = StateDtype::kF32) {
    CpuBackend backend(numerics, 0, sites);
    return run(dir, backend, tokens, kv);
}

int64_t differing(const std::vector<float>& a, const std::vector<float>& b) {
    int64_t n = 0;
    for (size_t i = 0; i < a.size(); ++i) n += std::memcmp(&a[i], &b[i], sizeof(float)) != 0;
    return n;
}

// A scratch directory removed at the end of the test.
struct ScratchDir {
    fs::path path;
    explicit ScratchDir(const std::string& tag)
        : path(fs::temp_directory_path() / ("dsv4_fp8_" + tag + "_" + std::to_string(::getpid()))) {
        fs::remove_all(path);
    }
    ~ScratchDir() {
        std::error_code ignored;
        fs::remove_all(path, ignored);
    }
};

// A copy of a checkpoint directory with quantization_config.fmt set to `fmt` (the label only, bytes unchanged).
void copy_with_fmt(const fs::path& from, const fs::path& to, const std::string& fmt) {
    fs::create_directories(to);
    for (const auto& entry : fs::directory_iterator(from)) {
        if (entry.path().filename() != "config.json") fs::copy_file(entry.path(), to / entry.path().filename());
    }
    std::ifstream in(from / "config.json");
    std::stringstream text;
    text << in.rdbuf();
    nlohmann::ordered_json config = nlohmann::ordered_json::parse(text.str());
    config["quantization_config"]["fmt"] = fmt;
    std::ofstream(to / "config.json") << config.dump(2);
}

TEST(Fp8DialectGolden, FnuzWeightsInMemoryGiveBitIdenticalExactLogits) {
    for (const std::string name : {"flash_schedule", "odd_dims"}) {
        const std::vector<int32_t> tokens = fixture_tokens(name);
        const std::vector<float> ocp = run(fixture_dir(name), Numerics::kExact, fp8_sites(Fp8Dialect::kOcp), tokens);
        const std::vector<float> fnuz = run(fixture_dir(name), Numerics::kExact, fp8_sites(Fp8Dialect::kFnuz), tokens);
        ASSERT_EQ(ocp.size(), fnuz.size());
        EXPECT_EQ(differing(ocp, fnuz), 0) << name;
        const double err = relative_max_error(fnuz, reference_prefix(name, "logits.npy", tokens.size()));
        std::printf("[ golden ] %s exact, FNUZ weights in memory: bit-identical to OCP; max|diff|/max|ref| = %.3e\n",
                    name.c_str(), err);
        EXPECT_LE(err, kExactTolerance) << name;
    }
}

TEST(Fp8DialectGolden, ConvertedCheckpointGivesBitIdenticalExactLogits) {
    const std::string name = "odd_dims";
    ScratchDir scratch("convert");
    CheckpointConversionOptions o;
    o.in = fixture_dir(name);
    o.out = scratch.path / "fnuz";
    o.target = Fp8Dialect::kFnuz;
    const CheckpointConversionResult result = convert_checkpoint(o);
    std::printf("[ golden ] %s -> FNUZ: %lld FP8 tensors, %s\n", name.c_str(),
                static_cast<long long>(result.fp8_tensors), result.report.describe().c_str());
    EXPECT_TRUE(result.report.exact());
    EXPECT_EQ(load_model_config(o.out / "config.json").fp8_dialect, Fp8Dialect::kFnuz);

    const std::vector<int32_t> tokens = fixture_tokens(name);
    const std::vector<float> original = run(o.in, Numerics::kExact, fp8_sites(Fp8Dialect::kOcp), tokens);
    // Native FNUZ (no conversion at load) and back to OCP at load.
    EXPECT_EQ(differing(original, run(o.out, Numerics::kExact, fp8_sites(Fp8Dialect::kFnuz), tokens)), 0);
    EXPECT_EQ(differing(original, run(o.out, Numerics::kExact, fp8_sites(Fp8Dialect::kOcp), tokens)), 0);
}

// The FNUZ maxima change results only where a finer block scale changes a rounding: with 240 instead of the
// OCP-equivalent 224, a block whose amax / 2^k lies in (224, 240] gets one more binade of subnormals, so only its
// elements below 2^-6 of the OCP scale can round differently (tests/unit/core/fp8_dialect_test.cpp shows one).
TEST(Fp8DialectGolden, ReferenceNumericsDifferOnlyByTheQuantisationMaxima) {
    const std::string name = "tame_reference";
    const std::vector<int32_t> tokens = fixture_tokens(name, kReferenceTokens);
    const std::vector<float> ocp =
        run(fixture_dir(name), Numerics::kReference, fp8_sites(Fp8Dialect::kOcp), tokens, StateDtype::kFp8);
    // FNUZ everywhere, every maximum at 224 = 448 / 2: the FNUZ codes are then the OCP quantisers' bytes.
    Fp8Sites pinned = fp8_sites(Fp8Dialect::kFnuz);
    pinned.activations.qmax = pinned.kv_rows.qmax = pinned.index_keys.qmax = kFnuzIndexKeyMax;
    const std::vector<float> fnuz_224 = run(fixture_dir(name), Numerics::kReference, pinned, tokens, StateDtype::kFp8);
    EXPECT_EQ(differing(ocp, fnuz_224), 0) << "FNUZ must differ from OCP only through the maxima";
    // The default FNUZ maxima (240 for activations and K=V rows): a finer grid in some blocks.
    const std::vector<float> fnuz =
        run(fixture_dir(name), Numerics::kReference, fp8_sites(Fp8Dialect::kFnuz), tokens, StateDtype::kFp8);
    const double err = relative_max_error(fnuz, ocp);
    const double err_ref = relative_max_error(ocp, reference_prefix(name, "logits_reference.npy", tokens.size()));
    std::printf(
        "[ golden ] %s reference numerics, FNUZ (240) vs OCP: %lld of %zu logits differ, max|diff|/max|logit| = %.3e "
        "(OCP vs patched HF: %.3e)\n",
        name.c_str(), static_cast<long long>(differing(fnuz, ocp)), ocp.size(), err, err_ref);
    EXPECT_LE(err, 1e-3) << "only sub-2^-6 elements of some blocks can round differently";
}

TEST(Fp8DialectGolden, MislabelledCheckpointsAreRefused) {
    ScratchDir scratch("mislabel");
    // OCP bytes (the fixture holds -0 codes, 0x80) claimed FNUZ.
    copy_with_fmt(fixture_dir("odd_dims"), scratch.path / "ocp_as_fnuz", "e4m3_fnuz");
    auto backend = make_cpu_backend(Numerics::kExact, 1);
    try {
        load_model(scratch.path / "ocp_as_fnuz", *backend, test_state(1));
        ADD_FAILURE() << "OCP bytes labelled FNUZ were accepted";
    } catch (const Error& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find("FNUZ e4m3"), std::string::npos) << what;
        EXPECT_NE(what.find("OCP e4m3"), std::string::npos) << what;
        EXPECT_NE(what.find("0x80"), std::string::npos) << what;
    }
    // FNUZ bytes (a conversion: blocks whose largest value is 240 hold 0x7F) claimed OCP.
    CheckpointConversionOptions o;
    o.in = fixture_dir("odd_dims");
    o.out = scratch.path / "fnuz";
    convert_checkpoint(o);
    copy_with_fmt(o.out, scratch.path / "fnuz_as_ocp", "e4m3");
    try {
        load_model(scratch.path / "fnuz_as_ocp", *backend, test_state(1));
        ADD_FAILURE() << "FNUZ bytes labelled OCP were accepted";
    } catch (const Error& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find("says the FP8 weights are OCP e4m3"), std::string::npos) << what;
        EXPECT_NE(what.find("the bytes are FNUZ e4m3"), std::string::npos) << what;
        EXPECT_NE(what.find("0x7F/0xFF"), std::string::npos) << what;
    }
}

// Calls f on every FP8 block-scaled weight of the model.
template <typename F>
void for_each_fp8_weight(ModelWeights& w, F f) {
    auto visit = [&](WeightRef& r) {
        if (r.format == WeightFormat::kFp8Block) f(r);
    };
    for (LayerWeights& l : w.layers) {
        for (WeightRef* r : {&l.attn.wq_a, &l.attn.wq_b, &l.attn.wkv, &l.attn.wo_a, &l.attn.wo_b}) visit(*r);
        if (l.attn.indexer) visit(l.attn.indexer->wq_b);
        for (ExpertWeights& e : l.ffn.experts) {
            for (WeightRef* r : {&e.w1, &e.w2, &e.w3}) visit(*r);
        }
        if (l.ffn.shared) {
            for (WeightRef* r : {&l.ffn.shared->w1, &l.ffn.shared->w2, &l.ffn.shared->w3}) visit(*r);
        }
    }
}

// The deliberate bug: OCP bytes handed to kernels that read FNUZ (no conversion). The -0 codes (0x80, NaN in FNUZ)
// are first rewritten as +0 (the same OCP value), so that the bug is only the halving: every weight is exactly half
// its value, nothing is NaN, and the golden comparison still sees it.
TEST(Fp8DialectGolden, ReadingOcpBytesAsFnuzHalvesEveryWeightAndFailsTheGolden) {
    const std::string name = "odd_dims";
    auto backend = make_cpu_backend(Numerics::kExact, 1);
    const ModelConfig config = load_model_config(fixture_dir(name) / "config.json");
    const Checkpoint checkpoint = Checkpoint::open(fixture_dir(name));
    const BoundWeights bound = bind_weights(config, checkpoint);
    ModelWeights weights = load_model_weights(config, bound, *backend);
    std::deque<std::vector<uint8_t>> copies;  // the weights without -0 codes
    int64_t halved = 0, other = 0;
    for_each_fp8_weight(weights, [&](WeightRef& w) {
        const auto* original = static_cast<const uint8_t*>(w.data);
        std::vector<uint8_t>& codes = copies.emplace_back(original, original + w.rows * w.cols);
        std::replace(codes.begin(), codes.end(), uint8_t{0x80}, uint8_t{0x00});
        std::vector<float> right(static_cast<size_t>(w.cols)), wrong(right.size());
        for (int64_t r = 0; r < w.rows; ++r) {
            const uint8_t* scales = w.scales + (r / w.block_rows) * w.scale_cols;
            dequant_fp8_row(original + r * w.cols, scales, w.cols, w.block_cols, Fp8Dialect::kOcp, right.data());
            dequant_fp8_row(codes.data() + r * w.cols, scales, w.cols, w.block_cols, Fp8Dialect::kFnuz, wrong.data());
            for (size_t j = 0; j < right.size(); ++j) (wrong[j] * 2.0f == right[j] ? halved : other) += 1;
        }
        w.data = codes.data();
        w.fp8_dialect = Fp8Dialect::kFnuz;  // the bug
    });
    std::printf("[ golden ] %s FP8 weights read in the wrong dialect: %lld halved, %lld not\n", name.c_str(),
                static_cast<long long>(halved), static_cast<long long>(other));
    EXPECT_GT(halved, 0);
    EXPECT_EQ(other, 0) << "every weight is exactly half (NaN counts as not)";
    backend->create_state(config, test_state(1));
    DeepseekV4 model(config, std::move(weights), *backend);
    const std::vector<int32_t> tokens = fixture_tokens(name);
    SequenceRunner runner(model, 0, 8);
    const std::vector<float> got = runner.feed(tokens, true);
    const double err = relative_max_error(got, reference_prefix(name, "logits.npy", tokens.size()));
    std::printf("[ golden ] %s with the wrong decode: max|diff|/max|ref| = %.3e (tolerance %.0e)\n", name.c_str(), err,
                kExactTolerance);
    EXPECT_GT(err, kExactTolerance) << "the golden test would not have caught the 2x trap";
}

}  // namespace
}  // namespace dsv4::golden
