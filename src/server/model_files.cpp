#include "server/model_files.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace dsv4::server {

namespace fs = std::filesystem;

std::string default_bundled_model_dir() {
    if (const char* env = std::getenv("DSV4_BUNDLED_MODEL"); env != nullptr && *env != '\0') return env;
    return (fs::path(DSV4_REPO_DIR) / "models" / "demo").string();
}

std::string resolve_model_dir(const std::string& requested) {
    if (!requested.empty()) {
        DSV4_CHECK(fs::is_directory(requested), "--model {}: no such directory", requested);
        DSV4_CHECK(fs::exists(fs::path(requested) / "config.json"), "--model {}: no config.json in that directory",
                   requested);
        return requested;
    }
    const std::string bundled = default_bundled_model_dir();
    if (!fs::exists(fs::path(bundled) / "config.json")) {
        fail(
            "no --model given and the bundled demo model is missing at {} (it is part of the repository: restore it "
            "with `git checkout -- models/demo`, or set DSV4_BUNDLED_MODEL), or pass --model DIR (a random-weight "
            "model for tests: `dsv4 make-model --preset random-v4 --out DIR`)",
            bundled);
    }
    return bundled;
}

ChatTemplateRevision resolve_template_revision(const std::string& setting, const std::string& model_dir) {
    if (setting == "v4") return ChatTemplateRevision::kV4;
    if (setting == "v4-0731") return ChatTemplateRevision::kV4_0731;
    DSV4_CHECK(setting == "auto", "--chat-template-revision must be auto, v4 or v4-0731 (got '{}')", setting);
    std::ifstream file(fs::path(model_dir) / "config.json");
    if (!file) return ChatTemplateRevision::kV4;
    const nlohmann::json config = nlohmann::json::parse(file, nullptr, /*allow_exceptions=*/false);
    if (config.is_object() && config.contains("dspark_block_size")) return ChatTemplateRevision::kV4_0731;
    return ChatTemplateRevision::kV4;
}

std::string default_served_name(const std::string& model_dir) {
    fs::path path = fs::path(model_dir);
    if (!path.has_filename()) path = path.parent_path();  // "dir/" -> "dir"
    const std::string name = path.filename().string();
    return name.empty() ? "dsv4" : name;
}

}  // namespace dsv4::server
