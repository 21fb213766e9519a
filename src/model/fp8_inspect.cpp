#include "model/fp8_inspect.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/parallel.h"
#include "model/fp8_weights.h"
#include "model/inspect.h"

namespace dsv4 {
namespace {

// Block maxima by band: the top binade of a power-of-two quantiser with qmax 448 (OCP) or 224 (FNUZ, the same
// bytes), the FNUZ-only 0x7F (240), and anything lower (blocks not at their quantiser's range).
struct MaximaBands {
    int64_t top = 0;    // 0x76 .. 0x7E
    int64_t at_7f = 0;  // 0x7F
    int64_t lower = 0;  // below 0x76
};

MaximaBands bands(const Fp8CodeCensus& c) {
    MaximaBands b;
    for (int code = 0; code < 0x80; ++code) {
        const int64_t n = c.block_max[static_cast<size_t>(code)];
        if (code == 0x7F) {
            b.at_7f += n;
        } else if (code >= 0x76) {
            b.top += n;
        } else {
            b.lower += n;
        }
    }
    return b;
}

std::vector<Fp8GroupCensus> group_census(const ModelConfig& config, const BoundWeights& bound) {
    const std::vector<Fp8WeightTensor> tensors = fp8_weight_tensors(config, bound);
    std::vector<Fp8CodeCensus> per_tensor(tensors.size());
    parallel_for(static_cast<int64_t>(tensors.size()), int64_t{1} << 20, [&](int64_t i) {
        per_tensor[i] = census_fp8_blocks(bound.get(tensors[i].weight).data, tensors[i].grid);
    });
    std::vector<Fp8GroupCensus> groups;
    for (size_t i = 0; i < tensors.size(); ++i) {
        const std::string pattern = tensor_name_pattern(tensors[i].weight);
        auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.pattern == pattern; });
        if (it == groups.end()) it = groups.insert(groups.end(), Fp8GroupCensus{pattern, 0, {}});
        ++it->tensors;
        it->census.add(per_tensor[i]);
    }
    return groups;
}

std::string quant_text(const Fp8Quant& q) {
    return fmt::format("{} max {:g}", fp8_dialect_name(q.dialect), q.qmax);
}

nlohmann::json quant_json(const Fp8Quant& q) {
    return {{"dialect", fp8_dialect_name(q.dialect)}, {"max", q.qmax}};
}

nlohmann::json census_json(const Fp8CodeCensus& c) {
    const MaximaBands b = bands(c);
    return {{"codes", c.codes},
            {"code_80", c.code_80},
            {"code_7f_ff", c.code_7f},
            {"blocks", c.blocks},
            {"block_max_76_7e", b.top},
            {"block_max_7f", b.at_7f},
            {"block_max_below_76", b.lower},
            {"evidence", fp8_evidence_name(fp8_evidence(c))}};
}

}  // namespace

Fp8Inspection inspect_fp8(const ModelConfig& config, const BoundWeights* bound, Fp8Dialect runtime) {
    Fp8Inspection in;
    in.claimed = config.fp8_dialect;
    in.runtime = fp8_sites(runtime);
    if (bound == nullptr) return in;
    in.scanned = true;
    in.groups = group_census(config, *bound);
    for (const Fp8GroupCensus& g : in.groups) in.total.add(g.census);
    in.evidence = fp8_evidence(in.total);
    return in;
}

std::string fp8_inspection_text(const Fp8Inspection& in) {
    std::string out = "\nFP8 dialect:\n";
    out += fmt::format("  weights: {} per config.json (quantization_config.fmt \"{}\")", fp8_dialect_label(in.claimed),
                       fp8_fmt_name(in.claimed));
    if (!in.scanned) {
        out += "; bytes not scanned (no weights, or they do not match the config)\n";
    } else {
        out += fmt::format("; bytes: {} evidence, {}\n", fp8_evidence_name(in.evidence),
                           in.consistent() ? "consistent" : "CONTRADICTS config.json (loading refuses it)");
        out += fmt::format("  {:<40} {:>7} {:>13} {:>7} {:>8} {:>21} {:>6} {:>6}  {}\n", "group", "tensors", "codes",
                           "0x80", "0x7F/FF", "block max 0x76..0x7E", "0x7F", "lower", "evidence");
        for (const Fp8GroupCensus& g : in.groups) {
            const MaximaBands b = bands(g.census);
            out += fmt::format("  {:<40} {:>7} {:>13} {:>7} {:>8} {:>21} {:>6} {:>6}  {}\n", g.pattern, g.tensors,
                               group_digits(static_cast<uint64_t>(g.census.codes)), g.census.code_80, g.census.code_7f,
                               fmt::format("{} / {}", b.top, g.census.blocks), b.at_7f, b.lower,
                               fp8_evidence_name(fp8_evidence(g.census)));
        }
        out +=
            "  (0x80 is -0 in OCP and NaN in FNUZ; 0x7F/0xFF NaN in OCP and +-240 in FNUZ; block maxima cannot tell "
            "OCP from FNUZ quantised with max 224)\n";
    }
    const Fp8Sites& r = in.runtime;
    out += fmt::format(
        "  runtime with --fp8-dialect {}: weights in memory {} ({}); activations {}; K=V rows (fp8) {}; indexer keys "
        "(fp8) {}\n",
        fp8_dialect_name(r.weights), fp8_dialect_name(r.weights),
        r.weights == in.claimed ? "as stored" : "converted exactly at load", quant_text(r.activations),
        quant_text(r.kv_rows), quant_text(r.index_keys));
    return out;
}

nlohmann::json fp8_inspection_json(const Fp8Inspection& in) {
    nlohmann::json j{{"claimed", fp8_dialect_name(in.claimed)},
                     {"fmt", fp8_fmt_name(in.claimed)},
                     {"scanned", in.scanned},
                     {"runtime",
                      {{"weights", fp8_dialect_name(in.runtime.weights)},
                       {"weights_converted", in.runtime.weights != in.claimed},
                       {"activations", quant_json(in.runtime.activations)},
                       {"kv_rows", quant_json(in.runtime.kv_rows)},
                       {"index_keys", quant_json(in.runtime.index_keys)}}}};
    if (in.scanned) {
        j["evidence"] = fp8_evidence_name(in.evidence);
        j["consistent"] = in.consistent();
        j["total"] = census_json(in.total);
        j["groups"] = nlohmann::json::array();
        for (const Fp8GroupCensus& g : in.groups) {
            nlohmann::json group = census_json(g.census);
            group["pattern"] = g.pattern;
            group["tensors"] = g.tensors;
            j["groups"].push_back(std::move(group));
        }
    }
    return j;
}

}  // namespace dsv4
