// The expert tier's role on the CPU (backend/weight_store.h): host experts are copies of the checkpoint's bytes (an
// evicted expert is written back over them, and the mapping is read-only), and the "device" expert cache is a
// separate allocation that fetches copy them into, so the tier's whole path (placement, fetches, write-backs, host
// compute) runs in CI on the CPU with the bits of the GPU's path: a resident expert and a host one are the same bytes.
#include <cstring>

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"

namespace dsv4 {

const void* CpuBackend::host_copy(const void* bytes, int64_t n) {
    auto owned = std::make_unique<std::byte[]>(static_cast<size_t>(std::max<int64_t>(n, 1)));
    std::memcpy(owned.get(), bytes, static_cast<size_t>(n));
    const void* at = owned.get();
    host_experts_.emplace(at, std::move(owned));
    return at;
}

WeightRef CpuBackend::upload_host_linear(const TensorView& weight, const TensorView* scale, WeightFormat format,
                                         int64_t rows, int64_t cols, int block_rows, int block_cols) {
    WeightRef w = upload_linear(weight, scale, format, rows, cols, block_rows, block_cols);
    w.data = host_copy(w.data, weight_data_bytes(w));
    if (w.scales != nullptr) w.scales = static_cast<const uint8_t*>(host_copy(w.scales, weight_scale_bytes(w)));
    return w;
}

void CpuBackend::release_host_expert(const ExpertWeights& host) {
    for (const ExpertRange& r : expert_ranges(host)) {
        DSV4_CHECK(host_experts_.erase(r.at) == 1, "release_host_expert: a piece this backend did not make");
    }
}

void CpuBackend::create_expert_cache(int layers, int slots, const ExpertWeights& expert) {
    DSV4_CHECK(layers > 0 && slots >= 0, "expert cache: {} layers, {} slots", layers, slots);
    expert_cache_layers_ = layers;
    expert_cache_slots_ = slots;
    expert_slot_bytes_ = expert.bytes();
    expert_cache_.assign(static_cast<size_t>(int64_t{layers} * slots * expert_slot_bytes_), std::byte{0});
}

const std::byte* CpuBackend::expert_slot(int layer, int slot, const ExpertWeights& expert) const {
    DSV4_CHECK(layer >= 0 && layer < expert_cache_layers_ && slot >= 0 && slot < expert_cache_slots_,
               "expert cache: layer {} slot {} is outside the cache ({} layers x {} slots)", layer, slot,
               expert_cache_layers_, expert_cache_slots_);
    DSV4_CHECK(expert.bytes() == expert_slot_bytes_, "expert cache: an expert of {} bytes for slots of {}",
               expert.bytes(), expert_slot_bytes_);
    return expert_cache_.data() + (int64_t{layer} * expert_cache_slots_ + slot) * expert_slot_bytes_;
}

namespace {
void copy_expert(const ExpertWeights& from, const ExpertWeights& to) {
    const std::vector<ExpertRange> src = expert_ranges(from), dst = expert_ranges(to);
    for (size_t i = 0; i < src.size(); ++i) {
        std::memcpy(const_cast<void*>(dst[i].at), src[i].at, static_cast<size_t>(src[i].bytes));
    }
}
}  // namespace

ExpertWeights CpuBackend::fetch_expert(int layer, int slot, const ExpertWeights& host) {
    const ExpertWeights out = expert_placed_at(host, expert_slot(layer, slot, host));
    copy_expert(host, out);
    return out;
}

void CpuBackend::store_expert(int layer, int slot, const ExpertWeights& host) {
    copy_expert(expert_placed_at(host, expert_slot(layer, slot, host)), host);
}

void CpuBackend::create_expert_pair_counters(int layers, int experts) {
    DSV4_CHECK(layers > 0 && experts > 0, "expert pair counters: {} layers x {} experts", layers, experts);
    counted_experts_ = experts;
    expert_pairs_.assign(static_cast<size_t>(int64_t{layers} * experts), 0);
}

void CpuBackend::count_expert_pairs(int layer, const Tensor& ids) {
    DSV4_CHECK(counted_experts_ > 0, "count_expert_pairs: create_expert_pair_counters was not called");
    const int64_t layers = static_cast<int64_t>(expert_pairs_.size()) / counted_experts_;
    DSV4_CHECK(layer >= 0 && layer < layers, "count_expert_pairs: layer {} is outside [0, {})", layer, layers);
    const int32_t* id = ids.i32();
    for (int64_t p = 0; p < ids.numel(); ++p) {
        if (id[p] >= 0 && id[p] < counted_experts_)
            ++expert_pairs_[static_cast<size_t>(layer * counted_experts_ + id[p])];
    }
}

std::vector<int64_t> CpuBackend::take_expert_pair_counts() {
    std::vector<int64_t> out(expert_pairs_.size(), 0);
    out.swap(expert_pairs_);
    return out;
}

}  // namespace dsv4
