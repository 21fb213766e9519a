// `dsv4 serve`: the OpenAI-compatible server (src/server) on the engine (include/dsv4/engine.h).
#include "command.h"
#include "core/error.h"
#include "server/serve_cli.h"

namespace dsv4::cli {
namespace {

std::unique_ptr<Engine> create_engine(const EngineConfig& config) {
#ifdef DSV4_HAVE_ENGINE
    return Engine::create(config);
#else
    (void)config;
    fail("this build has no engine module (src/engine); `dsv4 serve` needs it");
#endif
}

const CommandRegistrar kRegistrar{"serve", "OpenAI-compatible HTTP server (chat, completions, streaming, tools)",
                                  [](CLI::App& app) {
                                      auto values = std::make_shared<server::ServeCliValues>();
                                      server::add_serve_options(app, *values);
                                      app.callback([values] {
                                          const server::ServeOptions options = server::finalize_serve_options(*values);
                                          const int status = server::run_server(options, create_engine);
                                          if (status != 0) std::exit(status);
                                      });
                                  }};

}  // namespace
}  // namespace dsv4::cli
