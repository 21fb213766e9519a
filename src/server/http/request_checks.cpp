#include "server/http/request_checks.h"

#include "server/http/auth.h"
#include "server/http/http_listener.h"
#include "server/http/request_framing.h"
#include "server/http/routes.h"

namespace dsv4::server {
namespace {

constexpr size_t kMaxRequestIdChars = 128;

bool is_public(const std::string& path, const ServerConfig& config) {
    if (path == "/" && config.webui) return true;  // the chat page itself holds nothing; it asks for the key
    return path_is_public(path, config.public_health, config.public_metrics);
}

void check_api_key(const httplib::Request& request, const ServerConfig& config) {
    if (config.api_key.empty() || is_public(request.path, config)) return;
    const std::string key =
        presented_api_key(request.get_header_value("Authorization"), request.get_header_value("X-Api-Key"));
    if (!constant_time_equal(key, config.api_key)) throw authentication_error();
}

}  // namespace

std::string client_request_id(const httplib::Request& request) {
    if (!request.has_header("X-Request-Id")) return {};
    const std::string id = request.get_header_value("X-Request-Id");
    bool visible = !id.empty() && id.size() <= kMaxRequestIdChars;
    for (const char c : id) visible = visible && c > 0x20 && c < 0x7f;
    if (!visible) {
        throw ApiError(
            400, "invalid_request_error",
            fmt::format("X-Request-Id must be 1 to {} visible ASCII characters (no spaces)", kMaxRequestIdChars), {},
            "invalid_request_id");
    }
    return id;
}

RequestChecks::RequestChecks(ServerState& state, const Router& router, CorsPolicy cors)
    : state_(&state), router_(&router), cors_(std::move(cors)) {}

bool RequestChecks::check(const httplib::Request& request, httplib::Response& response) const {
    const ServerConfig& config = state_->config();
    if (const std::string id = client_request_id(request); !id.empty()) set_request_id_header(response, id);
    cors_.apply(request, response);
    if (CorsPolicy::is_preflight(request)) {
        const std::string origin = request.get_header_value("Origin");
        if (!cors_.allows(origin)) {
            throw ApiError(403, "invalid_request_error",
                           fmt::format("Origin '{}' may not call this server (--allowed-origins)", origin), {},
                           "cors_origin_not_allowed");
        }
        cors_.answer_preflight(request, response);
        return false;
    }
    const Router::Match route = router_->match(request.method, request.path);
    if (!route.path_known) {
        throw not_found_error(fmt::format("Not found: {} {}", request.method, request.path), "not_found");
    }
    if (request.method == "OPTIONS") {
        response.status = 204;
        response.set_header("Allow", route.allow + ", OPTIONS");
        return false;
    }
    if (!route.method_allowed) throw method_not_allowed_error(request.method, request.path, route.allow);
    const BodyFraming framing = check_body_framing(request.headers, config.max_request_bytes);
    check_api_key(request, config);
    if (request.method == "POST") check_body_encoding(request.headers);
    // A GET with a body: cpp-httplib does not read it, so it must not stay on the connection.
    if (request.method != "POST" && framing.has_body()) close_connection_after_response();
    return true;
}

void RequestChecks::refuse(const httplib::Request& request, httplib::Response& response, const ApiError& error) const {
    // The body (if any) is not read: it must not be parsed as the next request.
    if (request.has_header("Content-Length") || request.has_header("Transfer-Encoding")) {
        close_connection_after_response();
    }
    refuse_request(*state_, response, error);
}

httplib::Server::HandlerResponse RequestChecks::run(const httplib::Request& request,
                                                    httplib::Response& response) const {
    try {
        if (check(request, response)) return httplib::Server::HandlerResponse::Unhandled;
    } catch (const ApiError& error) {
        refuse(request, response, error);
    }
    return httplib::Server::HandlerResponse::Handled;
}

int RequestChecks::expect_continue(const httplib::Request& request, httplib::Response& response) const {
    httplib::Response probe;  // the checks' headers go on the real response only when it is a refusal
    try {
        if (check(request, probe)) return 100;
    } catch (const ApiError& error) {
        cors_.apply(request, response);
        refuse(request, response, error);
        return response.status;
    }
    return 100;  // a preflight or OPTIONS with Expect: let the routing answer it
}

}  // namespace dsv4::server
