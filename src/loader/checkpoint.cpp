// Checkpoint: opening a model directory (single file or index + shards) and cross-checking index against shards.
#include "loader/checkpoint.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "core/error.h"
#include "loader/json_strict.h"
#include "loader/text_util.h"

namespace dsv4 {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr uint64_t kMaxIndexBytes = 256ull << 20;

struct IndexFile {
    std::map<std::string, std::string, std::less<>> weight_map;  // tensor -> shard file name
    std::optional<uint64_t> total_size;
    std::vector<std::string> warnings;
};

std::string read_text_file(const fs::path& path, uint64_t max_bytes) {
    std::error_code ec;
    uint64_t size = fs::file_size(path, ec);
    if (ec) fail("{}: cannot read: {}", path.string(), ec.message());
    if (size > max_bytes) fail("{}: {} bytes is implausibly large (limit {})", path.string(), size, max_bytes);
    std::ifstream in(path, std::ios::binary);
    if (!in) fail("{}: cannot open", path.string());
    std::ostringstream text;
    text << in.rdbuf();
    return std::move(text).str();
}

// A shard name must be a plain file name inside the checkpoint directory.
bool is_plain_file_name(std::string_view name) {
    return !name.empty() && name != "." && name != ".." && name.find('/') == std::string_view::npos &&
           name.find('\0') == std::string_view::npos;
}

std::optional<uint64_t> read_total_size(const json& root, std::vector<std::string>& warnings) {
    auto meta = root.find("metadata");
    if (meta == root.end()) return std::nullopt;
    if (!meta->is_object()) {
        warnings.push_back(fmt::format("{}: 'metadata' is not an object; ignored", kIndexFileName));
        return std::nullopt;
    }
    auto total = meta->find("total_size");
    if (total == meta->end()) return std::nullopt;
    if (total->is_number_unsigned()) return total->get<uint64_t>();
    warnings.push_back(fmt::format("{}: metadata.total_size is not a non-negative integer ({}); ignored",
                                   kIndexFileName, truncated(total->dump())));
    return std::nullopt;
}

IndexFile read_index(const fs::path& index_file) {
    json root = parse_json_strict(read_text_file(index_file, kMaxIndexBytes), kIndexFileName, "index");
    if (!root.is_object()) fail("{}: not a JSON object", kIndexFileName);
    auto map = root.find("weight_map");
    if (map == root.end()) fail("{}: no 'weight_map'", kIndexFileName);
    if (!map->is_object()) fail("{}: 'weight_map' is not a JSON object", kIndexFileName);
    if (map->empty()) fail("{}: 'weight_map' is empty", kIndexFileName);
    IndexFile index;
    for (const auto& [tensor, shard] : map->items()) {
        if (!shard.is_string()) fail("{}: tensor {}: shard is not a string", kIndexFileName, quote_name(tensor));
        const auto& shard_name = shard.get_ref<const std::string&>();
        if (!is_plain_file_name(shard_name)) {
            fail("{}: tensor {}: shard {} is not a plain file name", kIndexFileName, quote_name(tensor),
                 quote_name(shard_name));
        }
        index.weight_map.emplace(tensor, shard_name);
    }
    index.total_size = read_total_size(root, index.warnings);
    return index;
}

// Fails naming every shard the index references that is not a regular file in dir.
void check_shards_exist(const fs::path& dir, const IndexFile& index, const std::set<std::string>& shard_names) {
    std::vector<std::string> missing;
    for (const auto& name : shard_names) {
        std::error_code ec;
        if (fs::is_regular_file(dir / name, ec)) continue;
        auto referencing = std::count_if(index.weight_map.begin(), index.weight_map.end(),
                                         [&](const auto& entry) { return entry.second == name; });
        missing.push_back(fmt::format("{} (holds {} tensors per the index)", quote_name(name), referencing));
    }
    if (!missing.empty()) {
        fail("{}: {} shard file(s) named by {} are missing:\n{}", dir.string(), missing.size(), kIndexFileName,
             join_problems(missing, Checkpoint::kMaxReportedProblems));
    }
}

// Every way the shards and the index can disagree, one line each.
std::vector<std::string> reconcile(const std::vector<SafetensorsFile>& files, const IndexFile& index) {
    std::map<std::string_view, std::vector<size_t>> holders;  // tensor -> shards that contain it
    for (size_t i = 0; i < files.size(); ++i) {
        for (const auto& info : files[i].infos()) holders[info.name].push_back(i);
    }
    std::vector<std::string> problems;
    for (const auto& [name, shards] : holders) {
        const std::string first_file = files[shards[0]].file_name();
        if (shards.size() > 1) {
            std::vector<std::string> names;
            for (size_t s : shards) names.push_back(files[s].file_name());
            problems.push_back(fmt::format("tensor {} is stored in {} shards: {}", quote_name(name), shards.size(),
                                           fmt::join(names, ", ")));
            continue;
        }
        auto entry = index.weight_map.find(name);
        if (entry == index.weight_map.end()) {
            problems.push_back(
                fmt::format("{}: tensor {} is not listed in {}", first_file, quote_name(name), kIndexFileName));
        } else if (entry->second != first_file) {
            problems.push_back(fmt::format("{}: tensor {} is mapped by {} to {}", first_file, quote_name(name),
                                           kIndexFileName, quote_name(entry->second)));
        }
    }
    for (const auto& [name, shard] : index.weight_map) {
        if (holders.find(name) == holders.end()) {
            problems.push_back(fmt::format("{}: tensor {} is listed in {} but absent from the shard", shard,
                                           quote_name(name), kIndexFileName));
        }
    }
    return problems;
}

}  // namespace

std::string join_problems(const std::vector<std::string>& problems, size_t max_shown) {
    std::string out;
    for (size_t i = 0; i < problems.size() && i < max_shown; ++i) {
        if (i > 0) out += '\n';
        out += "  " + problems[i];
    }
    if (problems.size() > max_shown) out += fmt::format("\n  ... and {} more", problems.size() - max_shown);
    return out;
}

Checkpoint Checkpoint::open(const fs::path& dir) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) fail("{}: not a directory", dir.string());
    const fs::path single = dir / kSingleFileName;
    const fs::path index = dir / kIndexFileName;
    const bool has_single = fs::exists(single, ec);
    const bool has_index = fs::exists(index, ec);
    if (has_single && has_index) {
        fail("{}: both {} and {} are present; keep one so the tensor set is unambiguous", dir.string(), kSingleFileName,
             kIndexFileName);
    }
    if (!has_single && !has_index) fail("{}: neither {} nor {} found", dir.string(), kSingleFileName, kIndexFileName);
    Checkpoint checkpoint;
    checkpoint.dir_ = dir;
    checkpoint.has_index_ = has_index;
    if (has_index) {
        checkpoint.open_indexed(index);
    } else {
        checkpoint.open_single(single);
    }
    return checkpoint;
}

void Checkpoint::open_single(const fs::path& file) {
    files_.push_back(SafetensorsFile::open(file));
    add_all_tensors();
}

void Checkpoint::open_indexed(const fs::path& index_file) {
    IndexFile index = read_index(index_file);
    warnings_ = std::move(index.warnings);
    std::set<std::string> shard_names;
    for (const auto& [tensor, shard] : index.weight_map) shard_names.insert(shard);
    check_shards_exist(dir_, index, shard_names);
    for (const auto& name : shard_names) files_.push_back(SafetensorsFile::open(dir_ / name));

    std::vector<std::string> problems = reconcile(files_, index);
    if (!problems.empty()) {
        fail("{}: {} and the shards disagree ({} problem(s)):\n{}", dir_.string(), kIndexFileName, problems.size(),
             join_problems(problems, kMaxReportedProblems));
    }
    add_all_tensors();
    if (index.total_size && *index.total_size != total_bytes_) {
        warnings_.push_back(fmt::format("{}: metadata.total_size is {} but the tensors hold {} bytes", kIndexFileName,
                                        *index.total_size, total_bytes_));
    }
}

// Builds the name-sorted table; names are unique here (a single file's header cannot repeat a key, and reconcile()
// rejected tensors stored in two shards).
void Checkpoint::add_all_tensors() {
    for (size_t shard = 0; shard < files_.size(); ++shard) {
        const auto& infos = files_[shard].infos();
        for (size_t i = 0; i < infos.size(); ++i) {
            tensors_.push_back(CheckpointTensor{infos[i].name, &files_[shard].views()[i], shard});
            total_bytes_ += infos[i].nbytes;
        }
    }
    std::sort(tensors_.begin(), tensors_.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
}

const CheckpointTensor* Checkpoint::find_entry(std::string_view name) const {
    auto it = std::lower_bound(tensors_.begin(), tensors_.end(), name,
                               [](const CheckpointTensor& t, std::string_view n) { return t.name < n; });
    return it != tensors_.end() && it->name == name ? &*it : nullptr;
}

const TensorView* Checkpoint::find(std::string_view name) const {
    const CheckpointTensor* entry = find_entry(name);
    return entry == nullptr ? nullptr : entry->view;
}

const TensorView& Checkpoint::at(std::string_view name) const {
    const TensorView* view = find(name);
    if (view == nullptr) fail("{}: checkpoint has no tensor {}", dir_.string(), quote_name(name));
    return *view;
}

}  // namespace dsv4
