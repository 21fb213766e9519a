// The expert tier's role on the GPU (backend/weight_store.h): routed experts in pinned host memory in checkpoint
// form (pieces given back at load are reused by the next experts), a device cache of slots per layer filled on the
// copy stream (the compute stream waits for a fetch on the GPU, not the host) and written back to host memory on the
// same stream before an eviction, and the layer's expert handle table rewritten in place after fetches (the same
// device address, so kernels and graphs that hold it stay valid). Host experts are mapped pinned memory, so the
// tier's small steps can read them in place; their pairs are counted on the device (count_expert_pairs).
#include <algorithm>
#include <cstring>

#include "backend/cuda/cuda_backend.h"
#include "backend/fp4_layout.h"
#include "core/error.h"
#include "core/parallel.h"

namespace dsv4::cuda {
namespace {

// `words` FP4 words from the checkpoint's bytes into pinned memory in the sign-split layout (backend/fp4_layout.h),
// on the OpenMP threads: kernels read host experts in place, and fetches copy the bytes to the device as they are.
void copy_fp4_to_sign_split(const void* from, std::byte* to, int64_t words) {
    constexpr int64_t kChunk = int64_t{1} << 16;  // words a task
    const int64_t chunks = (words + kChunk - 1) / kChunk;
    parallel_for(chunks, 8 * kChunk, [&](int64_t c) {
        const int64_t first = c * kChunk, n = std::min(kChunk, words - first);
        fp4_words_from_checkpoint(static_cast<const uint8_t*>(from) + 4 * first, to + 4 * first, n);
    });
}

}  // namespace

// Pinned memory for a host expert's piece: a released piece of the same size when there is one (loading moves most
// experts through host memory into slots: reusing their pieces keeps the pinned total at the host experts' bytes).
std::byte* CudaBackend::pinned(size_t bytes) {
    if (auto it = free_pinned_.find(bytes); it != free_pinned_.end()) {
        void* p = it->second;
        free_pinned_.erase(it);
        return static_cast<std::byte*>(p);
    }
    void* p = nullptr;
    // Mapped: kernels may read a host expert where it lies, over PCIe (the tier's in-place steps); with unified
    // addressing the host pointer is also the device's.
    const cudaError_t status =
        cudaHostAlloc(&p, std::max<size_t>(bytes, 1), cudaHostAllocPortable | cudaHostAllocMapped);
    DSV4_CHECK(status == cudaSuccess,
               "cannot pin {:.2f} GiB more host memory for host-resident experts ({}); raise "
               "--gpu-experts",
               static_cast<double>(bytes) / (1 << 30), cudaGetErrorString(status));
    host_allocations_.push_back(p);
    return static_cast<std::byte*>(p);
}

void CudaBackend::release_host_expert(const ExpertWeights& host) {
    if (copy_stream_ != nullptr) DSV4_CUDA(cudaStreamSynchronize(copy_stream_));  // a fetch may still read it
    for (const ExpertRange& r : expert_ranges(host)) {
        free_pinned_.emplace(static_cast<size_t>(r.bytes), const_cast<void*>(r.at));
    }
}

WeightRef CudaBackend::upload_host_linear(const TensorView& weight, const TensorView* scale, WeightFormat format,
                                          int64_t rows, int64_t cols, int block_rows, int block_cols) {
    return copy_linear(weight, scale, format, rows, cols, block_rows, block_cols,
                       [this](const void* p, size_t n, bool fp4) {
                           std::byte* host = pinned(n);
                           if (fp4) {
                               copy_fp4_to_sign_split(p, host, static_cast<int64_t>(n / 4));
                           } else {
                               std::memcpy(host, p, n);
                           }
                           return static_cast<const void*>(host);
                       });
}

// Made on the device in step scratch (the same kernels and values as synthetic_linear), then copied to pinned memory.
WeightRef CudaBackend::synthetic_host_linear(WeightFormat format, int64_t rows, int64_t cols, float stddev,
                                             uint64_t seed) {
    const size_t mark = arena_.used();
    WeightRef w = synthetic_weight(format, rows, cols, stddev, seed, [this](size_t n) { return arena_.take(n); });
    const int64_t data = weight_data_bytes(w), scales = weight_scale_bytes(w);
    std::byte* host_data = pinned(static_cast<size_t>(data));
    DSV4_CUDA(cudaMemcpyAsync(host_data, w.data, static_cast<size_t>(data), cudaMemcpyDeviceToHost, stream_));
    if (scales > 0) {
        std::byte* host_scales = pinned(static_cast<size_t>(scales));
        DSV4_CUDA(cudaMemcpyAsync(host_scales, w.scales, static_cast<size_t>(scales), cudaMemcpyDeviceToHost, stream_));
        w.scales = reinterpret_cast<const uint8_t*>(host_scales);
    }
    DSV4_CUDA(cudaStreamSynchronize(stream_));
    w.data = host_data;
    arena_.release_to(mark);
    return w;
}

void CudaBackend::create_expert_cache(int layers, int slots, const ExpertWeights& expert) {
    DSV4_CHECK(layers > 0 && slots >= 0, "expert cache: {} layers, {} slots", layers, slots);
    expert_cache_layers_ = layers;
    expert_cache_slots_ = slots;
    expert_slot_bytes_ = expert.bytes();
    const int64_t bytes = int64_t{layers} * slots * expert_slot_bytes_;
    expert_cache_ = bytes > 0 ? static_cast<uint8_t*>(device_copy(nullptr, static_cast<size_t>(bytes))) : nullptr;
}

uint8_t* CudaBackend::expert_slot(int layer, int slot, const ExpertWeights& expert) const {
    DSV4_CHECK(layer >= 0 && layer < expert_cache_layers_ && slot >= 0 && slot < expert_cache_slots_,
               "expert cache: layer {} slot {} is outside the cache ({} layers x {} slots)", layer, slot,
               expert_cache_layers_, expert_cache_slots_);
    DSV4_CHECK(expert.bytes() == expert_slot_bytes_, "expert cache: an expert of {} bytes for slots of {}",
               expert.bytes(), expert_slot_bytes_);
    return expert_cache_ + (int64_t{layer} * expert_cache_slots_ + slot) * expert_slot_bytes_;
}

// Queues the copy of every piece of `from` onto the same piece of `to` (experts of the same shapes) on the copy stream.
void CudaBackend::copy_expert_async(const ExpertWeights& from, const ExpertWeights& to, cudaMemcpyKind kind) {
    const std::vector<ExpertRange> src = expert_ranges(from), dst = expert_ranges(to);
    for (size_t i = 0; i < src.size(); ++i) {
        DSV4_CUDA(cudaMemcpyAsync(const_cast<void*>(dst[i].at), src[i].at, static_cast<size_t>(src[i].bytes), kind,
                                  copy_stream_));
    }
}

ExpertWeights CudaBackend::fetch_expert(int layer, int slot, const ExpertWeights& host) {
    const ExpertWeights out =
        expert_placed_at(host, reinterpret_cast<const std::byte*>(expert_slot(layer, slot, host)));
    copy_after_compute();  // the slot's previous expert may still be read by work queued before
    copy_expert_async(host, out, cudaMemcpyHostToDevice);
    DSV4_CUDA(cudaEventRecord(loads_done_, copy_stream_));
    loads_pending_ = true;
    wait_for_loads();  // the next kernels (this layer's experts) read the slot
    return out;
}

void CudaBackend::store_expert(int layer, int slot, const ExpertWeights& host) {
    const ExpertWeights held =
        expert_placed_at(host, reinterpret_cast<const std::byte*>(expert_slot(layer, slot, host)));
    // After the compute queued before: a step that reads host experts in place may still read `host` (the free host
    // expert this write-back overwrites held an expert that was read where it lay until its fetch).
    copy_after_compute();
    copy_expert_async(held, host, cudaMemcpyDeviceToHost);
    DSV4_CUDA(cudaStreamSynchronize(copy_stream_));  // the host computes with these bytes next
}

void CudaBackend::update_expert_handles(const MoeWeights& w) {
    for (int which = 0; which < 3; ++which) {
        auto it = expert_tables_.find(std::make_pair(static_cast<const void*>(w.experts.data()), which));
        if (it == expert_tables_.end()) continue;  // built on first use
        std::vector<WeightRef> host;
        for (const ExpertWeights& e : w.experts) host.push_back(which == 0 ? e.w1 : which == 1 ? e.w2 : e.w3);
        // In stream order, after the kernels that read the old handles; a copy from pageable memory has taken the
        // bytes when it returns, so `host` may go.
        DSV4_CUDA(cudaMemcpyAsync(const_cast<WeightRef*>(it->second), host.data(), host.size() * sizeof(WeightRef),
                                  cudaMemcpyHostToDevice, stream_));
    }
}

void CudaBackend::create_expert_pair_counters(int layers, int experts) {
    DSV4_CHECK(layers > 0 && experts > 0 && experts <= kMaxRoutedExperts,
               "expert pair counters: {} layers x {} experts", layers, experts);
    counted_layers_ = layers;
    counted_experts_ = experts;
    const std::vector<int32_t> zeros(static_cast<size_t>(int64_t{layers} * experts), 0);
    expert_pairs_ = static_cast<int32_t*>(device_copy(zeros.data(), zeros.size() * sizeof(int32_t)));
}

// One small kernel in the step (recorded by decode graphs); int32 counters suffice: they are taken every step.
void CudaBackend::count_expert_pairs(int layer, const Tensor& ids) {
    DSV4_CHECK(expert_pairs_ != nullptr, "count_expert_pairs: create_expert_pair_counters was not called");
    DSV4_CHECK(layer >= 0 && layer < counted_layers_, "count_expert_pairs: layer {} is outside [0, {})", layer,
               counted_layers_);
    launch_add_expert_counts(stream_, meta_, ids.i32(), ids.numel(), counted_experts_,
                             expert_pairs_ + int64_t{layer} * counted_experts_);
    launched("count expert pairs");
}

std::vector<int64_t> CudaBackend::take_expert_pair_counts() {
    if (expert_pairs_ == nullptr) return {};
    std::vector<int32_t> counts(static_cast<size_t>(int64_t{counted_layers_} * counted_experts_));
    DSV4_CUDA(cudaMemcpyAsync(counts.data(), expert_pairs_, counts.size() * sizeof(int32_t), cudaMemcpyDeviceToHost,
                              stream_));
    DSV4_CUDA(cudaMemsetAsync(expert_pairs_, 0, counts.size() * sizeof(int32_t), stream_));
    DSV4_CUDA(cudaStreamSynchronize(stream_));
    return {counts.begin(), counts.end()};
}

}  // namespace dsv4::cuda
