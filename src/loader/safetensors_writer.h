// safetensors writer: single files and sharded checkpoints (shards + model.safetensors.index.json) in exactly the
// format the reader (safetensors.h, checkpoint.h) validates: u64 little-endian header length | JSON header padded
// with spaces to a multiple of 8 bytes | tensor data back to back.
//
// Streaming: every tensor is declared up front (name, dtype, shape: enough to lay the file out and write the header
// first), then the bytes are written tensor by tensor in the declared order, each tensor in as many pieces as the
// caller likes. Memory use does not depend on the checkpoint size, so a full-size checkpoint (~156 GB) streams through
// a few MB of buffers.
//
// Crash safety: a file is written as `<name>.partial` and renamed into place only by close() after every declared
// byte was written; a writer destroyed before close() removes its partial file. A sharded checkpoint writes its index
// last, so a directory holding model.safetensors.index.json holds a complete checkpoint.
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"

namespace dsv4 {

struct TensorDecl {
    std::string name;
    DType dtype = DType::kU8;
    std::vector<int64_t> shape;  // as stored (FP4 experts: I8 [out, in/2])
};

// Bytes the tensor occupies; throws dsv4::Error on negative dimensions, overflow or a fractional byte count.
uint64_t tensor_nbytes(const TensorDecl& tensor);

// One .safetensors file, written tensor by tensor.
class SafetensorsWriter {
  public:
    // Lays `tensors` out back to back in the given order and writes the header. Names must be unique and non-empty;
    // dtypes must have a safetensors spelling (dtype_name()).
    SafetensorsWriter(std::filesystem::path path, std::vector<TensorDecl> tensors,
                      const std::map<std::string, std::string>& metadata = {{"format", "pt"}});
    SafetensorsWriter(const SafetensorsWriter&) = delete;
    SafetensorsWriter& operator=(const SafetensorsWriter&) = delete;
    ~SafetensorsWriter();

    // Starts the next declared tensor; `name` must be that tensor's name.
    void begin_tensor(std::string_view name);
    // Appends bytes to the current tensor; more than it holds is an error.
    void append(std::span<const uint8_t> bytes);
    // Ends the current tensor; fails unless exactly its declared byte count was appended.
    void end_tensor();
    void write_tensor(std::string_view name, std::span<const uint8_t> bytes);

    // Checks every tensor was written, flushes, and renames the file into place.
    void close();

    const std::filesystem::path& path() const { return path_; }
    uint64_t data_bytes() const { return data_bytes_; }  // sum of the tensors' bytes
    const std::vector<TensorDecl>& tensors() const { return tensors_; }

  private:
    void write_raw(const void* data, size_t size);
    void discard() noexcept;

    std::filesystem::path path_;
    std::filesystem::path partial_path_;
    std::vector<TensorDecl> tensors_;
    std::vector<uint64_t> sizes_;
    std::FILE* file_ = nullptr;
    uint64_t data_bytes_ = 0;
    size_t next_ = 0;  // index of the next tensor to begin
    bool in_tensor_ = false;
    uint64_t remaining_ = 0;  // bytes still owed to the current tensor
};

// One shard of a planned checkpoint: its file name and the tensors it holds, in writing order.
struct ShardPlan {
    std::string file_name;  // model-0000N-of-0000K.safetensors
    std::vector<TensorDecl> tensors;
    uint64_t bytes = 0;
};

// Splits `tensors` into `shards` non-empty groups of consecutive tensors (the caller's order: layer-contiguous, as
// DeepSeek ships) with roughly equal bytes. Within a shard, tensors are ordered by element size, largest first
// (stable), so every tensor starts at an offset aligned to its element size. Fails if shards < 1 or > tensors.size().
std::vector<ShardPlan> plan_shards(const std::vector<TensorDecl>& tensors, int shards);

// A sharded checkpoint directory: shard files plus model.safetensors.index.json (metadata.total_size, weight_map).
// Tensors are written in plan() order: shard by shard, each shard's tensors in order.
class CheckpointWriter {
  public:
    CheckpointWriter(std::filesystem::path dir, const std::vector<TensorDecl>& tensors, int shards);
    CheckpointWriter(const CheckpointWriter&) = delete;
    CheckpointWriter& operator=(const CheckpointWriter&) = delete;
    ~CheckpointWriter();

    const std::vector<ShardPlan>& plan() const { return plan_; }
    // The tensors in the order they must be written.
    std::vector<const TensorDecl*> write_order() const;

    void begin_tensor(std::string_view name);
    void append(std::span<const uint8_t> bytes);
    void end_tensor();
    void write_tensor(std::string_view name, std::span<const uint8_t> bytes);

    // Closes the last shard and writes the index. Fails if any declared tensor was not written.
    void close();

    uint64_t total_bytes() const { return total_bytes_; }

  private:
    std::filesystem::path dir_;
    std::vector<ShardPlan> plan_;
    size_t shard_ = 0;     // shard being written (or next to open)
    size_t in_shard_ = 0;  // tensors begun in it
    std::unique_ptr<SafetensorsWriter> current_;
    uint64_t total_bytes_ = 0;
    bool closed_ = false;
};

std::string shard_file_name(int index, int count);  // 0-based index -> "model-00001-of-00002.safetensors"

}  // namespace dsv4
