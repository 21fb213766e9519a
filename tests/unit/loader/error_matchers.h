// expect_error: the call must throw dsv4::Error whose message contains every given piece.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <initializer_list>
#include <string>

#include "core/error.h"

namespace dsv4::test {

// Returns the message (empty when nothing or something else was thrown, after recording a failure).
inline std::string expect_error(const std::function<void()>& call, std::initializer_list<std::string> pieces) {
    try {
        call();
    } catch (const Error& e) {
        std::string message = e.what();
        for (const auto& piece : pieces) {
            EXPECT_NE(message.find(piece), std::string::npos) << "missing '" << piece << "' in: " << message;
        }
        return message;
    } catch (const std::exception& e) {
        ADD_FAILURE() << "expected dsv4::Error, got another exception: " << e.what();
        return {};
    }
    ADD_FAILURE() << "expected dsv4::Error, nothing was thrown";
    return {};
}

}  // namespace dsv4::test
