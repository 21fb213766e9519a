// ApiError: an OpenAI-style error response ({"error": {"message", "type", "param", "code"}}) with its HTTP status.
// Every way a request can fail inside the server ends as one of these; nothing else escapes a route handler.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

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
    int retry_after_s_ = 0;
};

// 400 invalid_request_error naming the offending parameter (a JSON path such as "messages[2].content").
template <typename... Args>
[[noreturn]] void fail_request(std::string param, fmt::format_string<Args...> format, Args&&... args) {
    throw ApiError(400, "invalid_request_error", fmt::format(format, std::forward<Args>(args)...), std::move(param));
}

ApiError not_found_error(std::string message, std::string code = {});
ApiError authentication_error();
ApiError payload_too_large_error(size_t limit_bytes);
// 429: the server or the engine queue is full.
ApiError overloaded_error(std::string message, int retry_after_s);
// 503: loading the model or draining for shutdown.
ApiError unavailable_error(std::string message, std::string code, int retry_after_s);
ApiError internal_error(std::string message);

}  // namespace dsv4::server
