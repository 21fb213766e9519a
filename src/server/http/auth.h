// API-key checks. The key arrives as "Authorization: Bearer <key>" (OpenAI clients) or "X-Api-Key: <key>"; it is
// compared in constant time so response timing does not reveal how much of a guess matched.
#pragma once

#include <string>
#include <string_view>

namespace dsv4::server {

// Equal strings -> true; the time taken depends only on the lengths, never on where they differ.
bool constant_time_equal(std::string_view a, std::string_view b);

// The key carried by the headers' values ("" when neither carries one).
std::string presented_api_key(std::string_view authorization_header, std::string_view x_api_key_header);

// Paths that never need the key; /health and /metrics only when the operator made them public.
bool path_is_public(std::string_view path, bool public_health, bool public_metrics);

}  // namespace dsv4::server
