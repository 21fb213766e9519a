// Checkpoint: every tensor of a model directory, memory-mapped and validated, addressable by name.
// Boundary: the weight binder (src/model) reads tensors only through this; it never opens files itself.
//
// A directory holds either `model.safetensors` (one file) or `model.safetensors.index.json` plus the shards its
// `weight_map` (tensor -> shard file name) names; both at once is an error (ambiguous). Each shard is opened once and
// validated (safetensors.h). Then the index and the shards must agree exactly: every indexed tensor is in the shard
// the index names, every shard tensor is indexed, to that shard, and no tensor is in two shards. All disagreements are
// collected and reported in one dsv4::Error (first kMaxReportedProblems, then a count).
//
// `metadata.total_size` is optional and only advisory: a mismatch with the sum of the tensors' bytes is a warning
// (warnings()), not an error, because writers compute it inconsistently and the per-tensor offsets, which are
// validated, are what the engine actually reads.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "loader/safetensors.h"
#include "loader/tensor_view.h"

namespace dsv4 {

inline constexpr const char* kSingleFileName = "model.safetensors";
inline constexpr const char* kIndexFileName = "model.safetensors.index.json";

struct CheckpointTensor {
    std::string_view name;  // owned by the shard's header
    const TensorView* view = nullptr;
    size_t shard = 0;  // index into Checkpoint::files()
};

class Checkpoint {
  public:
    static constexpr size_t kMaxReportedProblems = 20;

    static Checkpoint open(const std::filesystem::path& dir);

    Checkpoint(Checkpoint&&) noexcept = default;
    Checkpoint& operator=(Checkpoint&&) noexcept = default;
    Checkpoint(const Checkpoint&) = delete;
    Checkpoint& operator=(const Checkpoint&) = delete;
    ~Checkpoint() = default;

    const std::filesystem::path& dir() const { return dir_; }
    bool has_index() const { return has_index_; }

    const TensorView* find(std::string_view name) const;  // nullptr when absent
    const TensorView& at(std::string_view name) const;    // throws naming the tensor
    const CheckpointTensor* find_entry(std::string_view name) const;

    // All tensors sorted by name (iterate these), and the files they live in (sorted by file name).
    const std::vector<CheckpointTensor>& tensors() const { return tensors_; }
    const std::vector<SafetensorsFile>& files() const { return files_; }
    const SafetensorsFile& file_of(const CheckpointTensor& tensor) const { return files_[tensor.shard]; }

    uint64_t total_bytes() const { return total_bytes_; }  // sum of all tensors' nbytes
    const std::vector<std::string>& warnings() const { return warnings_; }

  private:
    Checkpoint() = default;
    void open_single(const std::filesystem::path& file);
    void open_indexed(const std::filesystem::path& index_file);
    void add_all_tensors();

    std::filesystem::path dir_;
    bool has_index_ = false;
    std::vector<SafetensorsFile> files_;
    std::vector<CheckpointTensor> tensors_;
    uint64_t total_bytes_ = 0;
    std::vector<std::string> warnings_;
};

// "first N problems ... and K more" as one message body (one problem per line).
std::string join_problems(const std::vector<std::string>& problems, size_t max_shown);

}  // namespace dsv4
