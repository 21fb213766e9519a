#include "server/http/auth.h"

#include <cstdint>

namespace dsv4::server {

bool constant_time_equal(std::string_view a, std::string_view b) {
    // Walk the longer length so the loop does not stop early on a short guess; fold the length difference in.
    const size_t n = std::max(a.size(), b.size());
    uint64_t diff = a.size() ^ b.size();
    for (size_t i = 0; i < n; ++i) {
        const auto x = static_cast<unsigned char>(i < a.size() ? a[i] : 0);
        const auto y = static_cast<unsigned char>(i < b.size() ? b[i] : 0);
        diff |= static_cast<uint64_t>(x ^ y);
    }
    // Keep the compiler from turning the loop into an early-exit comparison.
    volatile uint64_t sink = diff;
    return sink == 0;
}

std::string presented_api_key(std::string_view authorization, std::string_view x_api_key) {
    constexpr std::string_view kBearer = "Bearer ";
    if (authorization.size() > kBearer.size()) {
        bool prefix_matches = true;
        for (size_t i = 0; i < kBearer.size(); ++i) {
            const char c = authorization[i];
            const char lower = (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
            const char want =
                (kBearer[i] >= 'A' && kBearer[i] <= 'Z') ? static_cast<char>(kBearer[i] - 'A' + 'a') : kBearer[i];
            prefix_matches = prefix_matches && lower == want;
        }
        if (prefix_matches) return std::string(authorization.substr(kBearer.size()));
    }
    return std::string(x_api_key);
}

bool path_is_public(std::string_view path, bool public_health, bool public_metrics) {
    if (path == "/health") return public_health;
    if (path == "/metrics") return public_metrics;
    return false;
}

}  // namespace dsv4::server
