// `dsv4 inspect --model DIR [--json] [--gpu-mem-gib G]`: layer schedule, parameter and byte counts, activated
// parameters, KV bytes per token, GPU fit and the checkpoint validation report (src/model/inspect.h).
// Works on a directory with only config.json (counts from the config). Exit status 1 when the weights do not match.
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "command.h"
#include "core/error.h"
#include "model/inspect.h"

namespace dsv4::cli {
namespace {

struct InspectOptions {
    std::string model;
    bool json = false;
    std::optional<double> gpu_mem_gib;
};

void run_inspect(const InspectOptions& options) {
    DirectoryInspection result = inspect_directory(options.model, options.gpu_mem_gib);
    if (options.json) {
        std::printf("%s\n",
                    inspection_json(result.config, result.inspection, result.fit, result.validation).dump(2).c_str());
    } else {
        std::fputs(inspection_text(result.config, result.inspection, result.fit, result.validation).c_str(), stdout);
    }
    if (result.validation.state == ValidationSummary::State::kFailed) {
        fail("{}: the checkpoint does not match its config.json (see the validation report)", options.model);
    }
}

const CommandRegistrar kRegistrar{
    "inspect", "Layer schedule, parameter / byte / KV counts and the checkpoint validation report", [](CLI::App& app) {
        auto options = std::make_shared<InspectOptions>();
        app.add_option("--model", options->model, "Model directory (config.json, optionally the weights)")
            ->required()
            ->check(CLI::ExistingDirectory);
        app.add_flag("--json", options->json, "Machine-readable output");
        app.add_option("--gpu-mem-gib", options->gpu_mem_gib, "GPU memory in GiB: estimate whether the model fits")
            ->check(CLI::PositiveNumber);
        app.callback([options] { run_inspect(*options); });
    }};

}  // namespace
}  // namespace dsv4::cli
