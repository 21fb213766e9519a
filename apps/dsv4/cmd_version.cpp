// `dsv4 version`: build facts (also what GET /version reports).
#include <cstdio>

#include "command.h"

namespace dsv4::cli {
namespace {

const CommandRegistrar kRegistrar{"version", "Print the version and build options", [](CLI::App& app) {
                                      app.callback([] {
#ifdef DSV4_WITH_CUDA
                                          std::printf("dsv4 0.1.0 (cuda sm_90a)\n");
#else
                                          std::printf("dsv4 0.1.0 (cpu)\n");
#endif
                                      });
                                  }};

}  // namespace
}  // namespace dsv4::cli
