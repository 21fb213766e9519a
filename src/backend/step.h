// The description of one forward step that crosses into a backend, and the numerics modes: no request, scheduler or
// JSON types cross the backend interfaces; a step is a StepBatch (tokens, positions, and per sequence its state slot
// and block table).
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace dsv4 {

enum class Numerics : uint8_t {
    kExact,      // float32 arithmetic on dequantized weights; the golden reference
    kReference,  // DeepSeek's inference roundings (bf16 activations, FP8 activation quant, FP8/FP4 cache sims)
    kFast,       // the production GPU path
};

std::string_view numerics_name(Numerics n);
Numerics parse_numerics(std::string_view name);

// Which roundings a linear applies in reference numerics (no effect in exact numerics).
enum class LinearKind : uint8_t {
    kQuantized,  // FP8/FP4 weight: per-128 FP8 activation quantization, bf16 output
    kBf16Out,    // plain GEMM of bf16 activations, bf16 output (wo_a)
    kF32Out,     // plain GEMM, float32 output (compressor projections, router, indexer weights, lm head)
};

// Which compressor of a layer an op addresses.
enum class CompressorRole : uint8_t { kMain, kIndexer };

// One sequence's part of a step.
struct SequenceSlice {
    int32_t slot = 0;         // fixed-state slot (ring, compressor pending data)
    int32_t token_begin = 0;  // index of its first token in the step
    int32_t n_tokens = 0;
    int64_t start_pos = 0;             // absolute position of its first token (= tokens already in its state)
    std::vector<int32_t> block_table;  // physical block ids covering positions [0, start_pos + n_tokens)
};

// Everything a backend needs to run one forward step over several sequences.
struct StepBatch {
    std::vector<int32_t> tokens;     // [N]
    std::vector<int32_t> positions;  // [N] absolute positions
    std::vector<int32_t> seq_index;  // [N] index into seqs
    std::vector<SequenceSlice> seqs;
    std::vector<int32_t> logit_rows;  // step rows whose logits are wanted, in output order
    // Substeps (ModelOps::begin_substep): the rows of an earlier step's outputs that this substep's tokens read
    // (gather_rows), uploaded with the metadata so that the gather can be recorded in a graph; empty otherwise.
    std::vector<int32_t> source_rows;

    int64_t n_tokens() const { return static_cast<int64_t>(tokens.size()); }
    // Tokens every sequence feeds when they all feed the same number (decode: 1; draft verification: k + 1), else 0.
    int32_t uniform_tokens_per_seq() const;
    // Appends a sequence's tokens (positions start_pos, start_pos+1, ...).
    void add_sequence(int32_t slot, int64_t start_pos, std::span<const int32_t> token_ids,
                      std::vector<int32_t> block_table);
};

}  // namespace dsv4
