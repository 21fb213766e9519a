// The expert tier's role on the CPU (backend/weight_store.h): host experts are the checkpoint's bytes read in place
// (as every CPU weight), and the "device" expert cache is a separate allocation that fetches copy them into, so the
// tier's whole path (placement, fetches, eviction, host compute) runs in CI on the CPU with the bits of the GPU's
// fetch path: a resident expert and a host one are the same bytes.
#include <cstring>

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"

namespace dsv4 {

WeightRef CpuBackend::upload_host_linear(const TensorView& weight, const TensorView* scale, WeightFormat format,
                                         int64_t rows, int64_t cols, int block_rows, int block_cols) {
    return upload_linear(weight, scale, format, rows, cols, block_rows, block_cols);
}

void CpuBackend::create_expert_cache(int layers, int slots, const ExpertWeights& expert) {
    DSV4_CHECK(layers > 0 && slots >= 0, "expert cache: {} layers, {} slots", layers, slots);
    expert_cache_layers_ = layers;
    expert_cache_slots_ = slots;
    expert_slot_bytes_ = expert.bytes();
    expert_cache_.assign(static_cast<size_t>(int64_t{layers} * slots * expert_slot_bytes_), std::byte{0});
}

ExpertWeights CpuBackend::fetch_expert(int layer, int slot, const ExpertWeights& host) {
    DSV4_CHECK(layer >= 0 && layer < expert_cache_layers_ && slot >= 0 && slot < expert_cache_slots_,
               "fetch_expert: layer {} slot {} is outside the cache ({} layers x {} slots)", layer, slot,
               expert_cache_layers_, expert_cache_slots_);
    DSV4_CHECK(host.bytes() == expert_slot_bytes_, "fetch_expert: an expert of {} bytes for slots of {}", host.bytes(),
               expert_slot_bytes_);
    std::byte* at = expert_cache_.data() + (int64_t{layer} * expert_cache_slots_ + slot) * expert_slot_bytes_;
    ExpertWeights out = host;
    for (WeightRef* w : {&out.w1, &out.w2, &out.w3}) {
        const int64_t data = weight_data_bytes(*w), scales = weight_scale_bytes(*w);
        std::memcpy(at, w->data, static_cast<size_t>(data));
        w->data = at;
        at += data;
        if (scales > 0) {
            std::memcpy(at, w->scales, static_cast<size_t>(scales));
            w->scales = reinterpret_cast<const uint8_t*>(at);
            at += scales;
        }
    }
    return out;
}

}  // namespace dsv4
