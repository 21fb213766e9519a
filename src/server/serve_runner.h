// run_server: the whole life of `dsv4 serve`. Binds first (so /health answers 503 while the model loads), loads the
// tokenizer and the engine with progress lines on stderr, serves, and on SIGTERM/SIGINT drains: new requests get
// 503, running ones may finish for --shutdown-timeout seconds, the rest are aborted (finish_reason "abort"), then
// the process exits 0. A second signal exits at once (status 1); a signal while loading exits 0 right away.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "dsv4/engine.h"
#include "server/http/server_config.h"

namespace dsv4::server {

struct ServeOptions {
    ServerConfig server;
    EngineConfig engine;                     // engine.model_dir: resolved model directory
    std::string tokenizer_path;              // "" = <model_dir>/tokenizer.json
    std::string template_revision = "auto";  // auto | v4 | v4-0731
};

using EngineFactory = std::function<std::unique_ptr<Engine>(const EngineConfig&)>;

// Returns the process exit status.
int run_server(const ServeOptions& options, const EngineFactory& create_engine);

}  // namespace dsv4::server
