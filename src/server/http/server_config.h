// ServerConfig: everything `dsv4 serve` configures on the HTTP side (the engine has EngineConfig).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tokenizer/chat_encoding.h"

namespace dsv4::server {

struct ServerConfig {
    std::string host = "127.0.0.1";       // loopback by default: put a TLS proxy (deploy/caddy) in front to expose it
    int port = 8000;                      // 0: any free port (printed on startup)
    std::string api_key;                  // empty: no authentication
    bool public_health = true;            // /health answers without the key (probes); --protect-health: false
    bool public_metrics = false;          // /metrics answers without the key (--public-metrics)
    std::string served_model_name;        // the "model" clients must send (or omit)
    size_t max_request_bytes = 8u << 20;  // larger bodies get 413
    int http_threads = 0;                 // worker threads; 0 = max_in_flight + 16
    int max_in_flight = 0;                // generation requests in flight before 429; 0 = 2 * max_num_seqs + 64
    double shutdown_timeout_s = 30;       // SIGTERM: how long running requests may take before they are aborted
    int keep_alive_timeout_s = 10;
    double request_read_timeout_s = 30;        // request line + headers + body must arrive within this (else 408)
    int write_timeout_s = 60;                  // a client that stops reading for this long is dropped
    std::vector<std::string> allowed_origins;  // CORS (--allowed-origins); empty: off
    bool webui = true;                         // the chat page at / (--no-webui: off)

    // Chat defaults (documented in docs/operations.md).
    ThinkingMode default_thinking = ThinkingMode::kChat;  // --default-thinking on|off
    ChatTemplateRevision template_revision = ChatTemplateRevision::kV4;
    bool quiet = false;  // no per-request log lines
};

}  // namespace dsv4::server
