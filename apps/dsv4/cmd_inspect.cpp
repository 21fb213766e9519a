// `dsv4 inspect --model DIR [--json] [--gpu-mem-gib G] [--fp8-dialect D]`: layer schedule, parameter and byte counts,
// activated parameters, KV bytes per token, GPU fit, the checkpoint validation report (src/model/inspect.h) and the
// FP8 dialect of every FP8 tensor group and runtime site (src/model/fp8_inspect.h). Works on a directory with only
// config.json (counts from the config). Exit status 1 when the weights do not match, or their FP8 bytes contradict
// the dialect config.json claims.
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
    std::string fp8_dialect = "ocp";
};

void run_inspect(const InspectOptions& options) {
    DirectoryInspection result =
        inspect_directory(options.model, options.gpu_mem_gib, parse_fp8_dialect(options.fp8_dialect));
    if (options.json) {
        nlohmann::json j = inspection_json(result.config, result.inspection, result.fit, result.validation);
        if (result.fp8) j["fp8"] = fp8_inspection_json(*result.fp8);
        std::printf("%s\n", j.dump(2).c_str());
    } else {
        std::fputs(inspection_text(result.config, result.inspection, result.fit, result.validation).c_str(), stdout);
        if (result.fp8) std::fputs(fp8_inspection_text(*result.fp8).c_str(), stdout);
    }
    if (result.validation.state == ValidationSummary::State::kFailed) {
        fail("{}: the checkpoint does not match its config.json (see the validation report)", options.model);
    }
    if (result.fp8 && !result.fp8->consistent()) {
        fail("{}: the FP8 bytes contradict the dialect config.json claims (see the FP8 dialect section)",
             options.model);
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
        app.add_option("--fp8-dialect", options->fp8_dialect,
                       "Report the runtime FP8 sites (weights in memory, activations, caches) for this dialect")
            ->check(CLI::IsMember({"ocp", "fnuz"}))
            ->capture_default_str();
        app.callback([options] { run_inspect(*options); });
    }};

}  // namespace
}  // namespace dsv4::cli
