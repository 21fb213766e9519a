#include "dist/expert_tier_moe.h"

#include <algorithm>

#include "backend/tensor_reads.h"
#include "core/error.h"

namespace dsv4::dist {

ExpertTierMoe::ExpertTierMoe(Backend& device, ModelOps& host_ops, const ExpertCacheConfig& cache,
                             std::span<const std::vector<int64_t>> counts)
    : device_(device),
      host_ops_(host_ops),
      cache_(cache),
      host_experts_(static_cast<size_t>(cache.layers), std::vector<ExpertWeights>(static_cast<size_t>(cache.experts))),
      put_(static_cast<size_t>(int64_t{cache.layers} * cache.experts), false),
      slot_handles_(static_cast<size_t>(cache.layers), std::vector<ExpertWeights>(static_cast<size_t>(cache.slots))),
      device_layers_(static_cast<size_t>(cache.layers)),
      device_layer_ready_(static_cast<size_t>(cache.layers), false) {
    cache_.place(counts);  // the slots are filled as the loader hands their experts over
    DSV4_CHECK(cache.read_in_place_max_tokens >= 0, "expert tier: read_in_place_max_tokens {} is negative",
               cache.read_in_place_max_tokens);
    if (in_place_enabled()) device_.create_expert_pair_counters(cache.layers, cache.experts);
}

void ExpertTierMoe::expected_popularity(int layer, std::span<const double> shares) {
    const ExpertCacheConfig& c = cache_.config();
    DSV4_CHECK(layer >= 0 && layer < c.layers, "expert tier: layer {} is outside [0, {})", layer, c.layers);
    for (int e = 0; e < c.experts; ++e) {
        DSV4_CHECK(!put_[static_cast<size_t>(layer) * c.experts + e],
                   "expert tier: layer {}'s expected popularity came after its experts", layer);
    }
    cache_.place_layer(layer, shares);
}

void ExpertTierMoe::put(int layer, int expert, const ExpertWeights& host) {
    const ExpertCacheConfig& c = cache_.config();
    DSV4_CHECK(!loaded_, "expert tier: an expert was handed over after loading finished");
    DSV4_CHECK(layer >= 0 && layer < c.layers && expert >= 0 && expert < c.experts,
               "expert tier: expert {} of layer {} is outside the model ({} layers x {} experts)", expert, layer,
               c.layers, c.experts);
    DSV4_CHECK(host.w1.valid() && host.w2.valid() && host.w3.valid(), "expert tier: expert {} of layer {} is missing",
               expert, layer);
    const size_t at = static_cast<size_t>(layer) * c.experts + expert;
    DSV4_CHECK(!put_[at], "expert tier: expert {} of layer {} was handed over twice", expert, layer);
    if (expert_bytes_ == 0) {  // the first expert handed over sets the size of all
        expert_bytes_ = host.bytes();
        if (c.slots > 0) device_.create_expert_cache(c.layers, c.slots, host);
    }
    DSV4_CHECK(host.bytes() == expert_bytes_,
               "expert tier: expert {} of layer {} has {} bytes, the others {} (the cache needs one expert size)",
               expert, layer, host.bytes(), expert_bytes_);
    put_[at] = true;
    const int slot = cache_.slot_of(layer, expert);
    if (slot < 0) {
        host_experts_[layer][expert] = host;
        return;
    }
    slot_handles_[layer][slot] = device_.fetch_expert(layer, slot, host);
    stats_.fetched_bytes += host.bytes();
    // One expert's host memory is kept free for the write-back of an eviction (a fetch then frees the fetched one's).
    const bool evictions_possible = c.slots < c.experts;
    if (evictions_possible && free_host_.empty()) {
        free_host_.push_back(host);
    } else {
        device_.release_host_expert(host);
    }
}

void ExpertTierMoe::finish_loading() {
    const auto loaded = std::count(put_.begin(), put_.end(), true);
    DSV4_CHECK(loaded == static_cast<std::ptrdiff_t>(put_.size()),
               "expert tier: {} of the model's {} routed experts were loaded", loaded, put_.size());
    loaded_ = true;
}

int64_t ExpertTierMoe::host_bytes() const {
    int64_t held = 0;
    for (const auto& layer : host_experts_) {
        for (const ExpertWeights& e : layer) {
            if (e.w1.valid()) held += e.bytes();
        }
    }
    return held + static_cast<int64_t>(free_host_.size()) * expert_bytes_;
}

ExpertWeights ExpertTierMoe::where(int layer, int expert) const {
    const int slot = cache_.slot_of(layer, expert);
    return slot >= 0 ? slot_handles_[layer][slot] : host_experts_[layer][expert];
}

// Carries fetches out: the slot's expert written back to a free host expert, the new expert's bytes into the slot
// (its host memory now free), the slot's handles into the layer's table.
void ExpertTierMoe::apply(int layer, const std::vector<ExpertFetch>& fetches) {
    if (fetches.empty()) return;
    for (const ExpertFetch& f : fetches) {
        ExpertWeights& incoming = host_experts_[layer][f.expert];
        DSV4_CHECK(incoming.w1.valid(), "expert tier: expert {} of layer {} is not in host memory", f.expert, layer);
        if (f.evicted >= 0) {
            DSV4_CHECK(!free_host_.empty(), "expert tier: no free host expert for a write-back");
            host_experts_[layer][f.evicted] = free_host_.back();
            free_host_.pop_back();
            device_.store_expert(layer, f.slot, host_experts_[layer][f.evicted]);
            stats_.written_back_bytes += expert_bytes_;
        }
        slot_handles_[layer][f.slot] = device_.fetch_expert(layer, f.slot, incoming);
        stats_.fetched_bytes += expert_bytes_;
        free_host_.push_back(incoming);  // the copy stream reads it before any later write-back writes it
        incoming = ExpertWeights{};
        if (!device_layer_ready_[layer]) continue;
        MoeWeights& w = device_layers_[layer];
        if (f.evicted >= 0) w.experts[f.evicted] = unplaced_handles(layer, f.evicted);
        w.experts[f.expert] = slot_handles_[layer][f.slot];
    }
    if (device_layer_ready_[layer]) device_.update_expert_handles(device_layers_[layer]);
}

// The model's weights of a layer with the resident experts' device handles (built on first use, then kept: its
// experts vector stays at one address, which the CUDA backend's handle table is keyed by).
MoeWeights& ExpertTierMoe::device_weights(int layer, const MoeWeights& w) {
    MoeWeights& d = device_layers_[layer];
    if (!device_layer_ready_[layer]) {
        d = w;
        d.experts.assign(static_cast<size_t>(cache_.config().experts), ExpertWeights{});
        for (int e = 0; e < cache_.config().experts; ++e) d.experts[e] = unplaced_handles(layer, e);
        for (int s = 0; s < cache_.config().slots; ++s) {
            const int e = cache_.expert_in(layer, s);
            if (e >= 0) d.experts[e] = slot_handles_[layer][s];
        }
        device_layer_ready_[layer] = true;
    }
    return d;
}

ExpertWeights ExpertTierMoe::unplaced_handles(int layer, int expert) const {
    return in_place_enabled() ? host_experts_[layer][expert] : ExpertWeights{};
}

bool ExpertTierMoe::device_only(int64_t tokens) const {
    return in_place_enabled() && tokens <= cache_.config().read_in_place_max_tokens;
}

void ExpertTierMoe::moe(int layer, const Tensor& h, const MoeWeights& w, const Tensor& weights, const Tensor& ids,
                        float limit, Tensor y) {
    DSV4_CHECK(loaded_, "expert tier: finish_loading() was not called");
    DSV4_CHECK(layer >= 0 && layer < cache_.config().layers, "expert tier: layer {} is outside [0, {})", layer,
               cache_.config().layers);
    if (device_only(h.size(0))) {  // every expert where it lies: the plain moe op over the full table
        device_.count_expert_pairs(layer, ids);
        device_.moe(h, device_weights(layer, w), weights, ids, limit, y);
        return;
    }
    const int64_t n = h.size(0), d = h.size(1);
    const int k = static_cast<int>(ids.size(1));
    const std::vector<int32_t> host_ids = read_i32(device_, ids);
    const LayerStepPlan plan = cache_.plan_step(layer, host_ids);
    MoeWeights& wl = device_weights(layer, w);
    apply(layer, plan.fetches);
    Tensor routed = device_.alloc(DType::kF32, {n * k, d});
    if (plan.host.empty()) {
        device_.moe_routed(h, wl, weights, ids, limit, routed);
    } else {
        routed_with_host_pairs(layer, h, wl, host_ids, weights, k, limit, routed);
    }
    Tensor shared = device_.alloc(DType::kF32, {n, d});
    if (w.shared) device_.moe_shared(h, *w.shared, limit, shared);
    device_.moe_combine(routed, k, w.shared ? &shared : nullptr, y);
}

void ExpertTierMoe::routed_with_host_pairs(int layer, const Tensor& h, const MoeWeights& wl,
                                           const std::vector<int32_t>& ids, const Tensor& weights, int k, float limit,
                                           Tensor routed) {
    const int64_t d = h.size(1), pairs = static_cast<int64_t>(ids.size());
    // Read before the device pairs are queued, so that the device computes them while the host computes its own.
    const std::vector<float> pair_weights = read_f32(device_, weights);
    const std::vector<float> h_all = read_f32(device_, h);
    // Pairs split by where their expert is; order[p] = the pair's row in [device rows | host rows].
    std::vector<int32_t> dev_tokens, dev_ids, host_tokens, host_ids, order(static_cast<size_t>(pairs));
    std::vector<float> dev_weights, host_weights;
    // Residency from the cache, not the table's handles (where steps read in place, host experts have handles too).
    const auto resident_pair = [&](int64_t p) { return cache_.slot_of(layer, ids[p]) >= 0; };
    for (int64_t p = 0; p < pairs; ++p) {
        const bool resident = resident_pair(p);
        (resident ? dev_tokens : host_tokens).push_back(static_cast<int32_t>(p / k));
        (resident ? dev_ids : host_ids).push_back(ids[p]);
        (resident ? dev_weights : host_weights).push_back(pair_weights[p]);
    }
    const auto m_dev = static_cast<int64_t>(dev_ids.size()), m_host = static_cast<int64_t>(host_ids.size());
    for (int64_t p = 0, a = 0, b = m_dev; p < pairs; ++p) order[p] = static_cast<int32_t>(resident_pair(p) ? a++ : b++);
    Tensor rows = device_.alloc(DType::kF32, {pairs, d});
    if (m_dev > 0) {
        Tensor h_dev = device_.alloc(DType::kF32, {m_dev, d});
        device_.gather_rows(h, dev_tokens, h_dev);
        Tensor ids_dev = device_.alloc(DType::kI32, {m_dev, 1}), w_dev = device_.alloc(DType::kF32, {m_dev, 1});
        device_.from_host(ids_dev, dev_ids.data());
        device_.from_host(w_dev, dev_weights.data());
        device_.moe_routed(h_dev, wl, w_dev, ids_dev, limit, rows.rows(0, m_dev));
    }
    // Host pairs: their activation rows (read above), computed over the host experts, their outputs up.
    const size_t mark = host_ops_.scratch_mark();
    Tensor h_host = host_ops_.alloc(DType::kF32, {m_host, d}), out = host_ops_.alloc(DType::kF32, {m_host, d});
    Tensor ids_h = host_ops_.alloc(DType::kI32, {m_host, 1}), w_h = host_ops_.alloc(DType::kF32, {m_host, 1});
    std::vector<float> gathered(static_cast<size_t>(m_host * d));
    for (int64_t i = 0; i < m_host; ++i) {
        std::copy_n(h_all.data() + host_tokens[i] * d, d, gathered.data() + i * d);
    }
    host_ops_.from_host(h_host, gathered.data());
    host_ops_.from_host(ids_h, host_ids.data());
    host_ops_.from_host(w_h, host_weights.data());
    MoeWeights hw = wl;
    hw.experts = host_experts_[static_cast<size_t>(layer)];
    host_ops_.moe_routed(h_host, hw, w_h, ids_h, limit, out);
    host_ops_.to_host(out, gathered.data());
    host_ops_.scratch_release(mark);
    device_.from_host(rows.rows(m_dev, m_host), gathered.data());
    device_.gather_rows(rows, order, routed);
    stats_.host_pairs += m_host;
    stats_.activation_bytes += (h.numel() + m_host * d) * 4;
    ++stats_.layers_with_host_pairs;
}

void ExpertTierMoe::end_step() {
    if (in_place_enabled()) {
        const int64_t before = cache_.stats().in_place_pairs;
        cache_.observe(device_.take_expert_pair_counts());
        stats_.in_place_pair_bytes += (cache_.stats().in_place_pairs - before) * expert_bytes_;
    }
    const auto moves = cache_.end_step();
    for (size_t l = 0; l < moves.size(); ++l) apply(static_cast<int>(l), moves[l]);
}

}  // namespace dsv4::dist
