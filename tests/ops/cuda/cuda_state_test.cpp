// The stateful ops of the CUDA backend against the CPU backend with the same storage dtype (StateConfig::kv_dtype:
// float32, bf16, fp8_ds_mla rows + FP8 indexer keys): compressors, indexer top-k, sparse attention over the ring
// and the paged rows, ring writes; boundary snapshots, slot copies and block copies; the bytes each backend
// allocates. Both backends encode the same float rows with the same roundings (backend/state_format.h and
// backend/cuda/state_codec.cuh), so the stored values agree except where a float32 compressor sum that differs in
// its last bit crosses a bf16 / e4m3 rounding boundary. Skipped without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <deque>
#include <iterator>
#include <limits>
#include <numeric>
#include <set>

#include "op_test_support.h"

namespace dsv4::ops_test {
namespace {

std::string dtype_label(Numerics n, StateDtype d) {
    return std::string(numerics_name(n)) + " / " + std::string(state_dtype_name(d));
}

// Attention tolerance (relative L2). Stored bf16 / fp8 rows of random kv inputs are identical on both backends; in
// exact numerics the compressed entries are computed (pooling, norm, RoPE) in float32 and may straddle a rounding
// boundary of their stored codes; reference numerics compute them in double on both (op_test_support.h).
double attention_tolerance(Numerics n, StateDtype d) {
    if (n == Numerics::kExact) return d == StateDtype::kF32 ? kExactTol : kRoundedStateTol;
    if (n == Numerics::kFast) return kFastTol;  // tensor cores: bf16 queries, keys and probabilities
    return kReferenceTol;
}

// Compressor weights and sinks uploaded to both backends, and the ops of one step on both.
struct StatefulRig {
    static constexpr int kHd = 512, kIhd = 128, kIheads = 64;
    const int heads;  // attention heads (the config's 8, or the Flash model's 64)
    const ModelConfig c;
    Pair& p;
    std::deque<std::vector<int64_t>> shapes;  // upload_vec shape storage
    CompressorWeights csa[2], hca[2], ix[2];  // [cpu, gpu]
    VecRef sinks[2];

    explicit StatefulRig(Pair& pair, int n_heads = 8, const ModelConfig& config = op_config())
        : heads(n_heads), c(config), p(pair) {
        const std::vector<float> ape_csa = random_floats(4 * 2 * kHd, 0.5f), ape_hca = random_floats(128 * kHd, 0.5f),
                                 ape_ix = random_floats(4 * 2 * kIhd, 0.5f);
        std::vector<float> norm = random_floats(kHd, 0.1f), norm_ix = random_floats(kIhd, 0.1f);
        for (auto& v : norm) v += 1.0f;
        for (auto& v : norm_ix) v += 1.0f;
        const std::vector<float> sink_values = random_floats(heads, 0.5f);
        Backend* backends[2] = {p.cpu.get(), p.gpu.get()};
        for (int i = 0; i < 2; ++i) {
            csa[i] = upload_compressor(*backends[i], 4, kHd, true, ape_csa, norm, shapes);
            hca[i] = upload_compressor(*backends[i], 128, kHd, false, ape_hca, norm, shapes);
            ix[i] = upload_compressor(*backends[i], 4, kIhd, true, ape_ix, norm_ix, shapes);
            sinks[i] = upload_vec(*backends[i], sink_values, shapes.emplace_back());
        }
    }

    void compress(int64_t n) {
        auto run = [&](int layer, CompressorRole role, int width, const CompressorWeights* w, const RopeParams& rope) {
            const auto a = random_floats(n * width), g = random_floats(n * width);
            Tensor ac = make_tensor(*p.cpu, {n, width}, a), gc = make_tensor(*p.cpu, {n, width}, g);
            Tensor ag = make_tensor(*p.gpu, {n, width}, a), gg = make_tensor(*p.gpu, {n, width}, g);
            p.cpu->compress(layer, role, ac, gc, w[0], rope, 1e-6f);
            p.gpu->compress(layer, role, ag, gg, w[1], rope, 1e-6f);
        };
        run(1, CompressorRole::kMain, 2 * kHd, csa, c.layers[1].rope);
        run(1, CompressorRole::kIndexer, 2 * kIhd, ix, c.layers[1].rope);
        run(2, CompressorRole::kMain, kHd, hca, c.layers[2].rope);
    }

    // Indexer top-k on both; returns the CPU's picks (a tensor of the CPU backend) and counts the tokens whose pick
    // sets differ.
    Tensor indexer(int64_t n, int64_t* differing) {
        const auto qi = random_floats(n * kIheads * kIhd), wi = random_floats(n * kIheads, 0.05f);
        Tensor qic = make_tensor(*p.cpu, {n, kIheads, kIhd}, qi), qig = make_tensor(*p.gpu, {n, kIheads, kIhd}, qi);
        p.cpu->indexer_query_sim(qic);
        p.gpu->indexer_query_sim(qig);
        Tensor wic = make_tensor(*p.cpu, {n, kIheads}, wi), wig = make_tensor(*p.gpu, {n, kIheads}, wi);
        const int k = c.index_topk;
        Tensor tc = p.cpu->alloc(DType::kI32, {n, k}), tg = p.gpu->alloc(DType::kI32, {n, k});
        p.cpu->indexer_topk(1, qic, wic, 4, tc);
        p.gpu->indexer_topk(1, qig, wig, 4, tg);
        std::vector<float> tg_host(n * k);
        p.gpu->to_host(Tensor(tg.data, DType::kF32, {n, k}), tg_host.data());
        *differing = 0;
        for (int64_t t = 0; t < n; ++t) {
            std::set<int32_t> sc, sg;
            for (int i = 0; i < k; ++i) {
                sc.insert(tc.i32()[t * k + i]);
                int32_t v;
                std::memcpy(&v, &tg_host[t * k + i], 4);
                sg.insert(v);
            }
            *differing += sc != sg;
        }
        return tc;
    }

    // Attention of every layer (CSA with the CPU's picks on both sides), then the ring writes; returns the largest
    // relative L2 difference of the outputs. norm_first: the K=V rows go through norm_ropes (weightless norm, the
    // layer's RoPE) as the layer's window rows first, which a backend may store there already (CUDA: decode steps).
    double attention_and_store(int64_t n, const Tensor& picks, bool norm_first = false) {
        double worst = 0.0;
        for (int layer = 0; layer < 3; ++layer) {
            const auto q = random_floats(n * heads * kHd), kv = random_floats(n * kHd);
            Tensor qc = make_tensor(*p.cpu, {n, heads, kHd}, q), qg = make_tensor(*p.gpu, {n, heads, kHd}, q);
            Tensor kc = make_tensor(*p.cpu, {n, kHd}, kv), kg = make_tensor(*p.gpu, {n, kHd}, kv);
            Tensor oc = make_tensor(*p.cpu, {n, heads, kHd}), og = make_tensor(*p.gpu, {n, heads, kHd});
            if (norm_first) {
                const NormRopeTarget cpu_rows[] = {{kc.view({n, 1, kHd}), nullptr, &c.layers[layer].rope, layer}};
                const NormRopeTarget gpu_rows[] = {{kg.view({n, 1, kHd}), nullptr, &c.layers[layer].rope, layer}};
                p.cpu->norm_ropes(cpu_rows, 1e-6f);
                p.gpu->norm_ropes(gpu_rows, 1e-6f);
            }
            Tensor topk_g;
            if (layer == 1) {
                topk_g = p.gpu->alloc(DType::kI32, {n, c.index_topk});
                p.gpu->from_host(topk_g, picks.data);
            }
            p.cpu->attention(layer, c.layers[layer], qc, kc, sinks[0], layer == 1 ? &picks : nullptr, 0.0441942f, oc);
            p.gpu->attention(layer, c.layers[layer], qg, kg, sinks[1], layer == 1 ? &topk_g : nullptr, 0.0441942f, og);
            worst = std::max(worst, rel_l2(read(*p.gpu, og), read(*p.cpu, oc)));
            // The fused inverse RoPE (in the split merge, fast numerics) gives the bits of attention then rope.
            Tensor unrotated = make_tensor(*p.gpu, {n, heads, kHd});
            p.gpu->attention_unrotated(layer, c.layers[layer], qg, kg, sinks[1], layer == 1 ? &topk_g : nullptr,
                                       0.0441942f, unrotated);
            p.gpu->rope(og, c.layers[layer].rope, true);
            const std::vector<float> fused = read(*p.gpu, unrotated), separate = read(*p.gpu, og);
            EXPECT_EQ(std::memcmp(fused.data(), separate.data(), fused.size() * sizeof(float)), 0) << "layer " << layer;
            p.cpu->store_window(layer, kc);
            p.gpu->store_window(layer, kg);
        }
        return worst;
    }
};

// Two sequences of different lengths in one step, chunk boundaries inside compression windows, then decode steps.
void stateful_attention_case(Numerics numerics, StateDtype dtype, int heads = 8, Fp8Dialect dialect = Fp8Dialect::kOcp,
                             bool norm_first = false) {
    const std::string label = dtype_label(numerics, dtype) + " / " + std::to_string(heads) + " heads / " +
                              std::string(fp8_dialect_name(dialect));
    Pair p(numerics, op_config(), 2, 16, dtype, 0, dialect);
    for (int32_t slot : {0, 1}) {
        p.cpu->reset_slot(slot);
        p.gpu->reset_slot(slot);
    }
    StatefulRig rig(p, heads);
    const int64_t lengths[2][4] = {{301, 1, 1, 1}, {139, 1, 1, 1}};
    int64_t pos[2] = {0, 0};
    for (int step = 0; step < 4; ++step) {
        StepBatch b;
        for (int s = 0; s < 2; ++s) {
            std::vector<int32_t> tok(lengths[s][step], 7);
            std::vector<int32_t> table(8);
            std::iota(table.begin(), table.end(), s * 8);
            b.add_sequence(s, pos[s], tok, table);
            pos[s] += lengths[s][step];
        }
        p.step(b);
        const int64_t n = b.n_tokens();
        rig.compress(n);
        int64_t differing = 0;
        const Tensor picks = rig.indexer(n, &differing);
        // Identical picks with float32 state, and in reference numerics with any state (double sums on both
        // backends: the same scores, exact ties broken by index on both). Rounded keys in exact numerics (a float32
        // compressor sum one bit apart may change one key code): pick sets may differ on 1% of a step's tokens.
        const bool identical = numerics == Numerics::kReference || dtype == StateDtype::kF32;
        EXPECT_LE(differing, identical ? 0 : std::max<int64_t>(1, n / 100)) << label << " step " << step;
        EXPECT_LE(rig.attention_and_store(n, picks, norm_first), attention_tolerance(numerics, dtype))
            << label << " step " << step << (norm_first ? " (norm_ropes first)" : "");
    }
}

// Short contexts: where no token of a step sees more than k entries (its entry bucket <= k), the GPU top-k is every
// entry in index order, so a CSA layer's attention without picks (every complete entry: what the model gives it there,
// ModelOps::indexer_picks_all) equals its attention with them, bit for bit, on both backends; a step past that bucket
// scores again.
TEST(CudaState, IndexerPicksAllAtShortContexts) {
    DSV4_REQUIRE_GPU();
    ModelConfig c = op_config();
    c.index_topk = 64;  // the smallest entry bucket: positions below 256 at ratio 4
    Pair p(Numerics::kFast, c, 2, 16, StateDtype::kFp8);
    for (int32_t slot : {0, 1}) {
        p.cpu->reset_slot(slot);
        p.gpu->reset_slot(slot);
    }
    StatefulRig rig(p, 8, c);
    const int64_t lengths[3][2] = {{201, 97}, {54, 1}, {300, 1}};
    const bool picks_all[3] = {true, true, false};  // largest positions 200, 254, 554
    int64_t pos[2] = {0, 0};
    for (int step = 0; step < 3; ++step) {
        StepBatch b;
        std::vector<int64_t> eligible;
        for (int s = 0; s < 2; ++s) {
            std::vector<int32_t> table(8);
            std::iota(table.begin(), table.end(), s * 8);
            b.add_sequence(s, pos[s], std::vector<int32_t>(lengths[step][s], 7), table);
            for (int64_t i = 0; i < lengths[step][s]; ++i) eligible.push_back((pos[s] + i + 1) / 4);
            pos[s] += lengths[step][s];
        }
        p.step(b);
        const int64_t n = b.n_tokens(), k = c.index_topk, heads = rig.heads, hd = StatefulRig::kHd;
        rig.compress(n);
        ASSERT_EQ(p.gpu->indexer_picks_all(4, static_cast<int>(k)), picks_all[step]) << "step " << step;
        ASSERT_FALSE(p.cpu->indexer_picks_all(4, static_cast<int>(k)));  // its top-k orders picks by score
        if (!picks_all[step]) {
            int64_t differing = 0;
            rig.indexer(n, &differing);  // scored again, on both backends
            continue;
        }
        const auto qi = random_floats(n * StatefulRig::kIheads * StatefulRig::kIhd);
        const auto wi = random_floats(n * StatefulRig::kIheads, 0.05f);
        Tensor scored = p.gpu->alloc(DType::kI32, {n, k});
        p.gpu->indexer_topk(1, make_tensor(*p.gpu, {n, StatefulRig::kIheads, StatefulRig::kIhd}, qi),
                            make_tensor(*p.gpu, {n, StatefulRig::kIheads}, wi), 4, scored);
        std::vector<int32_t> picks(n * k);  // the int32 codes read back as float32 words
        p.gpu->to_host(Tensor(scored.data, DType::kF32, {n, k}), reinterpret_cast<float*>(picks.data()));
        for (int64_t t = 0; t < n; ++t) {
            for (int64_t i = 0; i < k; ++i) {
                ASSERT_EQ(picks[t * k + i], i < eligible[t] ? i : -1) << "step " << step << " token " << t;
            }
        }
        const auto q = random_floats(n * heads * hd), kv = random_floats(n * hd);
        Backend* backends[2] = {p.cpu.get(), p.gpu.get()};
        for (int i = 0; i < 2; ++i) {
            Backend& be = *backends[i];
            Tensor given = be.alloc(DType::kI32, {n, k});
            be.from_host(given, picks.data());
            Tensor with = make_tensor(be, {n, heads, hd}), without = make_tensor(be, {n, heads, hd});
            Tensor kv_rows = make_tensor(be, {n, hd}, kv);
            be.attention(1, c.layers[1], make_tensor(be, {n, heads, hd}, q), kv_rows, rig.sinks[i], &given, 0.05f,
                         with);
            be.attention(1, c.layers[1], make_tensor(be, {n, heads, hd}, q), kv_rows, rig.sinks[i], nullptr, 0.05f,
                         without);
            const std::vector<float> a = read(be, with), none = read(be, without);
            EXPECT_EQ(std::memcmp(a.data(), none.data(), a.size() * sizeof(float)), 0) << be.name() << " step " << step;
            EXPECT_FALSE(std::any_of(a.begin(), a.end(), [](float v) { return std::isnan(v); })) << be.name();
            be.store_window(1, kv_rows);  // the next step's window reads these rows from the ring
        }
    }
}

// The compressors and the indexer on the side stream beside the query path (CudaBackend::side_stream_takes:
// decode-sized steps whose projections run on the GEMV kernels; prefill chunks with side_stream_prefill, their
// projections on cuBLASLt and the bf16 GEMM) give what they give on one stream, bit for bit: the indexer's picks and
// the attention of a CSA and an HCA layer over two prefill chunks (the second completes an HCA window) and decode
// steps that complete compression windows, on one stream, beside at decode sizes, and beside at every size.
TEST(CudaState, CompressorsBesideEqualOneStream) {
    DSV4_REQUIRE_GPU();
    const ModelConfig c = op_config();
    const int64_t d = c.hidden_size, hd = 512, ihd = 128, iheads = 64, heads = 8, k = c.index_topk;
    const HostWeight wq_b = make_weight(WeightFormat::kFp8Block, iheads * ihd, c.q_lora_rank),
                     weights_proj = make_weight(WeightFormat::kBF16, iheads, d);
    const HostWeight csa_kv = make_weight(WeightFormat::kBF16, 2 * hd, d),
                     csa_gate = make_weight(WeightFormat::kBF16, 2 * hd, d),
                     hca_kv = make_weight(WeightFormat::kBF16, hd, d),
                     hca_gate = make_weight(WeightFormat::kBF16, hd, d),
                     ix_kv = make_weight(WeightFormat::kBF16, 2 * ihd, d),
                     ix_gate = make_weight(WeightFormat::kBF16, 2 * ihd, d);
    const auto ape_csa = random_floats(4 * 2 * hd, 0.5f), ape_hca = random_floats(128 * hd, 0.5f),
               ape_ix = random_floats(4 * 2 * ihd, 0.5f), sinks = random_floats(heads, 0.5f);
    auto norm_weight = [](int64_t n) {
        std::vector<float> v = random_floats(n, 0.1f);
        for (auto& x : v) x += 1.0f;
        return v;
    };
    const auto norm = norm_weight(hd), norm_ix = norm_weight(ihd);
    const int64_t lengths[] = {90, 70, 1, 1, 1, 1, 1, 1, 1, 1};  // decode steps complete windows 40 and 41
    struct StepInputs {
        std::vector<float> x, q, kv, q_residual;
    };
    std::vector<StepInputs> inputs;
    for (int64_t n : lengths) {
        inputs.push_back({random_floats(n * d), random_floats(n * heads * hd), random_floats(n * hd),
                          random_floats(n * c.q_lora_rank)});
    }
    std::vector<float> outputs[3];
    std::vector<int32_t> picks[3];
    for (int side : {0, 1, 2}) {  // one stream, beside at decode sizes, beside at every size
        CudaOptions options = cuda_options_from_env({});
        options.side_stream = side > 0;
        options.side_stream_prefill = side == 2;
        std::unique_ptr<Backend> gpu = make_cuda_backend(Numerics::kFast, options);
        StateConfig state;
        state.max_slots = 1;
        state.num_blocks = 8;
        state.kv_dtype = StateDtype::kFp8;
        gpu->create_state(c, state);
        gpu->reset_slot(0);
        std::deque<std::vector<int64_t>> shapes;
        auto compressor = [&](int ratio, int64_t head_dim, const std::vector<float>& ape, const std::vector<float>& nw,
                              const HostWeight& wkv, const HostWeight& wgate) {
            CompressorWeights w =
                upload_compressor(*gpu, ratio, static_cast<int>(head_dim), ratio == 4, ape, nw, shapes);
            w.wkv = upload(*gpu, wkv);
            w.wgate = upload(*gpu, wgate);
            return w;
        };
        const CompressorWeights csa = compressor(4, hd, ape_csa, norm, csa_kv, csa_gate),
                                hca = compressor(128, hd, ape_hca, norm, hca_kv, hca_gate);
        IndexerWeights indexer;
        indexer.compressor = compressor(4, ihd, ape_ix, norm_ix, ix_kv, ix_gate);
        indexer.wq_b = upload(*gpu, wq_b);
        indexer.weights_proj = upload(*gpu, weights_proj);
        const VecRef sink = upload_vec(*gpu, sinks, shapes.emplace_back());
        int64_t pos = 0;
        for (size_t step = 0; step < std::size(lengths); ++step) {
            const int64_t n = lengths[step];
            const StepInputs& in = inputs[step];
            gpu->begin_step(simple_batch(n, pos));
            pos += n;
            auto target = [&](CompressorRole role, const CompressorWeights& w) {
                const int64_t width = w.overlap ? 2 * w.head_dim : w.head_dim;
                return CompressTarget{role, &w, gpu->alloc(DType::kF32, {n, width}),
                                      gpu->alloc(DType::kF32, {n, width})};
            };
            Tensor x = make_tensor(*gpu, {n, d}, in.x);
            const CompressTarget csa_layer[] = {target(CompressorRole::kMain, csa),
                                                target(CompressorRole::kIndexer, indexer.compressor)};
            const CompressTarget hca_layer[] = {target(CompressorRole::kMain, hca)};
            gpu->compressors(1, x, csa_layer, c.layers[1].rope, 1e-6f);
            gpu->compressors(2, x, hca_layer, c.layers[2].rope, 1e-6f);
            Tensor topk = gpu->alloc(DType::kI32, {n, k});
            gpu->indexer_picks(1, x, make_tensor(*gpu, {n, c.q_lora_rank}, in.q_residual), indexer, c.layers[1].rope, 4,
                               static_cast<int>(iheads), topk);
            for (int layer : {1, 2}) {
                Tensor kv = make_tensor(*gpu, {n, hd}, in.kv), o = make_tensor(*gpu, {n, heads, hd});
                gpu->attention(layer, c.layers[layer], make_tensor(*gpu, {n, heads, hd}, in.q), kv, sink,
                               layer == 1 ? &topk : nullptr, 0.05f, o);
                gpu->store_window(layer, kv);
                const std::vector<float> got = read(*gpu, o);
                outputs[side].insert(outputs[side].end(), got.begin(), got.end());
            }
            std::vector<int32_t> step_picks(n * k);  // read after the attention, which joined the side stream
            gpu->to_host(Tensor(topk.data, DType::kF32, {n, k}), reinterpret_cast<float*>(step_picks.data()));
            picks[side].insert(picks[side].end(), step_picks.begin(), step_picks.end());
        }
    }
    for (int side : {1, 2}) {
        EXPECT_EQ(picks[0], picks[side]) << "side mode " << side;
        ASSERT_EQ(outputs[0].size(), outputs[side].size());
        EXPECT_EQ(std::memcmp(outputs[0].data(), outputs[side].data(), outputs[0].size() * sizeof(float)), 0)
            << "side mode " << side;
        EXPECT_FALSE(std::any_of(outputs[side].begin(), outputs[side].end(), [](float v) { return std::isnan(v); }));
    }
}

TEST(CudaState, StatefulAttentionFlashDims) {
    DSV4_REQUIRE_GPU();
    for (Numerics numerics : {Numerics::kExact, Numerics::kReference}) {
        stateful_attention_case(numerics, StateDtype::kF32);
    }
}

TEST(CudaState, StatefulAttentionStoredBf16AndFp8) {
    DSV4_REQUIRE_GPU();
    for (StateDtype dtype : {StateDtype::kBf16, StateDtype::kFp8}) {
        for (Numerics numerics : {Numerics::kExact, Numerics::kReference}) stateful_attention_case(numerics, dtype);
    }
}

// FNUZ K=V rows and indexer keys (MI300X's dialect: 240 / 224 maxima, FNUZ codes) written by the device codec and read
// by the attention and indexer kernels, against the CPU backend in the same dialect; the reference FP8-sim of the K=V
// rows in FNUZ too.
TEST(CudaState, StatefulAttentionFnuzRowsAndKeys) {
    DSV4_REQUIRE_GPU();
    for (Numerics numerics : {Numerics::kExact, Numerics::kReference}) {
        stateful_attention_case(numerics, StateDtype::kFp8, 8, Fp8Dialect::kFnuz);
    }
    stateful_attention_case(Numerics::kFast, StateDtype::kFp8, 64, Fp8Dialect::kFnuz);
}

// A prefill-sized step (1,100 tokens of two sequences): the indexer's scores in ranges of 1,024 entries (the long
// range, taken where the step has blocks enough) and the wide attention kernel (one split a token), both against the
// CPU.
// Fresh slots 0 and 1, then a prefill step of two sequences (`first` and `second` tokens from position 0) on both
// backends: the compressors, then the indexer on both; returns the CPU's picks, sets the step's tokens and the tokens
// whose pick sets differ.
Tensor prefill_two_sequences(Pair& p, StatefulRig& rig, int first, int second, int64_t& n, int64_t& differing) {
    for (int32_t slot : {0, 1}) {
        p.cpu->reset_slot(slot);
        p.gpu->reset_slot(slot);
    }
    StepBatch b;
    for (int s = 0; s < 2; ++s) {
        std::vector<int32_t> table(8);
        std::iota(table.begin(), table.end(), s * 8);
        b.add_sequence(s, 0, std::vector<int32_t>(s == 0 ? first : second, 7), table);
    }
    p.step(b);
    n = b.n_tokens();
    rig.compress(n);
    return rig.indexer(n, &differing);
}

TEST(CudaState, LongIndexerRangesAndWideAttention) {
    DSV4_REQUIRE_GPU();
    Pair p(Numerics::kFast, op_config(), 2, 16, StateDtype::kFp8);
    StatefulRig rig(p, 64);
    int64_t n = 0, differing = 0;
    const Tensor picks = prefill_two_sequences(p, rig, 600, 500, n, differing);
    EXPECT_LE(differing, n / 100);
    EXPECT_LE(rig.attention_and_store(n, picks), attention_tolerance(Numerics::kFast, StateDtype::kFp8));
}

// The queries' RMSNorm and RoPE in the wide kernel's staging (CudaOptions::fused_query_norm) give what norm_rope then
// attention_unrotated give, bit for bit: a prefill step of two sequences (441 tokens, 64 heads), a sliding, a CSA
// (the CPU's picks) and an HCA layer; on the mma.sync kernel and on the wgmma one (DSV4_MQA_WGMMA).
void normed_queries_case(const char* wgmma) {
    const ScopedEnv fused("DSV4_FUSED_QUERY_NORM", "1"), on_wgmma("DSV4_MQA_WGMMA", wgmma);
    Pair p(Numerics::kFast, op_config(), 2, 16, StateDtype::kFp8);
    StatefulRig rig(p, 64);
    int64_t n = 0, differing = 0;
    const Tensor picks = prefill_two_sequences(p, rig, 300, 141, n, differing);
    const int64_t hd = StatefulRig::kHd;
    for (int layer = 0; layer < 3; ++layer) {
        const auto q = random_floats(n * 64 * hd, 3.0f), kv = random_floats(n * hd);
        Tensor q_apart = make_tensor(*p.gpu, {n, 64, hd}, q), q_fused = make_tensor(*p.gpu, {n, 64, hd}, q);
        Tensor kg = make_tensor(*p.gpu, {n, hd}, kv);
        Tensor apart = make_tensor(*p.gpu, {n, 64, hd}), fused_out = make_tensor(*p.gpu, {n, 64, hd});
        Tensor topk;
        if (layer == 1) {
            topk = p.gpu->alloc(DType::kI32, {n, rig.c.index_topk});
            p.gpu->from_host(topk, picks.data);
        }
        const LayerConfig& lc = rig.c.layers[layer];
        p.gpu->norm_rope(q_apart, nullptr, 1e-6f, lc.rope);
        p.gpu->attention_unrotated(layer, lc, q_apart, kg, rig.sinks[1], layer == 1 ? &topk : nullptr, 0.0441942f,
                                   apart);
        p.gpu->normed_attention_unrotated(layer, lc, q_fused, kg, rig.sinks[1], layer == 1 ? &topk : nullptr,
                                          0.0441942f, 1e-6f, fused_out);
        const std::vector<float> want = read(*p.gpu, apart), got = read(*p.gpu, fused_out);
        EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0)
            << "layer " << layer << ", wgmma " << wgmma;
        EXPECT_FALSE(std::any_of(got.begin(), got.end(), [](float v) { return std::isnan(v); }))
            << "layer " << layer << ", wgmma " << wgmma;
    }
}

TEST(CudaState, NormedQueriesInTheWideKernel) {
    DSV4_REQUIRE_GPU();
    for (const char* wgmma : {"0", "1"}) normed_queries_case(wgmma);
}

// The wide kernel's outputs written as the output projection's FP8 activations (CudaOptions::attention_fp8_out;
// normed_attention_projected) give the bits of the float outputs quantized by their own pass (ModelOps' two ops on the
// same backend): a prefill step of two sequences (441 tokens: padded FP8 rows), a sliding, a CSA and an HCA layer,
// wo_a of 8 groups on FP8 tensor cores; the float outputs, poisoned with NaN, stay untouched.
TEST(CudaState, AttentionOutputsAsFp8Activations) {
    DSV4_REQUIRE_GPU();
    const ScopedEnv fused("DSV4_FUSED_QUERY_NORM", "1"), fp8_out("DSV4_ATTENTION_FP8_OUT", "1"),
        mma("DSV4_MQA_WGMMA", "0");
    Pair p(Numerics::kFast, op_config(), 2, 16, StateDtype::kFp8);
    StatefulRig rig(p, 64);
    int64_t n = 0, differing = 0;
    const Tensor picks = prefill_two_sequences(p, rig, 300, 141, n, differing);
    ASSERT_NE(n % 4, 0) << "the padded FP8 rows";
    const int64_t hd = StatefulRig::kHd, groups = 8, rank = 1024;
    const WeightRef wo_a = upload(*p.gpu, make_weight(WeightFormat::kFp8Block, groups * rank, 64 * hd / groups));
    const std::vector<float> poison(n * 64 * hd, std::numeric_limits<float>::quiet_NaN());
    for (int layer = 0; layer < 3; ++layer) {
        const auto q = random_floats(n * 64 * hd, 3.0f), kv = random_floats(n * hd);
        Tensor q_apart = make_tensor(*p.gpu, {n, 64, hd}, q), q_fused = make_tensor(*p.gpu, {n, 64, hd}, q);
        Tensor kg = make_tensor(*p.gpu, {n, hd}, kv);
        Tensor o_apart = make_tensor(*p.gpu, {n, 64, hd}), o_fused = make_tensor(*p.gpu, {n, 64, hd}, poison);
        Tensor z_apart = make_tensor(*p.gpu, {n, groups * rank}), z_fused = make_tensor(*p.gpu, {n, groups * rank});
        Tensor topk;
        if (layer == 1) {
            topk = p.gpu->alloc(DType::kI32, {n, rig.c.index_topk});
            p.gpu->from_host(topk, picks.data);
        }
        const LayerConfig& lc = rig.c.layers[layer];
        const Tensor* picked = layer == 1 ? &topk : nullptr;
        p.gpu->ModelOps::normed_attention_projected(layer, lc, q_apart, kg, rig.sinks[1], picked, 0.0441942f, 1e-6f,
                                                    o_apart, wo_a, static_cast<int>(groups), z_apart);
        p.gpu->normed_attention_projected(layer, lc, q_fused, kg, rig.sinks[1], picked, 0.0441942f, 1e-6f, o_fused,
                                          wo_a, static_cast<int>(groups), z_fused);
        const std::vector<float> want = read(*p.gpu, z_apart), got = read(*p.gpu, z_fused);
        EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0) << "layer " << layer;
        EXPECT_FALSE(std::any_of(got.begin(), got.end(), [](float v) { return std::isnan(v); })) << "layer " << layer;
        const std::vector<float> o = read(*p.gpu, o_fused);
        EXPECT_TRUE(std::all_of(o.begin(), o.end(), [](float v) { return std::isnan(v); }))
            << "layer " << layer << ": the float outputs were written (the fused path did not run)";
    }
}

// Fast numerics attention runs on tensor cores (kernels_attention_mqa.cu): 8 heads (one partial block of 32) and the
// Flash model's 64, every storage dtype, prefill chunks and decode steps.
TEST(CudaState, StatefulAttentionFastNumerics) {
    DSV4_REQUIRE_GPU();
    for (StateDtype dtype : {StateDtype::kF32, StateDtype::kBf16, StateDtype::kFp8}) {
        for (int heads : {8, 64}) stateful_attention_case(Numerics::kFast, dtype, heads);
    }
}

// A decode step's K=V rows stored by norm_ropes (its window_layer) before attention reads them from the ring, in the
// modes where the CUDA backend does that (exact, fast) and where it does not (reference: kv_cache_sim comes between).
TEST(CudaState, WindowRowsStoredByNormRopes) {
    DSV4_REQUIRE_GPU();
    for (Numerics numerics : {Numerics::kExact, Numerics::kFast, Numerics::kReference}) {
        for (StateDtype dtype : {StateDtype::kBf16, StateDtype::kFp8}) {
            stateful_attention_case(numerics, dtype, numerics == Numerics::kFast ? 64 : 8, Fp8Dialect::kOcp, true);
        }
    }
}

// Boundary snapshots, slot copies and block copies move stored rows as bytes: after save / restore / copy, the three
// resulting sequences attend over exactly the rows the CPU backend holds.
// DSpark's draft block (ModelOps::block_attention): every row of a sequence's block attends to the window of ring
// rows before the block and to the block's rows, and writes no state. Two sequences with contexts of 200 and 90
// positions; `blocks` blocks of `len` rows, the last starting after the context and each earlier one `len` positions
// before the next (the later blocks read the ring where the earlier ones would have written, had they written).
void draft_block_case(Numerics numerics, StateDtype dtype, int64_t len, int blocks) {
    const std::string label = dtype_label(numerics, dtype) + " block of " + std::to_string(len);
    Pair p(numerics, op_config(), 2, 16, dtype);
    StatefulRig rig(p);
    constexpr int kHd = StatefulRig::kHd;
    const int64_t context[2] = {200, 90};
    auto batch = [&](const int64_t* start, int64_t rows) {
        StepBatch b;
        for (int s = 0; s < 2; ++s) {
            std::vector<int32_t> tok(rows, 7);
            std::vector<int32_t> table(8);
            std::iota(table.begin(), table.end(), s * 8);
            b.add_sequence(s, start[s], tok, table);
        }
        return b;
    };
    for (int32_t slot : {0, 1}) {
        p.cpu->reset_slot(slot);
        p.gpu->reset_slot(slot);
    }
    StepBatch prefill;
    for (int s = 0; s < 2; ++s) {
        std::vector<int32_t> table(8);
        std::iota(table.begin(), table.end(), s * 8);
        prefill.add_sequence(s, 0, std::vector<int32_t>(context[s], 7), table);
    }
    p.step(prefill);  // the context rows
    const int64_t n_ctx = context[0] + context[1];
    const auto ctx = random_floats(n_ctx * kHd);
    p.cpu->store_window(0, make_tensor(*p.cpu, {n_ctx, kHd}, ctx));
    p.gpu->store_window(0, make_tensor(*p.gpu, {n_ctx, kHd}, ctx));
    for (int block = 0; block < blocks; ++block) {
        // The last block starts after the context; a block before it rewrites stored positions, which the last one
        // reads from the ring.
        const int64_t back = (blocks - 1 - block) * len;
        const int64_t start[2] = {context[0] - back, context[1] - back};
        p.step(batch(start, len));  // the draft blocks
        const int64_t n = 2 * len;
        const auto q = random_floats(n * rig.heads * kHd), kv = random_floats(n * kHd);
        Tensor oc = make_tensor(*p.cpu, {n, rig.heads, kHd}), og = make_tensor(*p.gpu, {n, rig.heads, kHd});
        p.cpu->block_attention(0, make_tensor(*p.cpu, {n, rig.heads, kHd}, q), make_tensor(*p.cpu, {n, kHd}, kv),
                               rig.sinks[0], 0.0441942f, oc);
        p.gpu->block_attention(0, make_tensor(*p.gpu, {n, rig.heads, kHd}, q), make_tensor(*p.gpu, {n, kHd}, kv),
                               rig.sinks[1], 0.0441942f, og);
        EXPECT_LE(rel_l2(read(*p.gpu, og), read(*p.cpu, oc)), attention_tolerance(numerics, dtype))
            << label << ", block " << block;
    }
}

TEST(CudaState, DraftBlockAttention) {
    DSV4_REQUIRE_GPU();
    for (StateDtype dtype : {StateDtype::kF32, StateDtype::kBf16, StateDtype::kFp8}) {
        for (Numerics numerics : {Numerics::kExact, Numerics::kReference}) draft_block_case(numerics, dtype, 5, 1);
    }
}

// One-row blocks (one token a sequence, the shape of a decode step, whose attention writes the ring first): the
// draft block still writes nothing, in every numerics mode.
TEST(CudaState, OneRowDraftBlocksWriteNoState) {
    DSV4_REQUIRE_GPU();
    for (StateDtype dtype : {StateDtype::kBf16, StateDtype::kFp8}) {
        for (Numerics numerics : {Numerics::kExact, Numerics::kFast}) draft_block_case(numerics, dtype, 1, 2);
    }
}

TEST(CudaState, SnapshotsAndCopiesOfStoredRows) {
    DSV4_REQUIRE_GPU();
    for (StateDtype dtype : {StateDtype::kF32, StateDtype::kBf16, StateDtype::kFp8}) {
        const std::string label = dtype_label(Numerics::kExact, dtype);
        Pair p(Numerics::kExact, op_config(), 3, 16, dtype, 2);
        for (int32_t slot : {0, 1, 2}) {
            p.cpu->reset_slot(slot);
            p.gpu->reset_slot(slot);
        }
        StatefulRig rig(p);
        std::vector<int32_t> table(8);
        std::iota(table.begin(), table.end(), 0);
        // Slot 0: 260 positions (boundary 256 + 4 <= rewind capacity 8 past it).
        StepBatch prefill;
        prefill.add_sequence(0, 0, std::vector<int32_t>(260, 7), table);
        p.step(prefill);
        rig.compress(260);
        int64_t differing = 0;
        Tensor picks = rig.indexer(260, &differing);
        EXPECT_LE(differing, dtype == StateDtype::kF32 ? 0 : 1) << label << " prefill";
        EXPECT_LE(rig.attention_and_store(260, picks), attention_tolerance(Numerics::kExact, dtype)) << label;
        for (Backend* b : {p.cpu.get(), p.gpu.get()}) {
            b->save_snapshot(0, 1, 256);
            b->restore_snapshot(1, 1, 256);  // slot 1 resumes at 256 on the shared blocks
            b->copy_slot(0, 2);              // slot 2: a fork of slot 0 at 260
            b->copy_block(1, 9);             // slot 0 continues on a copy of its partial block
        }
        std::vector<int32_t> copied = table;
        copied[1] = 9;
        StepBatch next;
        next.add_sequence(1, 256, std::vector<int32_t>(1, 7), table);
        next.add_sequence(2, 260, std::vector<int32_t>(1, 7), table);
        next.add_sequence(0, 260, std::vector<int32_t>(1, 7), copied);
        p.step(next);
        rig.compress(3);
        picks = rig.indexer(3, &differing);
        EXPECT_LE(differing, dtype == StateDtype::kF32 ? 0 : 1) << label;
        EXPECT_LE(rig.attention_and_store(3, picks), attention_tolerance(Numerics::kExact, dtype)) << label;
    }
}

TEST(CudaState, AllocatedBytesMatchTheCpuBackend) {
    DSV4_REQUIRE_GPU();
    for (StateDtype dtype : {StateDtype::kF32, StateDtype::kBf16, StateDtype::kFp8}) {
        Pair p(Numerics::kExact, op_config(), 3, 16, dtype, 2);
        const StateBytes cpu = p.cpu->allocated_state_bytes(), gpu = p.gpu->allocated_state_bytes();
        EXPECT_GT(gpu.slot, 0);
        EXPECT_EQ(gpu.slot, cpu.slot) << state_dtype_name(dtype);
        EXPECT_EQ(gpu.block, cpu.block) << state_dtype_name(dtype);
        EXPECT_EQ(gpu.snapshot, cpu.snapshot) << state_dtype_name(dtype);
    }
}

}  // namespace
}  // namespace dsv4::ops_test
