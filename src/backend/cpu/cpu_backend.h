// CpuBackend: the numerical reference implementation of every op (design.md: "the CPU backend in exact numerics is
// the single source of numerical truth"), with OpenMP threads and the SIMD row kernels of core/block_dequant.h.
// Weights are read in place from the memory-mapped checkpoint (zero copy); only small vectors are converted to
// float32. State is host memory: compressor pending data in float32; K=V rows (rings, compressed entries, snapshot
// rings) and indexer keys in the StateConfig's kv_dtype (backend/state_format.h), encoded when written and decoded
// into float32 scratch when read. Every FP8 thing is in the backend's dialect (OCP or FNUZ, both exact: the CPU
// backend is how MI300X numerics are checked without an MI300X).
#pragma once

#include <deque>
#include <map>
#include <memory>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "backend/backend.h"
#include "state/state_format.h"
#include "state/state_layout.h"

namespace dsv4 {

// Per-layer state of all slots and blocks. Stored rows ("row" = kv_row_format, "key" = index_key_format bytes) live
// in float vectors (aligned storage; every row size is a multiple of 4 bytes) and are addressed as bytes.
struct CpuLayerState {
    LayerStateShape shape;             // rows per slot / block / snapshot (state/state_layout.h)
    std::vector<float> ring;           // [slots][ring_rows] rows
    std::vector<float> main_pending;   // [slots][main.rows][main.record_floats()]  (kv | gate + ape)
    std::vector<float> index_pending;  // [slots][index.rows][index.record_floats()]
    std::vector<float> entries;        // [blocks][entries_per_block] rows
    std::vector<float> index_keys;     // [blocks][entries_per_block] keys
    // Prefix-cache boundary snapshots (cpu_snapshot.cpp): ring rows of [boundary - window, boundary) and, for CSA,
    // the compressor records of [boundary - ratio, boundary), in position order.
    std::vector<float> snap_ring;   // [snapshots][window] rows
    std::vector<float> snap_main;   // [snapshots][snapshot_records][main.record_floats()]   (CSA only)
    std::vector<float> snap_index;  // [snapshots][snapshot_records][index.record_floats()]  (CSA only)
};

class CpuBackend final : public Backend {
  public:
    // fp8: the dialect and maximum of every FP8 site (fp8_sites(--fp8-dialect); tests may pin a site's maximum).
    CpuBackend(Numerics numerics, int threads, const Fp8Sites& fp8);

    std::string name() const override { return "cpu"; }
    Numerics numerics() const override { return numerics_; }
    Fp8Dialect fp8_dialect() const override { return fp8_.weights; }

    WeightRef upload_linear(const TensorView& weight, const TensorView* scale, WeightFormat format, int64_t rows,
                            int64_t cols, int block_rows, int block_cols) override;
    VecRef upload_vector(const TensorView& values) override;
    TableRef upload_table(const TensorView& values, int64_t max_value) override;
    // Expert tier (cpu_expert_cache.cpp): host experts copied (writable), the cache a separate allocation.
    WeightRef upload_host_linear(const TensorView& weight, const TensorView* scale, WeightFormat format, int64_t rows,
                                 int64_t cols, int block_rows, int block_cols) override;
    void create_expert_cache(int layers, int slots, const ExpertWeights& expert) override;
    ExpertWeights fetch_expert(int layer, int slot, const ExpertWeights& host) override;
    void store_expert(int layer, int slot, const ExpertWeights& host) override;
    void release_host_expert(const ExpertWeights& host) override;
    void create_expert_pair_counters(int layers, int experts) override;
    std::vector<int64_t> take_expert_pair_counts() override;

    void create_state(const ModelConfig& config, const StateConfig& state) override;
    const StateConfig& state_config() const override { return state_; }
    StateBytes allocated_state_bytes() const override;
    void reset_slot(int32_t slot) override;
    void save_snapshot(int32_t slot, int32_t snapshot, int64_t boundary) override;
    void restore_snapshot(int32_t slot, int32_t snapshot, int64_t boundary) override;
    void copy_slot(int32_t src, int32_t dst) override;
    void copy_block(int32_t src, int32_t dst) override;
    // The tier role (cpu_tiers.cpp): the host pool is a separate allocation, copied with memcpy.
    void offload_block(int32_t block, std::span<std::byte> host) override;
    void load_block(std::span<const std::byte> host, int32_t block) override;
    void offload_snapshot(int32_t snapshot, std::span<std::byte> host) override;
    void load_snapshot(std::span<const std::byte> host, int32_t snapshot) override;

    Tensor alloc(DType dtype, std::initializer_list<int64_t> shape) override;
    size_t scratch_mark() override { return arena_.size(); }
    void scratch_release(size_t mark) override {
        while (arena_.size() > mark) arena_.pop_back();
    }
    void begin_step(const StepBatch& batch) override;
    void begin_substep(const StepBatch& batch) override;
    void to_host(const Tensor& t, float* out) override;
    void from_host(Tensor t, const void* data) override;
    void synchronize() override {}
    void copy(const Tensor& src, Tensor dst) override;

    void embed(const WeightRef& table, Tensor x) override;
    void hc_pre(const Tensor& x, const MhcWeights& w, int sinkhorn_iters, float hc_eps, float norm_eps, Tensor u,
                Tensor post, Tensor comb) override;
    void hc_post(Tensor x, const Tensor& y, const Tensor& post, const Tensor& comb) override;
    void hc_head(const Tensor& x, const HcHeadWeights& w, float hc_eps, float norm_eps, Tensor y) override;
    void rms_norm(const Tensor& x, const VecRef* weight, float eps, Tensor y) override;
    void linear(const Tensor& x, const WeightRef& w, LinearKind kind, Tensor y) override;
    void grouped_linear(const Tensor& x, const WeightRef& w, int groups, Tensor y) override;
    void rope(Tensor x, const RopeParams& rope, bool inverse) override;
    void kv_cache_sim(Tensor kv, int nope_dims) override;
    void indexer_query_sim(Tensor q) override;
    void compress(int layer, CompressorRole role, const Tensor& a, const Tensor& g, const CompressorWeights& w,
                  const RopeParams& rope, float norm_eps) override;
    void indexer_topk(int layer, const Tensor& q, const Tensor& weights, int ratio, Tensor topk) override;
    void attention(int layer, const LayerConfig& lc, const Tensor& q, const Tensor& kv, const VecRef& sinks,
                   const Tensor* topk, float scale, Tensor out) override;
    void block_attention(int layer, const Tensor& q, const Tensor& kv, const VecRef& sinks, float scale,
                         Tensor out) override;
    void store_window(int layer, const Tensor& kv) override;
    void route(const Tensor& h, const MoeWeights& w, const ModelConfig& c, RoutingType routing, Tensor weights,
               Tensor ids) override;
    void moe(const Tensor& h, const MoeWeights& w, const Tensor& weights, const Tensor& ids, float limit,
             Tensor y) override;
    void moe_routed(const Tensor& h, const MoeWeights& w, const Tensor& weights, const Tensor& ids, float limit,
                    Tensor routed) override;
    void moe_shared(const Tensor& h, const ExpertWeights& shared, float limit, Tensor y) override;
    void moe_combine(const Tensor& routed, int k, const Tensor* shared, Tensor y) override;
    void count_expert_pairs(int layer, const Tensor& ids) override;
    void scale(Tensor x, float factor) override;
    void gather_rows(const Tensor& x, std::span<const int32_t> rows, Tensor y) override;

    // Implementation helpers shared by the cpu_*.cpp files.
    bool reference() const { return numerics_ == Numerics::kReference; }
    const StepBatch& step() const { return step_; }
    const ModelConfig& model() const { return model_; }
    CpuLayerState& layer_state(int layer) { return layers_[layer]; }
    int64_t ring_rows() const { return ring_rows_; }
    // Stored row of the paged store holding entry `entry` of sequence `seq` (null when the block table does not
    // cover it): a K=V row (kMain) or an indexer key (kIndexer).
    uint8_t* entry_row(int layer, CompressorRole role, const SequenceSlice& seq, int64_t entry);
    // Stored ring row of position `pos` of a slot.
    uint8_t* ring_row(int layer, int32_t slot, int64_t pos);
    const StateRowFormat& kv_format() const { return kv_format_; }
    const StateRowFormat& key_format() const { return key_format_; }
    const std::vector<float>& inv_freq(const RopeParams& rope);

  private:
    // Stored key rows of every step token (cpu_attention.cpp): its window (this step's rows, `step_rows` in the
    // storage format, or the ring), then the visible compressed rows (all HCA entries, or the CSA picks).
    std::vector<std::vector<const uint8_t*>> stored_key_rows(int layer, const LayerConfig& lc, const uint8_t* step_rows,
                                                             const Tensor* topk);
    // The key rows of DSpark's draft block (block_attention): the window of ring rows before each sequence's step,
    // then all of its step rows.
    std::vector<std::vector<const uint8_t*>> block_key_rows(int layer, const uint8_t* step_rows);
    // This step's K=V rows as the ring stores them (kv itself when float32; else encoded into `storage`).
    const uint8_t* step_rows_as_stored(const Tensor& kv, std::vector<float>& storage);
    // Softmax attention of every query head over its key rows with the sink (exact or reference numerics).
    void attend_all(const Tensor& q, const std::vector<std::vector<const uint8_t*>>& stored, const VecRef& sinks,
                    float scale, Tensor out);
    // y[:, 0:count] = x W[row0 : row0 + count]^T for x [m, cols] with row stride y_stride, in this backend's
    // numerics (cpu_linear.cpp).
    void matmul_for_numerics(const WeightRef& w, int64_t row0, int64_t count, const float* x, int64_t m, float* y,
                             int64_t y_stride) const;
    void create_snapshot_state();  // cpu_snapshot.cpp
    // Copies a snapshot's rows between slot storage and snapshot storage (to_snapshot: save, else restore).
    void transfer_snapshot(int32_t slot, int32_t snapshot, int64_t boundary, bool to_snapshot);
    // Copies a block's or a snapshot's state between the backend's storage and host bytes (cpu_tiers.cpp).
    void transfer_block(int32_t block, std::span<std::byte> host, bool to_host);
    void transfer_snapshot_bytes(int32_t snapshot, std::span<std::byte> host, bool to_host);
    // Expert tier (cpu_expert_cache.cpp): an owned copy of a host expert's piece; a slot's address, checked.
    const void* host_copy(const void* bytes, int64_t n);
    const std::byte* expert_slot(int layer, int slot, const ExpertWeights& expert) const;

    Numerics numerics_;
    int threads_;
    Fp8Sites fp8_;  // FP8 weights in memory, activation quantisation, fp8 K=V rows and indexer keys
    ModelConfig model_;
    StateConfig state_;
    int64_t ring_rows_ = 0;      // the same for every layer (window + rewind capacity)
    StateRowFormat kv_format_;   // K=V rows as stored
    StateRowFormat key_format_;  // indexer keys as stored
    std::vector<CpuLayerState> layers_;
    StepBatch step_;
    std::deque<std::vector<float>> arena_;    // step scratch (stable addresses)
    std::deque<std::vector<float>> vectors_;  // uploaded small vectors
    std::deque<std::vector<int32_t>> tables_;
    std::map<std::tuple<double, int, bool>, std::vector<float>> inv_freq_cache_;
    std::unordered_map<const void*, std::unique_ptr<std::byte[]>> host_experts_;  // host experts' pieces
    std::vector<std::byte> expert_cache_;  // [layers][slots] experts in checkpoint form
    int expert_cache_layers_ = 0;
    int expert_cache_slots_ = 0;
    int64_t expert_slot_bytes_ = 0;
    std::vector<int64_t> expert_pairs_;  // [layers][experts] pairs counted since the last take
    int counted_experts_ = 0;
};

}  // namespace dsv4
