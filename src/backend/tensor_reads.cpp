#include "backend/tensor_reads.h"

#include <cstring>

namespace dsv4 {

std::vector<float> read_f32(ModelOps& ops, const Tensor& t) {
    std::vector<float> out(static_cast<size_t>(t.numel()));
    if (!out.empty()) ops.to_host(t, out.data());
    return out;
}

std::vector<int32_t> read_i32(ModelOps& ops, const Tensor& t) {
    Tensor bits = t;
    bits.dtype = DType::kF32;  // a copy of the bytes, no arithmetic
    const std::vector<float> raw = read_f32(ops, bits);
    std::vector<int32_t> out(raw.size());
    if (!out.empty()) std::memcpy(out.data(), raw.data(), out.size() * sizeof(int32_t));
    return out;
}

std::vector<int32_t> read_argmax_rows(ModelOps& ops, const Tensor& x) {
    if (x.numel() == 0) return {};  // a step without logits rows (a prefill chunk that samples nothing)
    const size_t mark = ops.scratch_mark();
    Tensor ids = ops.alloc(DType::kI32, {x.size(0)});
    ops.argmax_rows(x, ids);
    std::vector<int32_t> out = read_i32(ops, ids);
    ops.scratch_release(mark);
    return out;
}

SampledRows read_sampled_rows(ModelOps& ops, const Tensor& logits, const SampleRowsArgs& args) {
    SampledRows out;
    if (args.draws.empty()) return out;
    const auto draws = static_cast<int64_t>(args.draws.size());
    const size_t mark = ops.scratch_mark();
    Tensor ids = ops.alloc(DType::kI32, {draws});
    const bool wanted = wants_logprobs(args);
    Tensor logprobs = wanted ? ops.alloc(DType::kI32, {draws, kDrawLogprobsWords}) : Tensor();
    const bool probing = wants_probes(args);
    Tensor probes = probing ? ops.alloc(DType::kI32, {draws, kProbeMassWords}) : Tensor();
    ops.sample_rows(logits, args, ids, wanted ? &logprobs : nullptr, probing ? &probes : nullptr);
    out.ids = read_i32(ops, ids);
    if (wanted) {
        const std::vector<int32_t> words = read_i32(ops, logprobs);
        out.logprobs.resize(args.draws.size());
        std::memcpy(static_cast<void*>(out.logprobs.data()), words.data(), words.size() * sizeof(int32_t));
    }
    if (probing) {
        const std::vector<int32_t> words = read_i32(ops, probes);
        out.probes.resize(args.draws.size());
        std::memcpy(static_cast<void*>(out.probes.data()), words.data(), words.size() * sizeof(int32_t));
    }
    ops.scratch_release(mark);
    return out;
}

}  // namespace dsv4
