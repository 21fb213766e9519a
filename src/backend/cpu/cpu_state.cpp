// Sequence state on the CPU: sliding-window rings, compressor pending data, and the paged compressed rows / indexer
// keys; plus the compressor op that turns per-token projections into compressed entries (model-spec 2.7, 2.8, 2.10).
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_numerics.h"
#include "config/rope.h"
#include "core/parallel.h"

namespace dsv4 {
namespace {

constexpr float kPoison = std::numeric_limits<float>::quiet_NaN();

int compressor_width(const CompressorWeights& w) {
    return w.overlap ? 2 * w.head_dim : w.head_dim;
}

// Where one position's (kv, gate + ape) record comes from: this step's projections or the pending ring.
struct RecordSource {
    const float* step_kv;    // [N, width]
    const float* step_gate;  // [N, width], ape already added
    const float* pending;    // this slot's ring: [rows][2 * width]
    int64_t pending_rows;
    int width;
    const SequenceSlice* seq;

    const float* kv(int64_t pos) const {
        if (pos >= seq->start_pos) return step_kv + (seq->token_begin + pos - seq->start_pos) * width;
        return pending + (pos % pending_rows) * 2 * width;
    }
    const float* gate(int64_t pos) const {
        if (pos >= seq->start_pos) return step_gate + (seq->token_begin + pos - seq->start_pos) * width;
        return pending + (pos % pending_rows) * 2 * width + width;
    }
};

// Softmax-gated pooling of one window, independently per channel (model-spec 2.7). CSA entry w pools the Ca halves
// of window w-1 and the Cb halves of window w (2 * ratio slots); HCA pools the ratio tokens of window w.
template <typename Acc>
void pool_window(const RecordSource& src, const CompressorWeights& w, int64_t window, float* out) {
    const int r = w.ratio, hd = w.head_dim;
    std::vector<const float*> kv_rows, gate_rows;
    std::vector<int> offsets;  // channel offset inside the record: 0 (Ca / HCA) or hd (Cb)
    auto add = [&](int64_t pos, int offset) {
        kv_rows.push_back(src.kv(pos));
        gate_rows.push_back(src.gate(pos));
        offsets.push_back(offset);
    };
    if (w.overlap) {
        if (window > 0) {
            for (int t = 0; t < r; ++t) add(r * (window - 1) + t, 0);
        }
        for (int t = 0; t < r; ++t) add(r * window + t, hd);
    } else {
        for (int t = 0; t < r; ++t) add(r * window + t, 0);
    }
    const size_t slots = kv_rows.size();
    std::vector<Acc> e(slots);
    for (int c = 0; c < hd; ++c) {
        float mx = -std::numeric_limits<float>::infinity();
        for (size_t i = 0; i < slots; ++i) mx = std::max(mx, gate_rows[i][offsets[i] + c]);
        Acc sum = 0;
        for (size_t i = 0; i < slots; ++i) sum += (e[i] = std::exp(Acc(gate_rows[i][offsets[i] + c]) - Acc(mx)));
        Acc acc = 0;
        for (size_t i = 0; i < slots; ++i) acc += e[i] / sum * kv_rows[i][offsets[i] + c];
        out[c] = static_cast<float>(acc);
    }
}

// Floats of storage for `rows` stored rows of `format` (row sizes are multiples of 4 bytes: checked in create_state).
size_t row_floats(const StateRowFormat& format, int64_t rows) {
    return static_cast<size_t>(rows * format.bytes() / 4);
}

// NaN in every storage dtype: float32 quiet NaN (as before the dtypes existed), else all-ones bytes (bf16 0xFFFF,
// e4m3 0xFF and UE8M0 0xFF are NaN).
float poison_for(StateDtype dtype) {
    return dtype == StateDtype::kF32 ? kPoison : std::bit_cast<float>(0xFFFFFFFFu);
}

}  // namespace

void CpuBackend::create_state(const ModelConfig& config, const StateConfig& state) {
    DSV4_CHECK(state.max_slots > 0 && state.num_blocks > 0 && state.block_tokens > 0 && state.rewind_capacity >= 0 &&
                   state.num_snapshots >= 0,
               "state: slots, blocks and block size must be positive");
    kv_format_ = kv_row_format(state.kv_dtype, config, fp8_.kv_rows);
    key_format_ = index_key_format(state.kv_dtype, config, fp8_.index_keys);
    DSV4_CHECK(kv_format_.bytes() % 4 == 0 && key_format_.bytes() % 4 == 0,
               "state: {} rows of {} bytes / indexer keys of {} bytes are not a multiple of 4 bytes",
               state_dtype_name(state.kv_dtype), kv_format_.bytes(), key_format_.bytes());
    model_ = config;
    state_ = state;
    const float poison = poison_for(state.kv_dtype);
    const auto slots = static_cast<size_t>(state.max_slots);
    layers_.assign(config.num_layers, {});
    for (int l = 0; l < config.num_layers; ++l) {
        CpuLayerState& ls = layers_[l];
        ls.shape = layer_state_shape(config, l, state.block_tokens, state.rewind_capacity);
        const LayerStateShape& shape = ls.shape;
        ring_rows_ = shape.ring_rows;
        ls.ring.assign(row_floats(kv_format_, int64_t{state.max_slots} * shape.ring_rows), poison);
        const int64_t block_rows = int64_t{state.num_blocks} * shape.entries_per_block;
        ls.main_pending.assign(slots * shape.main.slot_floats(), kPoison);
        ls.index_pending.assign(slots * shape.index.slot_floats(), kPoison);
        ls.entries.assign(row_floats(kv_format_, block_rows), poison);
        if (shape.has_index_keys()) ls.index_keys.assign(row_floats(key_format_, block_rows), poison);
    }
    create_snapshot_state();
}

StateBytes CpuBackend::allocated_state_bytes() const {
    StateBytes b;
    if (layers_.empty()) return b;
    for (const CpuLayerState& ls : layers_) {
        b.slot += static_cast<int64_t>(ls.ring.size() + ls.main_pending.size() + ls.index_pending.size()) * 4;
        b.block += static_cast<int64_t>(ls.entries.size() + ls.index_keys.size()) * 4;
        b.snapshot += static_cast<int64_t>(ls.snap_ring.size() + ls.snap_main.size() + ls.snap_index.size()) * 4;
    }
    b.slot /= state_.max_slots;
    b.block /= state_.num_blocks;
    if (state_.num_snapshots > 0) b.snapshot /= state_.num_snapshots;
    return b;
}

void CpuBackend::reset_slot(int32_t slot) {
    DSV4_CHECK(slot >= 0 && slot < state_.max_slots, "reset_slot: slot {} is outside [0, {})", slot, state_.max_slots);
    // Poison the slot so that a read of a position this sequence never wrote shows up as NaN in the tests.
    const float row_poison = poison_for(state_.kv_dtype);
    for (auto& ls : layers_) {
        auto poison = [&](std::vector<float>& v, float value) {
            if (v.empty()) return;
            const size_t per_slot = v.size() / state_.max_slots;
            std::fill_n(v.begin() + static_cast<ptrdiff_t>(per_slot * slot), per_slot, value);
        };
        poison(ls.ring, row_poison);
        poison(ls.main_pending, kPoison);
        poison(ls.index_pending, kPoison);
    }
}

uint8_t* CpuBackend::entry_row(int layer, CompressorRole role, const SequenceSlice& seq, int64_t entry) {
    CpuLayerState& ls = layers_[layer];
    const int64_t per_block = ls.shape.entries_per_block;
    const int64_t block = entry / per_block;
    if (entry < 0 || block >= static_cast<int64_t>(seq.block_table.size())) return nullptr;
    const int64_t physical = seq.block_table[block];
    const int64_t row = physical * per_block + entry % per_block;
    if (role == CompressorRole::kMain) return reinterpret_cast<uint8_t*>(ls.entries.data()) + row * kv_format_.bytes();
    return reinterpret_cast<uint8_t*>(ls.index_keys.data()) + row * key_format_.bytes();
}

uint8_t* CpuBackend::ring_row(int layer, int32_t slot, int64_t pos) {
    const int64_t row = static_cast<int64_t>(slot) * ring_rows_ + pos % ring_rows_;
    return reinterpret_cast<uint8_t*>(layers_[layer].ring.data()) + row * kv_format_.bytes();
}

void CpuBackend::compress(int layer, CompressorRole role, const Tensor& a, const Tensor& g, const CompressorWeights& w,
                          const RopeParams& rope, float norm_eps) {
    CpuLayerState& ls = layers_[layer];
    const int width = compressor_width(w);
    const int r = w.ratio, hd = w.head_dim;
    const int64_t n = a.size(0);
    // gate + ape for this step's tokens (ape is indexed by the position inside the window).
    std::vector<float> gate(g.f32(), g.f32() + n * width);
    for (int64_t t = 0; t < n; ++t) {
        const float* ape = w.ape.data + (step_.positions[t] % r) * width;
        for (int c = 0; c < width; ++c) gate[t * width + c] += ape[c];
    }
    std::vector<float>& pending = role == CompressorRole::kMain ? ls.main_pending : ls.index_pending;
    const CompressorRing& ring = role == CompressorRole::kMain ? ls.shape.main : ls.shape.index;
    DSV4_CHECK(ring.width == width, "compress: layer {} compressor width {} does not match its state ({})", layer,
               width, ring.width);
    const int64_t rows = ring.rows;
    const int64_t slot_floats = ring.slot_floats();
    const auto& freqs = inv_freq(rope);
    const int nope = hd - rope.rope_dim;

    const auto seqs = static_cast<int64_t>(step_.seqs.size());
    // Per sequence: its tokens' records copied and, at window ends, pooled (a few operations per channel).
    parallel_for(seqs, std::max<int64_t>(1, n / std::max<int64_t>(1, seqs)) * width * 8, [&](int64_t si) {
        const SequenceSlice& seq = step_.seqs[si];
        RecordSource src{a.f32(), gate.data(), pending.data() + seq.slot * slot_floats, rows, width, &seq};
        const int64_t end = seq.start_pos + seq.n_tokens;
        std::vector<float> entry(hd), cs(rope.rope_dim / 2), sn(rope.rope_dim / 2);
        for (int64_t win = seq.start_pos / r; win < end / r; ++win) {
            cpu::with_acc(reference(), [&](auto acc) { pool_window<decltype(acc)>(src, w, win, entry.data()); });
            if (reference()) cpu::round_bf16(entry.data(), hd);
            Tensor view(entry.data(), DType::kF32, {1, hd});
            rms_norm(view, &w.norm, norm_eps, view);
            rope_cos_sin(freqs, win * r, cs.data(), sn.data());
            float* tail = entry.data() + nope;
            cpu::with_acc(reference(), [&](auto acc) {
                cpu::rotate_pairs<decltype(acc)>(tail, cs.data(), sn.data(), rope.rope_dim / 2, false);
            });
            if (reference()) {
                cpu::round_bf16(entry.data(), hd);
                if (role == CompressorRole::kMain) {
                    cpu::fp8_sim(entry.data(), nope, 64, fp8_.kv_rows);
                } else {
                    cpu::hadamard(entry.data(), hd);
                    cpu::fp4_sim(entry.data(), hd, 32);
                }
            }
            uint8_t* dst = entry_row(layer, role, seq, win);
            DSV4_CHECK(dst != nullptr, "compress: entry {} of layer {} is not covered by the block table", win, layer);
            (role == CompressorRole::kMain ? kv_format_ : key_format_).encode(entry.data(), dst);
        }
        // Keep the records later windows (and rewinds) may still need.
        for (int64_t pos = std::max(seq.start_pos, end - rows); pos < end; ++pos) {
            float* rec = pending.data() + seq.slot * slot_floats + (pos % rows) * 2 * width;
            std::memcpy(rec, src.kv(pos), width * sizeof(float));
            std::memcpy(rec + width, src.gate(pos), width * sizeof(float));
        }
    });
}

void CpuBackend::store_window(int layer, const Tensor& kv) {
    const int hd = model_.head_dim;
    for (const SequenceSlice& seq : step_.seqs) {
        const int64_t end = seq.start_pos + seq.n_tokens;
        for (int64_t pos = std::max(seq.start_pos, end - ring_rows_); pos < end; ++pos) {
            kv_format_.encode(kv.f32() + (seq.token_begin + pos - seq.start_pos) * hd, ring_row(layer, seq.slot, pos));
        }
    }
}

}  // namespace dsv4
