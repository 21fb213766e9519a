// ApiError: an OpenAI-style error response ({"error": {"message", "type", "param", "code"}}) with its HTTP status.
// Every way a request can fail inside the server ends as one of these; nothing else escapes a route handler.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace dsv4::server {

class ApiError : public std::runtime_error {
  public:
    ApiError(int status, std::string type, std::string message, std::string param = {}, std::string code = {})
        : std::runtime_error(message),
          status_(status),
          type_(std::move(type)),
          param_(std::move(param)),
          code_(std::move(code)) {}

    int status() const { return status_; }
    const std::string& type() const { return type_; }
    const std::string& param() const { return param_; }   // empty: null
    const std::string& code() const { return code_; }     // empty: null
    int retry_after_s() const { return retry_after_s_; }  // > 0: send a Retry-After header
    const std::string& allow() const { return allow_; }   // non-empty (405): send an Allow header
    ApiError& with_allow(std::string methods) {
        allow_ = std::move(methods);
        return *this;
    }
    ApiError& with_retry_after(int seconds) {
        retry_after_s_ = seconds;
        return *this;
    }

    // {"error": {...}} as JSON text.
    std::string to_json() const;

  private:
    int status_;
    std::string type_;
    std::string param_;
    std::string code_;
    std::string allow_;
    int retry_after_s_ = 0;
};

// 400 invalid_request_error naming the offending parameter (a JSON path such as "messages[2].content").
template <typename... Args>
[[noreturn]] void fail_request(std::string param, fmt::format_string<Args...> format, Args&&... args) {
    throw ApiError(400, "invalid_request_error", fmt::format(format, std::forward<Args>(args)...), std::move(param));
}

ApiError not_found_error(std::string message, std::string code = {});
ApiError authentication_error();
// 413: the body declared by Content-Length (as sent, digits) is above the limit.
ApiError declared_body_too_large_error(const std::string& declared_bytes, size_t limit_bytes);
// 413: more than the limit arrived (chunked or compressed bodies): at least `received_bytes`.
ApiError received_body_too_large_error(uint64_t received_bytes, size_t limit_bytes);
// 408: the request (line, headers, body) did not arrive within --request-read-timeout.
ApiError request_timeout_error(double timeout_seconds);
// 405 with the methods the path accepts (the Allow header's value).
ApiError method_not_allowed_error(const std::string& method, const std::string& path, const std::string& allow);
// 429: the server or the engine queue is full.
ApiError overloaded_error(std::string message, int retry_after_s);
// 503: loading the model or draining for shutdown.
ApiError unavailable_error(std::string message, std::string code, int retry_after_s);
ApiError internal_error(std::string message);

// The dsv4:requests_rejected_total reason for a refusal ("" for errors that are not refusals, such as a 500):
// unauthorized, bad_request, too_large, read_timeout, not_found, method_not_allowed, cors, unsupported_media_type,
// invalid, too_long, unknown_model, server_busy, queue_full, loading, draining.
std::string_view rejection_reason(const ApiError& error);

}  // namespace dsv4::server
