#include "model/fp8_weights.h"

#include <fmt/format.h>

#include "core/error.h"
#include "core/parallel.h"

namespace dsv4 {
namespace {

constexpr std::string_view kWeightSuffix = ".weight";

std::string quoted_fmt(Fp8Dialect dialect) {
    return fmt::format("\"{}\"", fp8_fmt_name(dialect));
}

// The message for bytes of dialect `bytes` labelled `claimed`.
std::string mislabel_message(const Fp8DialectEvidence& e, Fp8Dialect claimed, Fp8Dialect bytes,
                             const std::string& what) {
    const bool ocp_bytes = bytes == Fp8Dialect::kOcp;
    const int64_t codes = ocp_bytes ? e.census.code_80 : e.census.code_7f;
    const int64_t tensors = ocp_bytes ? e.tensors_with_80 : e.tensors_with_7f;
    const std::string& first = ocp_bytes ? e.first_80_tensor : e.first_7f_tensor;
    const char* meaning = ocp_bytes ? "-0 in OCP and NaN in FNUZ" : "NaN in OCP and +-240 in FNUZ";
    return fmt::format(
        "{}: config.json says the FP8 weights are {} (quantization_config.fmt {}), but the bytes are {}: {} codes {} "
        "in {} of {} FP8 tensors (first: {}) are {}. Read as {}, every FP8 weight would be {} its value (the FP8 "
        "dialect trap). Set quantization_config.fmt to {}; `--fp8-dialect {}` then converts the weights exactly at "
        "load, or `dsv4 convert-checkpoint --fp8 {}` writes a converted copy.",
        what, fp8_dialect_label(claimed), quoted_fmt(claimed), fp8_dialect_label(bytes), codes,
        ocp_bytes ? "0x80" : "0x7F/0xFF", tensors, e.tensors, first, meaning, fp8_dialect_label(claimed),
        ocp_bytes ? "half" : "twice", quoted_fmt(bytes), fp8_dialect_name(claimed), fp8_dialect_name(claimed));
}

}  // namespace

std::vector<Fp8WeightTensor> fp8_weight_tensors(const ModelConfig& config, const BoundWeights& bound) {
    std::vector<Fp8WeightTensor> out;
    for (const TensorSpec& spec : bound.specs) {
        if (spec.dtype != DType::kF8E4M3 || spec.shape.size() != 2 || !spec.name.ends_with(kWeightSuffix)) continue;
        const std::string base = spec.name.substr(0, spec.name.size() - kWeightSuffix.size());
        Fp8WeightTensor t{
            spec.name, base + ".scale",
            Fp8BlockGrid{spec.shape[0], spec.shape[1], config.weight_block_rows, config.weight_block_cols}};
        DSV4_CHECK(bound.find(t.scale) != nullptr, "FP8 weight {} has no scale tensor {}", t.weight, t.scale);
        out.push_back(std::move(t));
    }
    return out;
}

Fp8DialectEvidence fp8_dialect_evidence(const ModelConfig& config, const BoundWeights& bound) {
    const std::vector<Fp8WeightTensor> tensors = fp8_weight_tensors(config, bound);
    std::vector<Fp8CodeCensus> per_tensor(tensors.size());
    parallel_for(static_cast<int64_t>(tensors.size()), int64_t{1} << 20, [&](int64_t i) {
        const TensorView& view = bound.get(tensors[i].weight);
        per_tensor[i] = census_fp8_codes(view.data, static_cast<int64_t>(view.nbytes));
    });
    Fp8DialectEvidence e;
    e.tensors = static_cast<int64_t>(tensors.size());
    for (size_t i = 0; i < tensors.size(); ++i) {
        e.census.add(per_tensor[i]);
        if (per_tensor[i].code_80 > 0 && e.tensors_with_80++ == 0) e.first_80_tensor = tensors[i].weight;
        if (per_tensor[i].code_7f > 0 && e.tensors_with_7f++ == 0) e.first_7f_tensor = tensors[i].weight;
    }
    e.evidence = fp8_evidence(e.census);
    return e;
}

void check_fp8_dialect(const Fp8DialectEvidence& e, Fp8Dialect claimed, const std::string& what) {
    if (!contradicts(e.evidence, claimed)) return;
    switch (e.evidence) {
        case Fp8Evidence::kOcp:
            throw Error(mislabel_message(e, claimed, Fp8Dialect::kOcp, what));
        case Fp8Evidence::kFnuz:
            throw Error(mislabel_message(e, claimed, Fp8Dialect::kFnuz, what));
        case Fp8Evidence::kContradictory:
        case Fp8Evidence::kNone:
            break;
    }
    fail(
        "{}: the FP8 weights hold codes that are NaN in both dialects' reading: {} codes 0x80 (NaN in FNUZ; first in "
        "{}) and {} codes 0x7F/0xFF (NaN in OCP; first in {}). config.json says {}; neither OCP nor FNUZ e4m3 reads "
        "these bytes as numbers, so the checkpoint is corrupt or not e4m3.",
        what, e.census.code_80, e.first_80_tensor, e.census.code_7f, e.first_7f_tensor, fp8_dialect_label(claimed));
}

Fp8ConversionReport convert_each_fp8_weight(const ModelConfig& config, const BoundWeights& bound, Fp8Dialect target,
                                            const Fp8ConvertedSink& sink) {
    const Fp8Dialect from = bound.fp8_dialect;
    Fp8ConversionReport total;
    for (const Fp8WeightTensor& t : fp8_weight_tensors(config, bound)) {
        const TensorView& codes = bound.get(t.weight);
        const TensorView& scales = bound.get(t.scale);
        std::vector<uint8_t> out_codes(codes.nbytes), out_scales(scales.nbytes);
        const Fp8ConversionReport report =
            convert_fp8_blocks(codes.data, scales.data, t.grid, from, target, out_codes.data(), out_scales.data());
        DSV4_CHECK(report.exact(), "converting {} from {} to {}: {}", t.weight, fp8_dialect_label(from),
                   fp8_dialect_label(target), report.describe());
        total.add(report);
        sink(t, std::move(out_codes), std::move(out_scales));
    }
    return total;
}

Fp8ConversionReport convert_fp8_weights(const ModelConfig& config, BoundWeights& bound, Fp8Dialect target) {
    if (bound.fp8_dialect == target) return {};
    const Fp8ConversionReport total = convert_each_fp8_weight(
        config, bound, target, [&](const Fp8WeightTensor& t, std::vector<uint8_t> codes, std::vector<uint8_t> scales) {
            bound.replace_bytes(t.weight, std::move(codes));
            bound.replace_bytes(t.scale, std::move(scales));
        });
    bound.fp8_dialect = target;
    return total;
}

}  // namespace dsv4
