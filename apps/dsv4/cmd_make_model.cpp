// `dsv4 make-model --preset NAME --out DIR [--seed S] [--layers L] [--experts E] [--shards K] [--tokenizer FILE]
// [--force]`: writes a synthetic checkpoint in the original on-disk format (src/model/synthetic_checkpoint.h). The
// weights are random: a model made this way produces gibberish; it exists to exercise the real code paths (loader,
// kernels, server) end to end and to benchmark them at realistic shapes.
#include <cstdio>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "command.h"
#include "core/error.h"
#include "loader/checkpoint.h"
#include "loader/progress.h"
#include "model/synthetic_checkpoint.h"
#include "model/synthetic_routing.h"

namespace dsv4::cli {
namespace {

namespace fs = std::filesystem;

constexpr uint64_t kLargeWarningBytes = 16ull << 30;
constexpr uint64_t kDiskSlackBytes = 64ull << 20;  // config, index, headers

struct MakeModelOptions {
    std::string preset;
    std::string out;
    uint64_t seed = 0;
    std::optional<int> layers;
    std::optional<int> experts;
    int shards = 2;
    std::string tokenizer;
    bool force = false;
    std::string routing_skew;  // Zipf exponent(s) of expert popularity: "S" or "S0,S1,..."
};

// The V4 tokenizer.json the build generates next to the binary (tests/unit/tokenizer/CMakeLists.txt).
std::optional<fs::path> built_tokenizer() {
    std::error_code ec;
    const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    if (ec) return std::nullopt;
    const fs::path candidate = exe.parent_path() / "tokenizer" / "deepseek_v4" / "tokenizer.json";
    return fs::is_regular_file(candidate, ec) ? std::optional(candidate) : std::nullopt;
}

bool holds_checkpoint(const fs::path& dir) {
    std::error_code ec;
    return fs::exists(dir / kIndexFileName, ec) || fs::exists(dir / kSingleFileName, ec) ||
           fs::exists(dir / "config.json", ec);
}

// --force: removes what a previous checkpoint left (index first, so an interrupted run never looks complete).
void remove_previous_checkpoint(const fs::path& dir) {
    std::error_code ec;
    fs::remove(dir / kIndexFileName, ec);
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
        const std::string name = entry.path().filename().string();
        const bool shard = name.rfind("model", 0) == 0 && name.find(".safetensors") != std::string::npos;
        if (shard || name == "config.json") fs::remove(entry.path(), ec);
    }
}

void check_disk_space(const fs::path& dir, uint64_t bytes) {
    std::error_code ec;
    const fs::space_info space = fs::space(dir, ec);
    if (ec) return;  // unknown: let the writes report it
    DSV4_CHECK(space.available >= bytes + kDiskSlackBytes, "{}: the checkpoint needs {} but only {} are free",
               dir.string(), format_bytes(static_cast<double>(bytes)),
               format_bytes(static_cast<double>(space.available)));
}

void prepare_directory(const MakeModelOptions& o, uint64_t bytes) {
    const fs::path dir = o.out;
    std::error_code ec;
    fs::create_directories(dir, ec);
    DSV4_CHECK(!ec && fs::is_directory(dir), "--out {}: cannot create the directory{}", o.out,
               ec ? ": " + ec.message() : "");
    if (holds_checkpoint(dir)) {
        DSV4_CHECK(o.force, "--out {} already holds a model (config.json / safetensors); pass --force to replace it",
                   o.out);
        remove_previous_checkpoint(dir);
    }
    check_disk_space(dir, bytes);
}

void copy_tokenizer(const MakeModelOptions& o) {
    std::optional<fs::path> source;
    if (!o.tokenizer.empty()) {
        source = fs::path(o.tokenizer);
        DSV4_CHECK(fs::is_regular_file(*source), "--tokenizer {}: no such file", o.tokenizer);
    } else if (o.preset == "random-v4" || o.preset == "bundled") {
        source = built_tokenizer();
        if (!source) {
            std::fprintf(stderr,
                         "make-model: warning: no tokenizer.json copied (the build did not generate the V4 "
                         "tokenizer); pass --tokenizer FILE or run node tools/make_v4_tokenizer.js --out "
                         "%s/tokenizer.json\n",
                         o.out.c_str());
            return;
        }
    } else {
        return;
    }
    std::error_code ec;
    fs::copy_file(*source, fs::path(o.out) / "tokenizer.json", fs::copy_options::overwrite_existing, ec);
    DSV4_CHECK(!ec, "copying {} to {}: {}", source->string(), o.out, ec.message());
}

void write_provenance(const MakeModelOptions& o) {
    nlohmann::json info = {
        {"generator", "dsv4 make-model"},
        {"preset", o.preset},
        {"seed", o.seed},
        {"shards", o.shards},
        {"note",
         "Synthetic checkpoint: random weights in the original DeepSeek-V4 on-disk format. Its output is "
         "gibberish; it exists to exercise the real code paths end to end."}};
    if (o.layers) info["layers"] = *o.layers;
    if (o.experts) info["experts"] = *o.experts;
    if (!o.routing_skew.empty()) info["routing_skew"] = o.routing_skew;
    std::FILE* f = std::fopen((fs::path(o.out) / "synthetic.json").c_str(), "w");
    DSV4_CHECK(f != nullptr, "{}: cannot write synthetic.json", o.out);
    const std::string text = info.dump(2) + "\n";
    const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
    DSV4_CHECK(std::fclose(f) == 0 && ok, "{}: cannot write synthetic.json", o.out);
}

void run(const MakeModelOptions& o) {
    SyntheticModel model = synthetic_preset(o.preset);
    truncate_synthetic_model(model, o.layers, o.experts);
    const uint64_t bytes = synthetic_checkpoint_bytes(model);
    const ModelConfig config = parse_model_config(model.config);
    const size_t tensors = expected_tensors(config, model.drafts).size();
    const std::vector<double> skew =
        o.routing_skew.empty() ? std::vector<double>{} : parse_routing_skew(o.routing_skew);
    routing_skew_of(skew, 0, config.num_layers);  // a per-layer list of the wrong length fails before writing
    DSV4_CHECK(o.shards >= 1 && static_cast<size_t>(o.shards) <= tensors,
               "--shards {}: must be in [1, {}] (every "
               "shard needs at least one of the {} tensors)",
               o.shards, tensors, tensors);
    if (bytes >= kLargeWarningBytes) {
        std::fprintf(stderr,
                     "make-model: warning: this writes %s of random weights (the whole %s model); use "
                     "--layers / --experts for a smaller one\n",
                     format_bytes(static_cast<double>(bytes)).c_str(), o.preset.c_str());
    }
    prepare_directory(o, bytes);
    copy_tokenizer(o);
    write_provenance(o);

    ByteProgress progress("make-model", bytes, static_cast<size_t>(o.shards), ProgressMode::kAuto, stderr, 10.0);
    SyntheticOptions options;
    options.seed = o.seed;
    options.shards = o.shards;
    options.routing_skew = skew;
    options.on_bytes = [&progress](uint64_t n) { progress.add_bytes(n); };
    options.on_shard_done = [&progress] { progress.item_done(); };
    const SyntheticResult result = write_synthetic_checkpoint(o.out, model, options);
    progress.finish();
    std::printf("wrote %s: preset %s, %zu tensors, %s in %d shards (seed %llu; random weights)\n", o.out.c_str(),
                o.preset.c_str(), result.tensors, format_bytes(static_cast<double>(result.total_bytes)).c_str(),
                result.shards, static_cast<unsigned long long>(o.seed));
}

const CommandRegistrar kRegistrar{
    "make-model", "Write a synthetic checkpoint (random weights) in the original on-disk format", [](CLI::App& app) {
        auto o = std::make_shared<MakeModelOptions>();
        std::string presets;
        for (const auto& name : synthetic_preset_names()) presets += (presets.empty() ? "" : ", ") + name;
        app.add_option("--preset", o->preset, "Model shape: " + presets)->required();
        app.add_option("--out", o->out, "Output directory")->required();
        app.add_option("--seed", o->seed, "Random seed (same seed, same bytes)");
        app.add_option("--layers", o->layers, "Keep only the first L backbone layers");
        app.add_option("--experts", o->experts, "Keep only E routed experts per layer");
        app.add_option("--shards", o->shards, "Number of safetensors shards (default 2)");
        app.add_option("--tokenizer", o->tokenizer,
                       "tokenizer.json to copy into the model directory (bundled: the "
                       "build's V4 tokenizer by default)");
        app.add_flag("--force", o->force, "Replace a model already in --out");
        app.add_option("--routing-skew", o->routing_skew,
                       "Zipf exponent of expert popularity per layer (S for every layer, or S0,S1,... one per "
                       "layer; 0 = even routing, ~1 = realistic)");
        app.callback([o] { run(*o); });
    }};

}  // namespace
}  // namespace dsv4::cli
