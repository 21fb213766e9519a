#include "server/generation/structured_outputs.h"

#include "server/http/api_error.h"
#include "server/openai/api_types.h"
#include "structured/grammar_constraint.h"

namespace dsv4::server {
namespace {

class MetricsObserver final : public structured::MaskObserver {
  public:
    explicit MetricsObserver(std::shared_ptr<StructuredOutputMetrics> metrics) : metrics_(std::move(metrics)) {}
    void mask_computed(double seconds, bool cache_hit) override {
        metrics_->mask_seconds.observe(seconds);
        if (cache_hit) metrics_->mask_cache_hits.fetch_add(1, std::memory_order_relaxed);
    }

  private:
    std::shared_ptr<StructuredOutputMetrics> metrics_;
};

}  // namespace

std::shared_ptr<const TokenConstraint> StructuredOutputs::compile(
    const StructuredOutputRequest& request, int32_t start_after_token, const tokenizer::Tokenizer& tokenizer,
    const ModelInfo& info, const std::shared_ptr<StructuredOutputMetrics>& metrics) {
    std::call_once(once_, [&] {
        const auto vocabulary = structured::shared_vocabulary(tokenizer, info.eos_token_ids, info.vocab_size);
        cache_ = std::make_unique<structured::GrammarCache>(vocabulary, 64, std::make_shared<MetricsObserver>(metrics));
    });
    try {
        const structured::GrammarCache::Result result = cache_->get(request.spec, start_after_token);
        if (result.cache_hit) {
            metrics->grammar_cache_hits.fetch_add(1, std::memory_order_relaxed);
        } else {
            metrics->grammars_compiled.fetch_add(1, std::memory_order_relaxed);
            metrics->compile_seconds.observe(result.compile_seconds);
        }
        return result.constraint;
    } catch (const structured::GrammarError& e) {
        metrics->grammar_errors.fetch_add(1, std::memory_order_relaxed);
        fail_request(request.param, "'{}': {}", request.param, e.what());
    }
}

}  // namespace dsv4::server
