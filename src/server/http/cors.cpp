#include "server/http/cors.h"

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>

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

// scheme://host[:port] with scheme http or https, host a DNS name / IPv4 address or a bracketed IPv6 address, a port
// of 1-5 digits, and nothing after it (an origin has no path).
bool is_origin(std::string_view o) {
    for (std::string_view scheme : {"http://", "https://"}) {
        if (o.substr(0, scheme.size()) != scheme) continue;
        std::string_view rest = o.substr(scheme.size());
        size_t host_end = 0;
        if (!rest.empty() && rest.front() == '[') {
            host_end = rest.find(']');
            if (host_end == std::string_view::npos || host_end == 1) return false;
            const bool hex = std::all_of(rest.begin() + 1, rest.begin() + static_cast<ptrdiff_t>(host_end), [](char c) {
                return std::isxdigit(static_cast<unsigned char>(c)) || c == ':' || c == '.';
            });
            if (!hex) return false;
            ++host_end;
        } else {
            while (host_end < rest.size() && (std::isalnum(static_cast<unsigned char>(rest[host_end])) ||
                                              rest[host_end] == '.' || rest[host_end] == '-'))
                ++host_end;
            if (host_end == 0) return false;
        }
        const std::string_view port = rest.substr(host_end);
        if (port.empty()) return true;
        return port.front() == ':' && port.size() >= 2 && port.size() <= 6 &&
               std::all_of(port.begin() + 1, port.end(),
                           [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
    }
    return false;
}

void check_origin(const std::string& origin) {
    // (Hand-written rather than std::regex: GCC 12's <regex> trips -Wmaybe-uninitialized in the sanitizer build.)
    DSV4_CHECK(origin == "*" || is_origin(origin),
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
