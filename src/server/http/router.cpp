#include "server/http/router.h"

#include <chrono>
#include <string_view>

#include "core/error.h"
#include "server/http/http_listener.h"

namespace dsv4::server {

std::string read_request_body(const httplib::Request& request, const httplib::ContentReader& reader,
                              size_t max_body_bytes) {
    // HTTP/1.1: a request without Content-Length or Transfer-Encoding has no body (do not read to end of stream).
    if (!request.has_header("Content-Length") && !request.has_header("Transfer-Encoding")) return {};
    std::string body;
    uint64_t received = 0;
    const bool complete = reader([&](const char* data, size_t size) {
        received += size;
        if (received > max_body_bytes) return false;
        body.append(data, size);
        return true;
    });
    if (received > max_body_bytes) throw received_body_too_large_error(received, max_body_bytes);
    if (!complete) {
        const ConnectionContext* connection = current_connection();
        if (connection != nullptr && connection->timed_out()) {
            throw request_timeout_error(connection->stream->read_timeout());
        }
        throw ApiError(400, "invalid_request_error",
                       fmt::format("The request body could not be read ({} bytes arrived): the connection ended "
                                   "early, the chunked framing is malformed or the Content-Encoding is corrupt",
                                   received),
                       {}, "invalid_http_framing");
    }
    return body;
}

Router::Router(httplib::Server& http, size_t max_body_bytes, Refuse refuse)
    : http_(&http), max_body_bytes_(max_body_bytes), refuse_(std::move(refuse)) {}

Router::Route& Router::route(const std::string& pattern) {
    for (Route& r : routes_) {
        if (r.source == pattern) return r;
    }
    // (Matched by hand, not with std::regex: GCC 12's <regex> fails the sanitizer build with -Wmaybe-uninitialized.)
    static constexpr std::string_view kTail = "(.+)";
    const bool any_tail = pattern.size() >= kTail.size() && pattern.ends_with(kTail);
    const std::string prefix = any_tail ? pattern.substr(0, pattern.size() - kTail.size()) : pattern;
    DSV4_CHECK(prefix.find_first_of("()[]{}.*+?|^$\\") == std::string::npos,
               "router: pattern '{}' is neither a literal path nor a literal prefix followed by (.+)", pattern);
    routes_.push_back({prefix, any_tail, pattern});
    return routes_.back();
}

void Router::get(const std::string& pattern, GetHandler handler) {
    route(pattern).get = true;
    http_->Get(pattern, std::move(handler));
}

void Router::post(const std::string& pattern, PostHandler handler) {
    route(pattern).post = true;
    const size_t limit = max_body_bytes_;
    http_->Post(pattern, [handler = std::move(handler), limit, this](const httplib::Request& request,
                                                                     httplib::Response& response,
                                                                     const httplib::ContentReader& reader) {
        std::string body;
        try {
            body = read_request_body(request, reader, limit);
        } catch (const ApiError& error) {
            close_connection_after_response();  // whatever is left of the body must not be read as a request
            refuse_(response, error);
            return;
        }
        handler(request, body, response);
    });
}

Router::Match Router::match(const std::string& method, const std::string& path) const {
    Match m;
    bool get = false;
    bool post = false;
    for (const Route& r : routes_) {
        const bool matches =
            r.any_tail ? path.size() > r.prefix.size() && path.starts_with(r.prefix) : path == r.prefix;
        if (!matches) continue;
        m.path_known = true;
        get = get || r.get;
        post = post || r.post;
    }
    if (!m.path_known) return m;
    m.allow = get && post ? "GET, HEAD, POST" : get ? "GET, HEAD" : "POST";
    m.method_allowed = ((method == "GET" || method == "HEAD") && get) || (method == "POST" && post);
    return m;
}

}  // namespace dsv4::server
