// The tier role on the GPU (backend/state_store.h): blocks and boundary snapshots copied between device memory and
// the host pool (pinned, so the copies are DMA on their own stream) in the layout every backend shares.
//
// Ordering, without blocking the host or the compute stream more than needed:
// - an offload waits (on the copy stream) for the compute work queued before it, which wrote its source;
// - a later write of an offloaded block or snapshot (a step's new rows, copy_block, save_snapshot) makes the compute
//   stream wait for the offloads, and only when one of them is still in flight;
// - a load completes before the next step, restore or block copy reads device state (the compute stream waits on
//   the loads' event: the joining sequence's copy delays that step by its copy time, not the host);
// - copies on the copy stream run in order, so a load from a host entry and a later offload into it never race.
// Loads from pageable memory (disk entries staged by kv/kv_tiers.h) are consumed before cudaMemcpyAsync returns.
// Not measured yet (no GPU in the session that wrote it): docs/gpu-validation.md lists the runs to make.
#include "backend/cuda/cuda_backend.h"
#include "core/error.h"

namespace dsv4::cuda {

void CudaBackend::ensure_copy_stream() {
    if (copy_stream_ != nullptr) return;
    DSV4_CUDA(cudaStreamCreateWithFlags(&copy_stream_, cudaStreamNonBlocking));
    for (cudaEvent_t* e : {&compute_mark_, &offloads_done_, &loads_done_}) {
        DSV4_CUDA(cudaEventCreateWithFlags(e, cudaEventDisableTiming));
    }
}

// The copy stream starts after the compute work queued so far.
void CudaBackend::copy_after_compute() {
    ensure_copy_stream();
    DSV4_CUDA(cudaEventRecord(compute_mark_, stream_));
    DSV4_CUDA(cudaStreamWaitEvent(copy_stream_, compute_mark_, 0));
}

// Copies one block's or snapshot's pieces, layer by layer, between device memory and contiguous host bytes.
void CudaBackend::copy_pieces(const std::vector<std::pair<uint8_t*, int64_t>>& pieces, std::byte* host, size_t size,
                              bool to_host) {
    int64_t offset = 0;
    for (const auto& [device, bytes] : pieces) {
        DSV4_CHECK(offset + bytes <= static_cast<int64_t>(size), "tier copy: {} host bytes are too few", size);
        std::byte* at = host + offset;
        if (to_host) {
            DSV4_CUDA(cudaMemcpyAsync(at, device, static_cast<size_t>(bytes), cudaMemcpyDeviceToHost, copy_stream_));
        } else {
            DSV4_CUDA(cudaMemcpyAsync(device, at, static_cast<size_t>(bytes), cudaMemcpyHostToDevice, copy_stream_));
        }
        offset += bytes;
    }
    DSV4_CHECK(offset == static_cast<int64_t>(size), "tier copy: the state has {} bytes, {} were given", offset, size);
}

std::vector<std::pair<uint8_t*, int64_t>> CudaBackend::block_pieces(int32_t block) const {
    DSV4_CHECK(block >= 0 && block < state_.num_blocks, "tier copy: block {} is outside [0, {})", block,
               state_.num_blocks);
    std::vector<std::pair<uint8_t*, int64_t>> pieces;
    for (const LayerStateDev& ls : layers_) {
        if (ls.per_block == 0) continue;
        const int64_t rows = int64_t{ls.per_block} * kv_format_.bytes, keys = int64_t{ls.per_block} * key_format_.bytes;
        pieces.emplace_back(ls.entries + block * rows, rows);
        if (ls.index_keys != nullptr) pieces.emplace_back(ls.index_keys + block * keys, keys);
    }
    return pieces;
}

std::vector<std::pair<uint8_t*, int64_t>> CudaBackend::snapshot_pieces(int32_t snapshot) const {
    DSV4_CHECK(snapshot >= 0 && snapshot < state_.num_snapshots, "tier copy: snapshot {} is outside [0, {})", snapshot,
               state_.num_snapshots);
    std::vector<std::pair<uint8_t*, int64_t>> pieces;
    const int64_t window = int64_t{model_.sliding_window} * kv_format_.bytes;
    for (size_t l = 0; l < layers_.size(); ++l) {
        const SnapshotDev& sn = snapshots_[l];
        pieces.emplace_back(sn.ring + snapshot * window, window);
        const int64_t n = shapes_[l].snapshot_records;
        if (n == 0) continue;
        const int64_t main = n * shapes_[l].main.record_floats() * 4, index = n * shapes_[l].index.record_floats() * 4;
        pieces.emplace_back(reinterpret_cast<uint8_t*>(sn.main) + snapshot * main, main);
        pieces.emplace_back(reinterpret_cast<uint8_t*>(sn.index) + snapshot * index, index);
    }
    return pieces;
}

void CudaBackend::offload_block(int32_t block, std::span<std::byte> host) {
    copy_after_compute();
    copy_pieces(block_pieces(block), host.data(), host.size(), true);
    DSV4_CUDA(cudaEventRecord(offloads_done_, copy_stream_));
    offloading_blocks_.insert(block);
}

void CudaBackend::offload_snapshot(int32_t snapshot, std::span<std::byte> host) {
    copy_after_compute();
    copy_pieces(snapshot_pieces(snapshot), host.data(), host.size(), true);
    DSV4_CUDA(cudaEventRecord(offloads_done_, copy_stream_));
    offloading_snapshots_.insert(snapshot);
}

void CudaBackend::load_block(std::span<const std::byte> host, int32_t block) {
    copy_after_compute();
    copy_pieces(block_pieces(block), const_cast<std::byte*>(host.data()), host.size(), false);
    DSV4_CUDA(cudaEventRecord(loads_done_, copy_stream_));
    loads_pending_ = true;
}

void CudaBackend::load_snapshot(std::span<const std::byte> host, int32_t snapshot) {
    copy_after_compute();
    copy_pieces(snapshot_pieces(snapshot), const_cast<std::byte*>(host.data()), host.size(), false);
    DSV4_CUDA(cudaEventRecord(loads_done_, copy_stream_));
    loads_pending_ = true;
}

void CudaBackend::wait_tier_copies() {
    if (copy_stream_ == nullptr) return;
    DSV4_CUDA(cudaStreamSynchronize(copy_stream_));
    offloading_blocks_.clear();
    offloading_snapshots_.clear();
    loads_pending_ = false;
}

HostBuffer CudaBackend::allocate_host_buffer(int64_t bytes) {
    DSV4_CHECK(bytes >= 0, "allocate_host_buffer: {} bytes", bytes);
    void* p = nullptr;
    const cudaError_t status =
        cudaHostAlloc(&p, static_cast<size_t>(std::max<int64_t>(bytes, 1)), cudaHostAllocPortable);
    DSV4_CHECK(status == cudaSuccess,
               "cannot pin {:.2f} GiB of host memory for the KV host tier ({}); lower "
               "--host-kv-cache-gib",
               static_cast<double>(bytes) / (1 << 30), cudaGetErrorString(status));
    HostBuffer b;
    b.memory = std::shared_ptr<std::byte>(static_cast<std::byte*>(p), [](std::byte* q) { cudaFreeHost(q); });
    b.bytes = bytes;
    return b;
}

// Device state the next compute work reads must have arrived.
void CudaBackend::wait_for_loads() {
    if (!loads_pending_) return;
    DSV4_CUDA(cudaStreamWaitEvent(stream_, loads_done_, 0));
    loads_pending_ = false;
}

// Before compute work writes `id` (a block or a snapshot): wait for the offloads only if one of them reads it and
// they have not finished.
void CudaBackend::wait_before_write(bool block, int32_t id) {
    auto& pending = block ? offloading_blocks_ : offloading_snapshots_;
    if (pending.empty()) return;
    if (cudaEventQuery(offloads_done_) == cudaSuccess) {
        offloading_blocks_.clear();
        offloading_snapshots_.clear();
        return;
    }
    if (!pending.contains(id)) return;
    DSV4_CUDA(cudaStreamWaitEvent(stream_, offloads_done_, 0));
    offloading_blocks_.clear();
    offloading_snapshots_.clear();
}

// The step's reads of loaded state, and its writes: the blocks holding the compressed entries of its positions.
void CudaBackend::order_step_after_tier_copies(const StepBatch& batch) {
    wait_for_loads();
    if (offloading_blocks_.empty()) return;
    for (const SequenceSlice& seq : batch.seqs) {
        const int64_t first = seq.start_pos / state_.block_tokens;
        const int64_t last = (seq.start_pos + seq.n_tokens - 1) / state_.block_tokens;
        for (int64_t b = first; b <= last && b < static_cast<int64_t>(seq.block_table.size()); ++b) {
            wait_before_write(true, seq.block_table[b]);
        }
    }
}

}  // namespace dsv4::cuda
