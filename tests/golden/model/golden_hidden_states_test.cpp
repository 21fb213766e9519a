// forward() hands back the residual streams of the layers a caller asks for (what MTP and DSpark draft from): equal
// to the streams the layers computed (the debug hook sees them), independent of how the prompt is fed, and consistent
// with the logits (the head applied to the last layer's streams gives the step's logits).
#include <gtest/gtest.h>

#include <cstring>
#include <map>

#include "golden_support.h"

namespace dsv4::golden {
namespace {

std::vector<float> host(Backend& b, const Tensor& t) {
    std::vector<float> v(t.numel());
    b.to_host(t, v.data());
    return v;
}

StepBatch prompt_batch(const Fixture& f, int64_t begin, int64_t len) {
    StepBatch batch;
    batch.add_sequence(0, begin, std::span(f.tokens).subspan(begin, len), {0, 1, 2, 3, 4, 5, 6, 7});
    for (int32_t i = 0; i < static_cast<int32_t>(len); ++i) batch.logit_rows.push_back(i);
    return batch;
}

TEST(HiddenStates, EqualTheLayersStreams) {
    for (const auto& name : fixture_names()) {
        Fixture f = open_fixture(name, Numerics::kExact);
        const int layers = f.model().config().num_layers;
        const ForwardRequest request{{layers - 1, 0, layers / 2}};
        std::map<std::string, std::vector<float>> seen;
        f.model().debug_hook = [&](const std::string& n, const Tensor& t) {
            if (n.rfind("layer", 0) == 0) seen[n] = host(*f.backend, t);  // (the hook also sees int32 top-k picks)
        };
        f.backend->reset_slot(0);
        const ForwardResult r = f.model().forward(prompt_batch(f, 0, 64), request);
        ASSERT_EQ(r.hidden.size(), 3u);
        for (size_t i = 0; i < request.hidden_layers.size(); ++i) {
            const std::vector<float> got = host(*f.backend, r.hidden[i]);
            const std::vector<float>& want = seen.at("layer" + std::to_string(request.hidden_layers[i]));
            ASSERT_EQ(got.size(), want.size());
            EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * 4), 0) << name << " layer " << i;
            EXPECT_EQ(r.hidden[i].size(0), 64);
            EXPECT_EQ(r.hidden[i].size(1), f.model().config().hc_mult);
        }
    }
}

TEST(HiddenStates, DoNotDependOnHowThePromptIsFed) {
    Fixture whole = open_fixture("flash_schedule", Numerics::kExact);
    Fixture chunked = open_fixture("flash_schedule", Numerics::kExact);
    const int last = whole.model().config().num_layers - 1;
    const ForwardRequest request{{last}};
    whole.backend->reset_slot(0);
    chunked.backend->reset_slot(0);
    const std::vector<float> a =
        host(*whole.backend, whole.model().forward(prompt_batch(whole, 0, 200), request).hidden[0]);
    std::vector<float> b;
    for (int64_t begin = 0; begin < 200; begin += 37) {
        const int64_t len = std::min<int64_t>(37, 200 - begin);
        const auto part =
            host(*chunked.backend, chunked.model().forward(prompt_batch(chunked, begin, len), request).hidden[0]);
        b.insert(b.end(), part.begin(), part.end());
    }
    EXPECT_LE(relative_max_error(b, a), 1e-5);
}

TEST(HiddenStates, TheHeadOfTheLastLayerGivesTheLogits) {
    Fixture f = open_fixture("odd_dims", Numerics::kExact);
    const ModelConfig& c = f.model().config();
    f.backend->reset_slot(0);
    const ForwardResult r = f.model().forward(prompt_batch(f, 0, 40), ForwardRequest{{c.num_layers - 1}});
    const std::vector<float> logits = f.model().host_logits(r);
    // hc_head -> final norm -> lm head on the returned streams, by the same backend ops.
    const ModelWeights& w = f.model().weights();
    Backend& b = *f.backend;
    Tensor y = b.alloc(DType::kF32, {40, c.hidden_size});
    b.hc_head(r.hidden[0], w.hc_head, static_cast<float>(c.hc_eps), static_cast<float>(c.rms_norm_eps), y);
    b.rms_norm(y, &w.norm, static_cast<float>(c.rms_norm_eps), y);
    Tensor out = b.alloc(DType::kF32, {40, c.vocab_size});
    b.linear(y, w.head, LinearKind::kF32Out, out);
    const std::vector<float> again = host(b, out);
    EXPECT_EQ(std::memcmp(again.data(), logits.data(), logits.size() * 4), 0);
}

TEST(HiddenStates, LayersOutsideTheModelAreRefused) {
    Fixture f = open_fixture("odd_dims", Numerics::kExact);
    f.backend->reset_slot(0);
    const int layers = f.model().config().num_layers;
    EXPECT_THROW(f.model().forward(prompt_batch(f, 0, 4), ForwardRequest{{layers}}), Error);
    EXPECT_THROW(f.model().forward(prompt_batch(f, 0, 4), ForwardRequest{{-1}}), Error);
}

}  // namespace
}  // namespace dsv4::golden
