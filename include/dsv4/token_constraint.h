// Constrained decoding, as the engine sees it (structured outputs: JSON mode, JSON Schema, regex, grammars, forced
// tool calls). The server compiles what the request asks for into a TokenConstraint (src/structured); the engine
// only asks each completion's state which tokens may come next and tells it which token was chosen. Plain C++ data:
// no JSON, no grammar types cross this header (design.md principle 5).
#pragma once

#include <cstdint>
#include <memory>
#include <span>

namespace dsv4 {

struct TokenMaskSummary {
    bool any_token = false;    // some token other than an end (EOS) token is allowed
    bool end_allowed = false;  // the output may end here: the end tokens are allowed
};

// One completion's position in the constraint. Not thread-safe; the sampler owns it with the completion.
class TokenConstraintState {
  public:
    virtual ~TokenConstraintState() = default;
    // Writes the allowed tokens of the next position: bit t of allowed[t / 64] is set when token t may be sampled.
    // allowed.size() == (vocab_size + 63) / 64; every word is written.
    virtual TokenMaskSummary fill_allowed(std::span<uint64_t> allowed) = 0;
    // Advances by the chosen token. Returns false, changing nothing, when the constraint does not allow it.
    virtual bool accept(int32_t token) = 0;
    // Undoes the last `count` accepted tokens (speculative decoding: rejected drafts).
    virtual void rollback(int count) = 0;
};

// A compiled constraint, shared by every completion of a request (and by requests with the same constraint).
class TokenConstraint {
  public:
    virtual ~TokenConstraint() = default;
    virtual std::unique_ptr<TokenConstraintState> start() const = 0;
    virtual int64_t vocab_size() const = 0;  // bits of a mask
};

}  // namespace dsv4
