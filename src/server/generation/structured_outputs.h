// StructuredOutputs: the server's side of constrained decoding. It holds the grammar cache, built on first use from
// the tokenizer (ordinary tokens as trie pieces, DSML as an added token the tool-call grammar may use) and the
// model's EOS ids, compiles a request's GrammarSpec into the TokenConstraint the engine applies, and reports
// compiles, cache hits and mask times to the metrics. A spec that cannot be compiled is a 400 naming the request
// field and the unsupported feature.
#pragma once

#include <memory>
#include <mutex>

#include "dsv4/engine.h"
#include "dsv4/token_constraint.h"
#include "server/http/metrics.h"
#include "structured/grammar_cache.h"
#include "tokenizer/tokenizer.h"

namespace dsv4::server {

struct StructuredOutputRequest;

class StructuredOutputs {
  public:
    // start_after_token: the output is free until this token (</think> when the prompt opened reasoning), -1: none.
    std::shared_ptr<const TokenConstraint> compile(const StructuredOutputRequest& request, int32_t start_after_token,
                                                   const tokenizer::Tokenizer& tokenizer, const ModelInfo& info,
                                                   const std::shared_ptr<StructuredOutputMetrics>& metrics);

  private:
    std::once_flag once_;
    std::unique_ptr<structured::GrammarCache> cache_;
};

}  // namespace dsv4::server
