// Small helpers for loader error messages: names from untrusted files are quoted, escaped and length-capped so a
// hostile header cannot produce a megabyte-long or terminal-garbling message.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace dsv4 {

// 'name' with control characters escaped (\n, \xNN) and at most max_chars characters kept ("..." marks a cut).
std::string quote_name(std::string_view name, size_t max_chars = 160);

// The text cut to max_chars ("..." marks a cut), control characters escaped.
std::string truncated(std::string_view text, size_t max_chars = 80);

// "[2048, 4096]".
std::string format_shape(std::span<const int64_t> shape);

}  // namespace dsv4
