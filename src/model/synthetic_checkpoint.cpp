#include "model/synthetic_checkpoint.h"

#include <bit>
#include <cstring>
#include <fstream>
#include <map>
#include <span>

#include "core/error.h"
#include "core/float_formats.h"
#include "core/parallel.h"
#include "loader/safetensors_writer.h"
#include "model/synthetic_routing.h"
#include "model/synthetic_values.h"

namespace dsv4 {
namespace {

namespace fs = std::filesystem;

static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian");

constexpr int64_t kChunkValues = int64_t{1} << 22;  // values generated per chunk (16 MB of float32)

bool ends_with(std::string_view s, std::string_view suffix) {
    return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

std::string weight_name_of_scale(std::string_view scale_name) {
    return std::string(scale_name.substr(0, scale_name.size() - std::string_view(".scale").size())) + ".weight";
}

std::string scale_name_of_weight(std::string_view weight_name) {
    return std::string(weight_name.substr(0, weight_name.size() - std::string_view(".weight").size())) + ".scale";
}

std::span<const uint8_t> as_bytes(const void* data, size_t size) {
    return {static_cast<const uint8_t*>(data), size};
}

void write_text_file(const fs::path& path, const std::string& text) {
    const fs::path partial = path.string() + ".partial";
    {
        std::ofstream out(partial, std::ios::binary | std::ios::trunc);
        out << text;
        out.close();
        DSV4_CHECK(out.good(), "{}: write failed", partial.string());
    }
    std::error_code ec;
    fs::rename(partial, path, ec);
    DSV4_CHECK(!ec, "{}: cannot rename into place: {}", path.string(), ec.message());
}

// Generates and writes tensors in the writer's order. Quantised weights produce their scales as a by-product; those
// wait in pending_ until the scale tensor's turn (right after its weight in the layout), or are recomputed if a
// scale comes first.
class Generator {
  public:
    Generator(const ModelConfig& config, const std::vector<TensorSpec>& specs, const SyntheticOptions& options,
              CheckpointWriter& writer)
        : c_(config), options_(options), writer_(writer) {
        for (const auto& spec : specs) specs_.emplace(spec.name, &spec);
    }

    void write(const TensorSpec& spec) {
        writer_.begin_tensor(spec.name);
        if (spec.is_scale) {
            write_scale(spec);
        } else if (spec.dtype == DType::kF8E4M3 || spec.dtype == DType::kI8) {  // FP8 weight or packed FP4 expert
            std::vector<uint8_t> scales = quantized(spec, true);
            pending_[scale_name_of_weight(spec.name)] = std::move(scales);
        } else if (spec.dtype == DType::kI64) {
            write_expert_table(spec);
        } else {
            write_plain(spec);
        }
        writer_.end_tensor();
    }

    const TensorSpec& spec(const std::string& name) const {
        auto it = specs_.find(name);
        DSV4_CHECK(it != specs_.end(), "synthetic checkpoint: no tensor '{}' in the expected set", name);
        return *it->second;
    }

  private:
    void emit(std::span<const uint8_t> bytes) {
        writer_.append(bytes);
        if (options_.on_bytes) options_.on_bytes(bytes.size());
    }

    void write_scale(const TensorSpec& spec) {
        auto it = pending_.find(spec.name);
        if (it != pending_.end()) {
            emit(it->second);
            pending_.erase(it);
            return;
        }
        emit(quantized(this->spec(weight_name_of_scale(spec.name)), false));
    }

    // Quantises a weight chunk by chunk; writes the codes when `emit_codes`; returns the scale tensor's bytes.
    std::vector<uint8_t> quantized(const TensorSpec& spec, bool emit_codes) {
        const LogicalShape shape = synthetic_logical_shape(spec);
        const bool fp8 = spec.dtype == DType::kF8E4M3;
        const int64_t unit = fp8 ? c_.weight_block_rows : 1;  // rows quantised together
        const int64_t chunk_rows = std::max<int64_t>(unit, kChunkValues / shape.cols / unit * unit);
        const int64_t block_cols = fp8 ? c_.weight_block_cols : c_.fp4_scale_block;
        const int64_t scale_cols = (shape.cols + block_cols - 1) / block_cols;
        const int64_t code_cols = fp8 ? shape.cols : shape.cols / 2;
        std::vector<uint8_t> scales;
        std::vector<float> values;
        std::vector<uint8_t> codes;
        for (int64_t row0 = 0; row0 < shape.rows; row0 += chunk_rows) {
            const int64_t rows = std::min(chunk_rows, shape.rows - row0);
            const int64_t units = (rows + unit - 1) / unit;
            values.resize(static_cast<size_t>(rows * shape.cols));
            codes.resize(static_cast<size_t>(rows * code_cols));
            const size_t scale_base = scales.size();
            scales.resize(scale_base + static_cast<size_t>(units * scale_cols));
            parallel_for(units, [&](int64_t u) {
                const int64_t r0 = u * unit, n = std::min(unit, rows - r0);
                float* v = values.data() + r0 * shape.cols;
                synthetic_rows(spec, options_.seed, row0 + r0, n, v);
                uint8_t* out = codes.data() + r0 * code_cols;
                uint8_t* s = scales.data() + scale_base + u * scale_cols;
                if (fp8) {
                    quantize_fp8_blocks(v, n, shape.cols, c_.weight_block_rows, c_.weight_block_cols, out, s);
                } else {
                    quantize_fp4_rows(v, n, shape.cols, c_.fp4_scale_block, out, s);
                }
            });
            if (emit_codes) emit(codes);
        }
        return scales;
    }

    void write_plain(const TensorSpec& spec) {
        DSV4_CHECK(spec.dtype == DType::kBF16 || spec.dtype == DType::kF32,
                   "synthetic checkpoint: tensor '{}' has "
                   "dtype {}, which the generator does not produce",
                   spec.name, dtype_name(spec.dtype));
        const LogicalShape shape = synthetic_logical_shape(spec);
        const int64_t chunk_rows = std::max<int64_t>(1, kChunkValues / shape.cols);
        std::vector<float> values;
        std::vector<uint16_t> bf16;
        for (int64_t row0 = 0; row0 < shape.rows; row0 += chunk_rows) {
            const int64_t rows = std::min(chunk_rows, shape.rows - row0);
            values.resize(static_cast<size_t>(rows * shape.cols));
            parallel_for(rows, [&](int64_t r) {
                synthetic_rows(spec, options_.seed, row0 + r, 1, values.data() + r * shape.cols);
            });
            skew_router_bias(spec, values);
            if (spec.dtype == DType::kF32) {
                emit(as_bytes(values.data(), values.size() * sizeof(float)));
                continue;
            }
            bf16.resize(values.size());
            for (size_t i = 0; i < values.size(); ++i) bf16[i] = encode_bf16(values[i]);
            emit(as_bytes(bf16.data(), bf16.size() * sizeof(uint16_t)));
        }
    }

    // A backbone layer's router bias with skewed popularity (model/synthetic_routing.h); others are left alone.
    void skew_router_bias(const TensorSpec& spec, std::vector<float>& values) const {
        const int layer = tensor_layer(spec.name);
        const double skew = routing_skew_of(options_.routing_skew, layer, c_.num_layers);
        if (skew <= 0 || !ends_with(spec.name, "gate.bias") ||
            values.size() != static_cast<size_t>(c_.n_routed_experts))
            return;
        const std::vector<float> offsets = zipf_bias_offsets(c_.n_routed_experts, skew, options_.seed, layer);
        for (size_t e = 0; e < values.size(); ++e) values[e] += offsets[e];
    }

    void write_expert_table(const TensorSpec& spec) {
        DSV4_CHECK(ends_with(spec.name, "tid2eid") && spec.shape.size() == 2,
                   "synthetic checkpoint: unexpected I64 "
                   "tensor '{}'",
                   spec.name);
        const int layer = tensor_layer(spec.name);
        const double skew = routing_skew_of(options_.routing_skew, layer, c_.num_layers);
        const int k = static_cast<int>(spec.shape[1]);
        const std::vector<int64_t> table =
            skew > 0 ? zipf_expert_table(spec.shape[0], k, c_.n_routed_experts, skew, options_.seed, layer)
                     : synthetic_expert_table(spec.shape[0], k, c_.n_routed_experts, options_.seed, spec.name);
        emit(as_bytes(table.data(), table.size() * sizeof(int64_t)));
    }

    const ModelConfig& c_;
    const SyntheticOptions& options_;
    CheckpointWriter& writer_;
    std::map<std::string, const TensorSpec*, std::less<>> specs_;
    std::map<std::string, std::vector<uint8_t>, std::less<>> pending_;
};

std::vector<TensorDecl> declarations(const std::vector<TensorSpec>& specs) {
    std::vector<TensorDecl> decls;
    decls.reserve(specs.size());
    for (const auto& s : specs) decls.push_back({s.name, s.dtype, s.shape});
    return decls;
}

}  // namespace

uint64_t synthetic_checkpoint_bytes(const SyntheticModel& model) {
    uint64_t total = 0;
    for (const auto& spec : expected_tensors(parse_model_config(model.config), model.drafts)) {
        total += tensor_nbytes({spec.name, spec.dtype, spec.shape});
    }
    return total;
}

SyntheticResult write_synthetic_checkpoint(const fs::path& dir, const SyntheticModel& model,
                                           const SyntheticOptions& options) {
    const ModelConfig config = parse_model_config(model.config);
    const std::vector<TensorSpec> specs = expected_tensors(config, model.drafts);
    CheckpointWriter writer(dir, declarations(specs), options.shards);  // creates dir
    write_text_file(dir / "config.json", model.config.dump(2) + "\n");
    Generator generator(config, specs, options, writer);
    for (const ShardPlan& shard : writer.plan()) {
        for (const TensorDecl& decl : shard.tensors) generator.write(generator.spec(decl.name));
        if (options.on_shard_done) options.on_shard_done();
    }
    writer.close();
    return {writer.total_bytes(), specs.size(), options.shards};
}

}  // namespace dsv4
