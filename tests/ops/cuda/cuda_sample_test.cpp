// ModelOps::sample_rows on the CUDA backend against its definition, backend/sample_rows.h's sample_row_reference,
// on fresh random rows and draws: every shaping parameter, sparse edits of every kind, structured-output masks,
// several draws of one row, ties, banned and faulty rows, probes (a verify row's draft left out, its masses reported),
// vocabularies from 1 to the model's 129,280, raw logprobs of 0 to 20 top tokens. The ids and probe masses must be
// equal (both sides sum integer masses, so no tolerance is needed), and so must the logprob ranks and top tokens
// (their values within float rounding); the outputs are poisoned first, so a draw the kernel never answers fails.
// Skipped without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "backend/model_ops.h"
#include "backend/sample_rows.h"
#include "op_test_support.h"

namespace dsv4::ops_test {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

std::vector<float> random_rows(int64_t rows, int64_t vocab) {
    std::uniform_int_distribution<int> shape(0, 3), coarse(-8, 8);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> x;
    for (int64_t r = 0; r < rows; ++r) {
        const int s = shape(rng());
        const float spread = s == 0 ? 6.0f : 1.0f;
        for (int64_t i = 0; i < vocab; ++i) {
            float v = s == 2 ? 0.5f * static_cast<float>(coarse(rng())) : spread * normal(rng());
            if (s == 3 && i % 3 == 0) v = kNegInf;
            x.push_back(v);
        }
    }
    return x;
}

template <typename T>
T pick(std::initializer_list<T> options) {
    return options.begin()[std::uniform_int_distribution<size_t>(0, options.size() - 1)(rng())];
}

// Edits of up to `most` distinct tokens, every field exercised.
void add_edits(int64_t vocab, int most, RowDraw& d, std::vector<LogitEdit>& edits) {
    std::vector<int32_t> tokens(static_cast<size_t>(vocab));
    std::iota(tokens.begin(), tokens.end(), 0);
    std::shuffle(tokens.begin(), tokens.end(), rng());
    const auto count = std::min<int64_t>(vocab, std::uniform_int_distribution<int>(0, most)(rng()));
    d.edit_begin = static_cast<int64_t>(edits.size());
    d.edit_count = count;
    std::uniform_real_distribution<float> bias(-5.0f, 5.0f);
    for (int64_t i = 0; i < count; ++i) {
        LogitEdit e;
        e.token = tokens[static_cast<size_t>(i)];
        e.masked = pick({false, false, false, true});
        e.has_bias = pick({false, true});
        e.bias = pick({bias(rng()), -1e30f, 3e38f});
        e.penalized = pick({false, true});
        e.repeat = pick({false, true});
        e.repetition = pick({1.0, 1.3, 0.7});
        e.frequency = pick({0.0, 0.5, -0.8});
        e.presence = pick({0.0, 0.4});
        edits.push_back(e);
    }
}

// A logprob within float rounding of the reference's (the GPU's log-sum-exp adds in another order); -inf (a banned
// token among the top ones of a short row) exactly.
void expect_logprob(float got, float want) {
    if (std::isinf(want)) {
        EXPECT_EQ(got, want);
    } else {
        EXPECT_NEAR(got, want, 1e-5f * (1.0f + std::fabs(want)));
    }
}

// Tokens, ranks and counts equal; logprobs as expect_logprob.
void expect_logprobs(const DrawLogprobs& got, const DrawLogprobs& want) {
    EXPECT_EQ(got.rank, want.rank);
    ASSERT_EQ(got.count, want.count);
    expect_logprob(got.logprob, want.logprob);
    for (int i = 0; i < want.count; ++i) {
        EXPECT_EQ(got.top_tokens[i], want.top_tokens[i]) << "top " << i;
        expect_logprob(got.top_logprobs[i], want.top_logprobs[i]);
    }
}

RowDraw random_draw(int64_t rows) {
    RowDraw d;
    d.row = std::uniform_int_distribution<int64_t>(0, rows - 1)(rng());
    d.greedy = pick({false, false, false, true});
    d.temperature = pick({0.2, 0.7, 1.0, 1.5});
    d.top_k = pick({0, -1, 1, 2, 40, 1000, 200000});
    d.top_p = pick({1.0, 0.95, 0.6, 0.05});
    d.min_p = pick({0.0, 0.0, 0.1, 1.0});
    d.uniform = std::uniform_real_distribution<double>(0.0, 1.0)(rng());
    d.logprobs = pick({-1, -1, 0, 1, 5, 20});
    return d;
}

// A draw probes a token (a verify row's draft: left out of the draw, its masses reported) unless it is greedy.
void maybe_probe(int64_t vocab, RowDraw& d) {
    if (!d.greedy && pick({false, true})) d.probe = std::uniform_int_distribution<int32_t>(0, vocab - 1)(rng());
}

TEST(CudaSampleRows, MatchesTheReferenceOnFreshRandomDraws) {
    DSV4_REQUIRE_GPU();
    auto gpu = make_cuda_backend(Numerics::kFast);
    for (const int64_t vocab : {int64_t{1}, int64_t{7}, int64_t{700}, int64_t{5000}, int64_t{129280}}) {
        const int64_t rows = 5, draws = 40;
        std::vector<float> x = random_rows(rows, vocab);
        x[static_cast<size_t>(vocab / 2)] = std::numeric_limits<float>::quiet_NaN();                // row 0 faulty
        if (vocab > 1) x[static_cast<size_t>(vocab + 1)] = std::numeric_limits<float>::infinity();  // row 1
        std::fill(x.begin() + 2 * vocab, x.begin() + 3 * vocab, kNegInf);                           // row 2 banned
        const int64_t words = sample_mask_words(vocab);
        std::vector<RowDraw> ds;
        std::vector<LogitEdit> edits;
        std::vector<uint64_t> masks;
        for (int64_t i = 0; i < draws; ++i) {
            RowDraw d = random_draw(rows);
            const bool surely_sampled = i < 6;  // rows 3 and 4 are plain: these draw from a distribution
            if (surely_sampled) d.row = 3 + i % 2, d.greedy = false;
            maybe_probe(vocab, d);
            add_edits(vocab, pick({0, 0, 3, 300}), d, edits);
            if (!surely_sampled && pick({false, false, true})) {
                d.mask = static_cast<int64_t>(masks.size()) / words;
                for (int64_t w = 0; w < words; ++w)
                    masks.push_back(pick({~uint64_t{0}, uint64_t{0}, uint64_t{0x5555aaaa0f0f3333}}));
            }
            ds.push_back(d);
        }
        const Tensor logits = make_tensor(*gpu, {rows, vocab}, x);
        Tensor out = gpu->alloc(DType::kI32, {draws});
        const std::vector<int32_t> poison(static_cast<size_t>(draws), -7);
        gpu->from_host(out, poison.data());
        Tensor logprobs = gpu->alloc(DType::kI32, {draws, kDrawLogprobsWords});
        std::vector<DrawLogprobs> poisoned(static_cast<size_t>(draws));
        for (DrawLogprobs& l : poisoned) l.rank = -7, l.count = -7;
        gpu->from_host(logprobs, poisoned.data());
        Tensor probes = gpu->alloc(DType::kI32, {draws, kProbeMassWords});
        const SampleRowsArgs args{ds, edits, masks};
        gpu->sample_rows(logits, args, out, &logprobs, &probes);
        Tensor probe_bits = probes;
        probe_bits.dtype = DType::kF32;
        const std::vector<float> probe_words = read(*gpu, probe_bits);
        std::vector<ProbeMasses> got_probes(static_cast<size_t>(draws));
        std::memcpy(static_cast<void*>(got_probes.data()), probe_words.data(), probe_words.size() * sizeof(float));
        Tensor logprob_bits = logprobs;
        logprob_bits.dtype = DType::kF32;
        const std::vector<float> logprob_words = read(*gpu, logprob_bits);
        std::vector<DrawLogprobs> got_logprobs(static_cast<size_t>(draws));
        std::memcpy(static_cast<void*>(got_logprobs.data()), logprob_words.data(),
                    logprob_words.size() * sizeof(float));
        Tensor bits = out;
        bits.dtype = DType::kF32;
        std::vector<float> raw = read(*gpu, bits);
        std::vector<int32_t> got(raw.size());
        std::memcpy(got.data(), raw.data(), raw.size() * sizeof(int32_t));
        int sampled = 0;
        for (int64_t i = 0; i < draws; ++i) {
            const RowDraw& d = ds[static_cast<size_t>(i)];
            const auto row = std::span<const float>(x).subspan(static_cast<size_t>(d.row * vocab), vocab);
            const auto mask = d.mask < 0 ? std::span<const uint64_t>()
                                         : std::span<const uint64_t>(masks).subspan(d.mask * words, words);
            DrawLogprobs want_logprobs;
            ProbeMasses want_probe;
            const int32_t want = sample_row_reference(row, d, edits, mask, &want_logprobs, &want_probe);
            EXPECT_EQ(got[static_cast<size_t>(i)], want)
                << "draw " << i << " of vocab " << vocab << " row " << d.row << ": greedy " << d.greedy << " T "
                << d.temperature << " top_k " << d.top_k << " top_p " << d.top_p << " min_p " << d.min_p << " u "
                << d.uniform << " edits " << d.edit_count << " mask " << d.mask << " logprobs " << d.logprobs
                << " first logit " << row[0] << " mask word " << (mask.empty() ? 0 : mask[0]) << " first edit "
                << (d.edit_count > 0 ? edits[static_cast<size_t>(d.edit_begin)].token : -1) << " masked "
                << (d.edit_count > 0 && edits[static_cast<size_t>(d.edit_begin)].masked) << " bias "
                << (d.edit_count > 0 ? edits[static_cast<size_t>(d.edit_begin)].bias : 0.0f);
            if (d.logprobs >= 0 && want >= 0) expect_logprobs(got_logprobs[static_cast<size_t>(i)], want_logprobs);
            if (d.probe >= 0 && want >= 0) {  // integer masses: the same on both sides
                EXPECT_EQ(got_probes[static_cast<size_t>(i)].probe, want_probe.probe) << "draw " << i;
                EXPECT_EQ(got_probes[static_cast<size_t>(i)].kept, want_probe.kept) << "draw " << i;
            }
            sampled += want >= 0 && !d.greedy ? 1 : 0;
        }
        if (vocab >= 700) {  // 300 edits cannot ban every token: the six plain draws sample
            EXPECT_GE(sampled, 6) << "vocab " << vocab;
        }
    }
}

// Many draws of one row at uniforms across [0, 1): the ids are the reference's, and they cover the nucleus.
TEST(CudaSampleRows, UniformsAcrossTheRangeDrawTheReferenceTokens) {
    DSV4_REQUIRE_GPU();
    auto gpu = make_cuda_backend(Numerics::kFast);
    const int64_t vocab = 129280, draws = 512;
    const std::vector<float> x = random_rows(1, vocab);
    std::vector<RowDraw> ds(static_cast<size_t>(draws));
    for (int64_t i = 0; i < draws; ++i) {
        ds[static_cast<size_t>(i)].uniform = (static_cast<double>(i) + 0.5) / draws;
        ds[static_cast<size_t>(i)].top_p = 0.9;
        ds[static_cast<size_t>(i)].temperature = 0.8;
    }
    const Tensor logits = make_tensor(*gpu, {1, vocab}, x);
    Tensor out = gpu->alloc(DType::kI32, {draws});
    gpu->sample_rows(logits, {ds, {}, {}}, out);
    Tensor bits = out;
    bits.dtype = DType::kF32;
    const std::vector<float> raw = read(*gpu, bits);
    for (int64_t i = 0; i < draws; ++i) {
        int32_t got;
        std::memcpy(&got, &raw[static_cast<size_t>(i)], sizeof got);
        EXPECT_EQ(got, sample_row_reference(x, ds[static_cast<size_t>(i)], {}, {}))
            << "uniform " << ds[static_cast<size_t>(i)].uniform;
    }
}

}  // namespace
}  // namespace dsv4::ops_test
