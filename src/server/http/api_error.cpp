#include "server/http/api_error.h"

#include <nlohmann/json.hpp>

namespace dsv4::server {

std::string ApiError::to_json() const {
    nlohmann::json error = {{"message", what()}, {"type", type_}, {"param", nullptr}, {"code", nullptr}};
    if (!param_.empty()) error["param"] = param_;
    if (!code_.empty()) error["code"] = code_;
    // replace: the message may carry bytes from the request that are not valid UTF-8.
    return nlohmann::json{{"error", error}}.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

ApiError not_found_error(std::string message, std::string code) {
    return ApiError(404, "not_found_error", std::move(message), {}, std::move(code));
}

ApiError authentication_error() {
    return ApiError(401, "authentication_error",
                    "Missing or invalid API key: send it as 'Authorization: Bearer <key>' (or 'X-Api-Key: <key>')", {},
                    "invalid_api_key");
}

ApiError declared_body_too_large_error(const std::string& declared_bytes, size_t limit_bytes) {
    return ApiError(413, "invalid_request_error",
                    fmt::format("The request declares a body of {} bytes (Content-Length), above this server's limit "
                                "of {} bytes (--max-request-bytes)",
                                declared_bytes, limit_bytes),
                    {}, "request_too_large");
}

ApiError received_body_too_large_error(uint64_t received_bytes, size_t limit_bytes) {
    return ApiError(413, "invalid_request_error",
                    fmt::format("The request body is larger than this server's limit of {} bytes "
                                "(--max-request-bytes): {} bytes had arrived when it was refused",
                                limit_bytes, received_bytes),
                    {}, "request_too_large");
}

ApiError request_timeout_error(double timeout_seconds) {
    return ApiError(408, "invalid_request_error",
                    fmt::format("The request was not received within {:g} s (--request-read-timeout): its headers "
                                "and body must arrive in that time",
                                timeout_seconds),
                    {}, "request_timeout");
}

ApiError method_not_allowed_error(const std::string& method, const std::string& path, const std::string& allow) {
    return ApiError(405, "invalid_request_error",
                    fmt::format("Method {} is not allowed on {}: use {}", method, path, allow), {},
                    "method_not_allowed")
        .with_allow(allow);
}

ApiError overloaded_error(std::string message, int retry_after_s) {
    return ApiError(429, "rate_limit_error", std::move(message), {}, "server_overloaded")
        .with_retry_after(retry_after_s);
}

ApiError unavailable_error(std::string message, std::string code, int retry_after_s) {
    return ApiError(503, "unavailable_error", std::move(message), {}, std::move(code)).with_retry_after(retry_after_s);
}

ApiError internal_error(std::string message) {
    return ApiError(500, "server_error", std::move(message), {}, "internal_error");
}

}  // namespace dsv4::server

namespace dsv4::server {

std::string_view rejection_reason(const ApiError& error) {
    const std::string& code = error.code();
    switch (error.status()) {
        case 400:
            if (code == "context_length_exceeded") return "too_long";
            if (code == "invalid_http_framing" || code == "invalid_request_id") return "bad_request";
            return "invalid";
        case 401:
            return "unauthorized";
        case 403:
            return "cors";
        case 404:
            return code == "model_not_found" ? "unknown_model" : "not_found";
        case 405:
            return "method_not_allowed";
        case 408:
            return "read_timeout";
        case 413:
            return "too_large";
        case 415:
            return "unsupported_media_type";
        case 429:
            return code == "queue_full" ? "queue_full" : "server_busy";
        case 501:
            return "bad_request";
        case 503:
            return code == "draining" ? "draining" : "loading";
        default:
            return "";
    }
}

}  // namespace dsv4::server
