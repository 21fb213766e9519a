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

ApiError payload_too_large_error(size_t limit_bytes) {
    return ApiError(413, "invalid_request_error",
                    fmt::format("The request body is larger than the server's limit of {} bytes", limit_bytes), {},
                    "request_too_large");
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
