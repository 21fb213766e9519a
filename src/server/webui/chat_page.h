// The chat page served at / (webui/chat.html, compiled into the binary by cmake/embed_text.cmake).
#pragma once

#include <string_view>

namespace dsv4::server {

std::string_view chat_page_html();

}  // namespace dsv4::server
