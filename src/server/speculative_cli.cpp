#include "server/speculative_cli.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace dsv4::server {
namespace {

constexpr std::string_view kKeys =
    "method, num_speculative_tokens, draft_sample_method, rejection_sample_method, disable_by_batch_size, "
    "confidence_threshold, oracle_acceptance_length";

template <typename T>
T typed(const nlohmann::json& value, std::string_view key, std::string_view want) {
    try {
        return value.get<T>();
    } catch (const nlohmann::json::exception&) {
        fail("--speculative-config: '{}' must be {}, got {}", key, want, value.dump());
    }
}

}  // namespace

SpeculativeConfig parse_speculative_config(std::string_view json) {
    SpeculativeConfig c;
    if (json.empty()) return c;
    nlohmann::json doc;
    try {
        doc = nlohmann::json::parse(json);
    } catch (const nlohmann::json::parse_error& e) {
        fail("--speculative-config is not valid JSON ({}): {}", e.what(), json);
    }
    DSV4_CHECK(doc.is_object(),
               "--speculative-config must be a JSON object, e.g. "
               "'{{\"method\":\"mtp\",\"num_speculative_tokens\":3}}'");
    for (const auto& [key, value] : doc.items()) {
        if (key == "method") {
            c.method = typed<std::string>(value, key, "a string (mtp | dspark)");
        } else if (key == "num_speculative_tokens") {
            DSV4_CHECK(value.is_number_integer(), "--speculative-config: 'num_speculative_tokens' must be an integer");
            c.num_speculative_tokens = typed<int>(value, key, "an integer");
        } else if (key == "draft_sample_method") {
            c.draft_sample_method = typed<std::string>(value, key, "a string (greedy | probabilistic)");
        } else if (key == "rejection_sample_method") {
            c.rejection_sample_method = typed<std::string>(value, key, "a string (standard | block)");
        } else if (key == "disable_by_batch_size") {
            DSV4_CHECK(value.is_number_integer(), "--speculative-config: 'disable_by_batch_size' must be an integer");
            c.disable_by_batch_size = typed<int>(value, key, "an integer");
        } else if (key == "confidence_threshold") {
            c.confidence_threshold = typed<double>(value, key, "a number in [0, 1)");
        } else if (key == "oracle_acceptance_length") {
            c.oracle_acceptance_length = typed<double>(value, key, "a number in [1, k + 1] (a benchmark mode)");
        } else {
            fail("--speculative-config: unknown key '{}' (known: {})", key, kKeys);
        }
    }
    DSV4_CHECK(!c.method.empty(), "--speculative-config needs a 'method' (mtp | dspark)");
    DSV4_CHECK(c.num_speculative_tokens > 0, "--speculative-config needs 'num_speculative_tokens' (1 to 15)");
    return c;
}

}  // namespace dsv4::server
