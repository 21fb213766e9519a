#include "server/http/cors.h"

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>
#include <regex>

#include "core/error.h"

namespace dsv4::server {
namespace {

constexpr const char* kAllowedMethods = "GET, POST, OPTIONS";
constexpr const char* kDefaultAllowedHeaders = "Authorization, Content-Type, X-Api-Key, X-Request-Id";
constexpr const char* kExposedHeaders = "X-Request-Id, Retry-After";
constexpr const char* kPreflightMaxAgeSeconds = "600";

std::string trimmed(std::string_view text) {
    const size_t begin = text.find_first_not_of(" \t");
    if (begin == std::string_view::npos) return {};
    const size_t end = text.find_last_not_of(" \t");
    return std::string(text.substr(begin, end - begin + 1));
}

// Header names a preflight may ask for, echoed back when every one is an HTTP token.
bool is_token_list(std::string_view list) {
    return !list.empty() && std::all_of(list.begin(), list.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == ',' || c == ' ';
    });
}

void check_origin(const std::string& origin) {
    static const std::regex kOrigin(
        R"(^https?://[A-Za-z0-9.\-]+(:[0-9]{1,5})?$|^https?://\[[0-9A-Fa-f:.]+\](:[0-9]{1,5})?$)");
    DSV4_CHECK(origin == "*" || std::regex_match(origin, kOrigin),
               "--allowed-origins: '{}' is not an origin (scheme://host[:port], no path, or * for any)", origin);
}

void add_entries(const std::string& value, std::vector<std::string>& out) {
    const std::string text = trimmed(value);
    if (!text.empty() && text.front() == '[') {
        const nlohmann::json list = nlohmann::json::parse(text, nullptr, false);
        DSV4_CHECK(list.is_array(), "--allowed-origins: '{}' is not a JSON list of strings", text);
        for (const auto& entry : list) {
            DSV4_CHECK(entry.is_string(), "--allowed-origins: '{}' is not a JSON list of strings", text);
            out.push_back(trimmed(entry.get<std::string>()));
        }
        return;
    }
    size_t start = 0;
    while (start <= text.size()) {
        const size_t comma = std::min(text.find(',', start), text.size());
        if (std::string entry = trimmed(std::string_view(text).substr(start, comma - start)); !entry.empty()) {
            out.push_back(std::move(entry));
        }
        start = comma + 1;
    }
}

}  // namespace

std::vector<std::string> parse_allowed_origins(const std::vector<std::string>& values) {
    std::vector<std::string> origins;
    for (const std::string& value : values) add_entries(value, origins);
    for (std::string& origin : origins) {
        while (origin.size() > 1 && origin.back() == '/') origin.pop_back();  // browsers send no trailing slash
        check_origin(origin);
    }
    return origins;
}

CorsPolicy::CorsPolicy(std::vector<std::string> allowed_origins) {
    for (std::string& origin : allowed_origins) {
        if (origin == "*") {
            any_ = true;
        } else {
            origins_.push_back(std::move(origin));
        }
    }
}

bool CorsPolicy::allows(std::string_view origin) const {
    if (origin.empty()) return false;
    return any_ || std::find(origins_.begin(), origins_.end(), origin) != origins_.end();
}

void CorsPolicy::apply(const httplib::Request& request, httplib::Response& response) const {
    const std::string origin = request.get_header_value("Origin");
    if (!enabled() || !allows(origin)) return;
    // Credentials are never allowed (the API key travels in a header the page sets), so "*" may be sent as is.
    response.set_header("Access-Control-Allow-Origin", any_ ? "*" : origin);
    if (!any_) response.set_header("Vary", "Origin");
    response.set_header("Access-Control-Expose-Headers", kExposedHeaders);
}

bool CorsPolicy::is_preflight(const httplib::Request& request) {
    return request.method == "OPTIONS" && request.has_header("Origin") &&
           request.has_header("Access-Control-Request-Method");
}

void CorsPolicy::answer_preflight(const httplib::Request& request, httplib::Response& response) const {
    apply(request, response);
    const std::string asked = request.get_header_value("Access-Control-Request-Headers");
    response.status = 204;
    response.set_header("Access-Control-Allow-Methods", kAllowedMethods);
    response.set_header("Access-Control-Allow-Headers", is_token_list(asked) ? asked : kDefaultAllowedHeaders);
    response.set_header("Access-Control-Max-Age", kPreflightMaxAgeSeconds);
}

}  // namespace dsv4::server
