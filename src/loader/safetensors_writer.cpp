// safetensors writer: header layout, streaming tensor writes, shard planning and the index file.
#include "loader/safetensors_writer.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>

#include "core/error.h"
#include "loader/checkpoint.h"

namespace dsv4 {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr size_t kFileBufferBytes = 4u << 20;

std::filesystem::path partial_of(const fs::path& path) {
    return fs::path(path.string() + ".partial");
}

std::FILE* open_for_writing(const fs::path& path) {
    std::FILE* file = std::fopen(path.c_str(), "wb");
    if (file == nullptr) fail("{}: cannot create: {}", path.string(), std::strerror(errno));
    std::setvbuf(file, nullptr, _IOFBF, kFileBufferBytes);
    return file;
}

void rename_into_place(const fs::path& from, const fs::path& to) {
    std::error_code ec;
    fs::rename(from, to, ec);
    if (ec) fail("{}: cannot rename to {}: {}", from.string(), to.string(), ec.message());
}

// The header text: tensor entries with offsets, plus __metadata__, padded with spaces to a multiple of 8 bytes.
std::string header_text(const std::vector<TensorDecl>& tensors, const std::vector<uint64_t>& sizes,
                        const std::map<std::string, std::string>& metadata) {
    json header = json::object();
    if (!metadata.empty()) header["__metadata__"] = metadata;
    uint64_t offset = 0;
    for (size_t i = 0; i < tensors.size(); ++i) {
        header[tensors[i].name] = {{"dtype", std::string(dtype_name(tensors[i].dtype))},
                                   {"shape", tensors[i].shape},
                                   {"data_offsets", {offset, offset + sizes[i]}}};
        offset += sizes[i];
    }
    std::string text = header.dump();
    text.append((8 - text.size() % 8) % 8, ' ');
    return text;
}

// Desired shard of each tensor: where its byte midpoint falls, kept monotone, stepping by at most one shard per
// tensor and leaving at least one tensor for every later shard, so every shard is non-empty.
std::vector<int> assign_shards(const std::vector<uint64_t>& sizes, int shards) {
    const auto n = static_cast<int64_t>(sizes.size());
    long double total = 0;
    for (uint64_t s : sizes) total += static_cast<long double>(s);
    std::vector<int> shard(sizes.size());
    long double before = 0;
    int previous = 0;
    for (int64_t i = 0; i < n; ++i) {
        const long double mid = before + static_cast<long double>(sizes[i]) / 2;
        int want = total > 0 ? static_cast<int>(mid * shards / total) : static_cast<int>(i * shards / n);
        const int lowest = std::max<int>(previous, static_cast<int>(shards - (n - i)));
        const int highest = i == 0 ? 0 : previous + 1;
        want = std::clamp(want, lowest, std::min(highest, shards - 1));
        shard[i] = want;
        previous = want;
        before += static_cast<long double>(sizes[i]);
    }
    return shard;
}

}  // namespace

uint64_t tensor_nbytes(const TensorDecl& tensor) {
    uint64_t numel = 1;
    for (int64_t d : tensor.shape) {
        DSV4_CHECK(d >= 0, "tensor '{}': negative dimension {}", tensor.name, d);
        DSV4_CHECK(!__builtin_mul_overflow(numel, static_cast<uint64_t>(d), &numel),
                   "tensor '{}': element count overflows 64 bits", tensor.name);
    }
    uint64_t bits = 0;
    DSV4_CHECK(!__builtin_mul_overflow(numel, static_cast<uint64_t>(dtype_bits(tensor.dtype)), &bits),
               "tensor '{}': byte count overflows 64 bits", tensor.name);
    DSV4_CHECK(bits % 8 == 0, "tensor '{}': {} elements of {} are not a whole number of bytes", tensor.name, numel,
               dtype_name(tensor.dtype));
    return bits / 8;
}

std::string shard_file_name(int index, int count) {
    return fmt::format("model-{:05d}-of-{:05d}.safetensors", index + 1, count);
}

// --- SafetensorsWriter -------------------------------------------------------------------------------------------

SafetensorsWriter::SafetensorsWriter(fs::path path, std::vector<TensorDecl> tensors,
                                     const std::map<std::string, std::string>& metadata)
    : path_(std::move(path)), partial_path_(partial_of(path_)), tensors_(std::move(tensors)) {
    std::set<std::string_view> names;
    for (const auto& t : tensors_) {
        DSV4_CHECK(!t.name.empty(), "{}: a tensor has an empty name", path_.string());
        DSV4_CHECK(names.insert(t.name).second, "{}: tensor '{}' is declared twice", path_.string(), t.name);
        DSV4_CHECK(t.name != "__metadata__", "{}: '__metadata__' is not a valid tensor name", path_.string());
        DSV4_CHECK(parse_safetensors_dtype(dtype_name(t.dtype)) == t.dtype,
                   "{}: tensor '{}': dtype {} has no "
                   "safetensors spelling",
                   path_.string(), t.name, dtype_name(t.dtype));
        sizes_.push_back(tensor_nbytes(t));
        DSV4_CHECK(!__builtin_add_overflow(data_bytes_, sizes_.back(), &data_bytes_), "{}: data size overflows",
                   path_.string());
    }
    const std::string header = header_text(tensors_, sizes_, metadata);
    file_ = open_for_writing(partial_path_);
    uint8_t length[8];
    for (int i = 0; i < 8; ++i) length[i] = static_cast<uint8_t>(static_cast<uint64_t>(header.size()) >> (8 * i));
    try {
        write_raw(length, sizeof length);
        write_raw(header.data(), header.size());
    } catch (...) {
        discard();
        throw;
    }
}

SafetensorsWriter::~SafetensorsWriter() {
    discard();
}

void SafetensorsWriter::discard() noexcept {
    if (file_ == nullptr) return;
    std::fclose(file_);
    file_ = nullptr;
    std::error_code ec;
    fs::remove(partial_path_, ec);
}

void SafetensorsWriter::write_raw(const void* data, size_t size) {
    if (size == 0) return;
    if (std::fwrite(data, 1, size, file_) != size) {
        fail("{}: write failed: {}", partial_path_.string(), std::strerror(errno));
    }
}

void SafetensorsWriter::begin_tensor(std::string_view name) {
    DSV4_CHECK(file_ != nullptr, "{}: writer is closed", path_.string());
    DSV4_CHECK(!in_tensor_, "{}: tensor '{}' begun before '{}' ended", path_.string(), name, tensors_[next_ - 1].name);
    DSV4_CHECK(next_ < tensors_.size(), "{}: tensor '{}' begun but all {} declared tensors are written", path_.string(),
               name, tensors_.size());
    DSV4_CHECK(tensors_[next_].name == name, "{}: tensor '{}' begun, the next declared tensor is '{}'", path_.string(),
               name, tensors_[next_].name);
    remaining_ = sizes_[next_];
    ++next_;
    in_tensor_ = true;
}

void SafetensorsWriter::append(std::span<const uint8_t> bytes) {
    DSV4_CHECK(in_tensor_, "{}: bytes appended outside a tensor", path_.string());
    DSV4_CHECK(bytes.size() <= remaining_, "{}: tensor '{}': {} bytes appended, only {} remain of its {}",
               path_.string(), tensors_[next_ - 1].name, bytes.size(), remaining_, sizes_[next_ - 1]);
    write_raw(bytes.data(), bytes.size());
    remaining_ -= bytes.size();
}

void SafetensorsWriter::end_tensor() {
    DSV4_CHECK(in_tensor_, "{}: end_tensor without begin_tensor", path_.string());
    DSV4_CHECK(remaining_ == 0, "{}: tensor '{}' ended {} bytes short of its {}", path_.string(),
               tensors_[next_ - 1].name, remaining_, sizes_[next_ - 1]);
    in_tensor_ = false;
}

void SafetensorsWriter::write_tensor(std::string_view name, std::span<const uint8_t> bytes) {
    begin_tensor(name);
    append(bytes);
    end_tensor();
}

void SafetensorsWriter::close() {
    DSV4_CHECK(file_ != nullptr, "{}: writer is already closed", path_.string());
    DSV4_CHECK(!in_tensor_, "{}: closed inside tensor '{}'", path_.string(), tensors_[next_ - 1].name);
    DSV4_CHECK(next_ == tensors_.size(), "{}: closed after {} of {} tensors (next: '{}')", path_.string(), next_,
               tensors_.size(), tensors_[next_].name);
    const bool flushed = std::fflush(file_) == 0;
    const int flush_errno = errno;
    const bool closed = std::fclose(file_) == 0;
    file_ = nullptr;
    if (!flushed || !closed) {
        std::error_code ec;
        fs::remove(partial_path_, ec);
        fail("{}: write failed: {}", partial_path_.string(), std::strerror(flushed ? errno : flush_errno));
    }
    rename_into_place(partial_path_, path_);
}

// --- Shard planning -------------------------------------------------------------------------------------------------

std::vector<ShardPlan> plan_shards(const std::vector<TensorDecl>& tensors, int shards) {
    DSV4_CHECK(shards >= 1, "shard count must be at least 1, got {}", shards);
    DSV4_CHECK(static_cast<size_t>(shards) <= tensors.size(),
               "{} shards requested for {} tensors: every shard needs "
               "at least one tensor",
               shards, tensors.size());
    std::vector<uint64_t> sizes;
    sizes.reserve(tensors.size());
    for (const auto& t : tensors) sizes.push_back(tensor_nbytes(t));
    const std::vector<int> shard_of = assign_shards(sizes, shards);
    std::vector<ShardPlan> plan(static_cast<size_t>(shards));
    for (int s = 0; s < shards; ++s) plan[s].file_name = shard_file_name(s, shards);
    for (size_t i = 0; i < tensors.size(); ++i) {
        plan[shard_of[i]].tensors.push_back(tensors[i]);
        plan[shard_of[i]].bytes += sizes[i];
    }
    for (auto& shard : plan) {
        std::stable_sort(shard.tensors.begin(), shard.tensors.end(), [](const TensorDecl& a, const TensorDecl& b) {
            return dtype_bits(a.dtype) > dtype_bits(b.dtype);
        });
    }
    return plan;
}

// --- CheckpointWriter -----------------------------------------------------------------------------------------------

CheckpointWriter::CheckpointWriter(fs::path dir, const std::vector<TensorDecl>& tensors, int shards)
    : dir_(std::move(dir)), plan_(plan_shards(tensors, shards)) {
    std::set<std::string_view> names;
    for (const auto& t : tensors) {
        DSV4_CHECK(names.insert(t.name).second, "checkpoint: tensor '{}' is declared twice", t.name);
        total_bytes_ += tensor_nbytes(t);
    }
    std::error_code ec;
    fs::create_directories(dir_, ec);
    DSV4_CHECK(!ec && fs::is_directory(dir_), "{}: cannot create the checkpoint directory: {}", dir_.string(),
               ec ? ec.message() : "not a directory");
}

CheckpointWriter::~CheckpointWriter() = default;

std::vector<const TensorDecl*> CheckpointWriter::write_order() const {
    std::vector<const TensorDecl*> order;
    for (const auto& shard : plan_) {
        for (const auto& t : shard.tensors) order.push_back(&t);
    }
    return order;
}

void CheckpointWriter::begin_tensor(std::string_view name) {
    DSV4_CHECK(!closed_, "{}: checkpoint writer is closed", dir_.string());
    if (current_ && in_shard_ == plan_[shard_].tensors.size()) {
        current_->close();
        current_.reset();
        ++shard_;
    }
    DSV4_CHECK(shard_ < plan_.size(), "{}: tensor '{}' begun after every planned tensor", dir_.string(), name);
    if (!current_) {
        current_ = std::make_unique<SafetensorsWriter>(dir_ / plan_[shard_].file_name, plan_[shard_].tensors);
        in_shard_ = 0;
    }
    current_->begin_tensor(name);
    ++in_shard_;
}

void CheckpointWriter::append(std::span<const uint8_t> bytes) {
    DSV4_CHECK(current_ != nullptr, "{}: bytes appended outside a tensor", dir_.string());
    current_->append(bytes);
}

void CheckpointWriter::end_tensor() {
    DSV4_CHECK(current_ != nullptr, "{}: end_tensor without begin_tensor", dir_.string());
    current_->end_tensor();
}

void CheckpointWriter::write_tensor(std::string_view name, std::span<const uint8_t> bytes) {
    begin_tensor(name);
    append(bytes);
    end_tensor();
}

void CheckpointWriter::close() {
    DSV4_CHECK(!closed_, "{}: checkpoint writer is already closed", dir_.string());
    DSV4_CHECK(current_ != nullptr && shard_ + 1 == plan_.size(),
               "{}: closed before every shard was written "
               "({} of {} begun)",
               dir_.string(), current_ ? shard_ + 1 : shard_, plan_.size());
    current_->close();  // checks the last shard is complete
    current_.reset();
    json weight_map = json::object();
    for (const auto& shard : plan_) {
        for (const auto& t : shard.tensors) weight_map[t.name] = shard.file_name;
    }
    const json index = {{"metadata", {{"total_size", total_bytes_}}}, {"weight_map", weight_map}};
    const fs::path path = dir_ / kIndexFileName;
    const fs::path partial = partial_of(path);
    std::FILE* file = open_for_writing(partial);
    const std::string text = index.dump(2) + "\n";
    const bool ok = std::fwrite(text.data(), 1, text.size(), file) == text.size();
    if (std::fclose(file) != 0 || !ok) {
        std::error_code ec;
        fs::remove(partial, ec);
        fail("{}: write failed: {}", partial.string(), std::strerror(errno));
    }
    rename_into_place(partial, path);
    closed_ = true;
}

}  // namespace dsv4
