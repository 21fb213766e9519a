// The `dsv4 serve` command line (shared by apps/dsv4/cmd_serve.cpp and the FakeEngine server used by the e2e tests):
// server flags, and the engine flags of EngineConfig under vLLM's spellings.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "server/serve_runner.h"

namespace dsv4::server {

struct ServeCliValues {
    ServeOptions options;
    std::string model;                     // --model ("" = the bundled model)
    std::string default_thinking = "off";  // --default-thinking on|off
    bool no_prefix_caching = false;
    bool protect_health = false;      // --protect-health
    bool public_health_flag = false;  // --public-health (the default; kept so old command lines still parse)
    bool no_webui = false;
    std::vector<std::string> allowed_origins;  // --allowed-origins, as given
    std::string speculative_config;            // --speculative-config JSON (server/speculative_cli.h)
    double host_kv_cache_gib = 0.0;            // --host-kv-cache-gib
    double disk_kv_cache_gib = 64.0;           // --disk-kv-cache-gib
};

// Adds every option to `app`, writing into `values`.
void add_serve_options(CLI::App& app, ServeCliValues& values);

// Resolves the model directory, names and derived limits; throws dsv4::Error naming a bad value.
ServeOptions finalize_serve_options(ServeCliValues& values);

}  // namespace dsv4::server
