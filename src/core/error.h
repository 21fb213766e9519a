// Error reporting for dsv4: one exception type carrying a human-readable message.
// Boundary code (CLI, server, loader) catches dsv4::Error and reports it; nothing below crashes on bad input.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace dsv4 {

class Error : public std::runtime_error {
  public:
    explicit Error(const std::string& message) : std::runtime_error(message) {}
};

template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
    throw Error(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace dsv4

// DSV4_CHECK(cond, "message {}", arg): throws dsv4::Error with the message when cond is false.
#define DSV4_CHECK(cond, ...)                   \
    do {                                        \
        if (!(cond)) ::dsv4::fail(__VA_ARGS__); \
    } while (0)
