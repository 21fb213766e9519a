// `dsv4 bench`: the parent of the registered benchmarks (bench_registry.h).
#include "bench_registry.h"
#include "command.h"

namespace dsv4::cli {

std::vector<Benchmark>& benchmark_registry() {
    static std::vector<Benchmark> benchmarks;
    return benchmarks;
}

namespace {

const CommandRegistrar kRegistrar{"bench", "Benchmarks: offline (synthetic full-size models), serve (HTTP load)",
                                  [](CLI::App& app) {
                                      app.require_subcommand(1);
                                      for (auto& b : benchmark_registry()) {
                                          CLI::App* sub = app.add_subcommand(b.name, b.description);
                                          b.setup(*sub);
                                      }
                                  }};

}  // namespace
}  // namespace dsv4::cli
