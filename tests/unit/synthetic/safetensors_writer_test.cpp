// SafetensorsWriter / CheckpointWriter: files the reader accepts byte for byte, streaming in pieces, shard planning,
// and every misuse reported as a dsv4::Error without leaving a file behind.
#include "loader/safetensors_writer.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <numeric>

#include "core/error.h"
#include "loader/checkpoint.h"
#include "loader/safetensors.h"
#include "st_writer.h"

namespace dsv4 {
namespace {

using test::TempDir;

std::vector<uint8_t> bytes_of(const TensorDecl& t, uint8_t salt) {
    std::vector<uint8_t> out(tensor_nbytes(t));
    for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<uint8_t>(i * 31 + salt);
    return out;
}

std::vector<uint8_t> read_file(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

const std::vector<TensorDecl> kMixed = {
    {"a.weight", DType::kF8E4M3, {3, 5}},  // 15 bytes: leaves the next offset unaligned unless reordered
    {"b.bias", DType::kF32, {7}},         {"c.table", DType::kI64, {2, 3}},    {"d.norm", DType::kBF16, {9}},
    {"e.empty", DType::kF32, {0, 4}},     {"f.scale", DType::kF8E8M0, {1, 1}},
};

TEST(SafetensorsWriter, RoundTripsThroughTheReader) {
    TempDir dir;
    const auto path = dir / "one.safetensors";
    {
        SafetensorsWriter writer(path, kMixed);
        for (size_t i = 0; i < kMixed.size(); ++i) writer.write_tensor(kMixed[i].name, bytes_of(kMixed[i], 7 + i));
        writer.close();
    }
    const auto image = read_file(path);
    uint64_t header_len = 0;
    std::memcpy(&header_len, image.data(), 8);
    EXPECT_EQ(header_len % 8, 0u) << "header must be padded to 8 bytes";
    EXPECT_EQ(image.size(), 8 + header_len + 15 + 28 + 48 + 18 + 0 + 1) << "no gaps, no trailing bytes";

    SafetensorsFile file = SafetensorsFile::open(path);
    ASSERT_EQ(file.size(), kMixed.size());
    EXPECT_EQ(file.metadata().at("format"), "pt");
    for (size_t i = 0; i < kMixed.size(); ++i) {
        const TensorView& view = file.at(kMixed[i].name);
        EXPECT_EQ(view.dtype, kMixed[i].dtype);
        EXPECT_TRUE(std::equal(view.shape.begin(), view.shape.end(), kMixed[i].shape.begin(), kMixed[i].shape.end()));
        const auto want = bytes_of(kMixed[i], 7 + i);
        ASSERT_EQ(view.nbytes, want.size());
        EXPECT_TRUE(std::equal(want.begin(), want.end(), view.data)) << kMixed[i].name;
    }
}

TEST(SafetensorsWriter, PiecewiseWritesEqualOneWrite) {
    TempDir dir;
    const TensorDecl t{"x", DType::kBF16, {5, 33}};
    const auto data = bytes_of(t, 3);
    {
        SafetensorsWriter whole(dir / "whole.safetensors", {t});
        whole.write_tensor("x", data);
        whole.close();
    }
    {
        SafetensorsWriter pieces(dir / "pieces.safetensors", {t});
        pieces.begin_tensor("x");
        size_t done = 0;
        for (size_t step : {1u, 0u, 17u, 100u}) {
            pieces.append(std::span(data).subspan(done, step));
            done += step;
        }
        pieces.append(std::span(data).subspan(done));
        pieces.end_tensor();
        pieces.close();
    }
    EXPECT_EQ(read_file(dir / "whole.safetensors"), read_file(dir / "pieces.safetensors"));
}

TEST(SafetensorsWriter, MisuseIsAnErrorAndLeavesNoFile) {
    TempDir dir;
    const auto path = dir / "bad.safetensors";
    const std::vector<TensorDecl> two = {{"first", DType::kU8, {4}}, {"second", DType::kU8, {2}}};
    const std::vector<uint8_t> four(4), five(5), three(3);
    {
        SafetensorsWriter w(path, two);
        EXPECT_THROW(w.begin_tensor("second"), Error) << "out of declared order";
        w.begin_tensor("first");
        EXPECT_THROW(w.append(five), Error) << "more bytes than declared";
        w.append(three);
        EXPECT_THROW(w.end_tensor(), Error) << "ended short";
        EXPECT_THROW(w.close(), Error) << "closed inside a tensor";
    }
    EXPECT_FALSE(std::filesystem::exists(path));
    EXPECT_FALSE(std::filesystem::exists(path.string() + ".partial")) << "destroyed writer removes its partial file";
    {
        SafetensorsWriter w(path, two);
        w.write_tensor("first", four);
        EXPECT_THROW(w.close(), Error) << "a declared tensor was never written";
        EXPECT_THROW(w.append(four), Error) << "append outside a tensor";
    }
    EXPECT_FALSE(std::filesystem::exists(path));
    EXPECT_THROW(SafetensorsWriter(path, {{"x", DType::kU8, {1}}, {"x", DType::kU8, {1}}}), Error) << "duplicate";
    EXPECT_THROW(SafetensorsWriter(path, {{"", DType::kU8, {1}}}), Error) << "empty name";
    EXPECT_THROW(SafetensorsWriter(path, {{"x", DType::kF8E4M3Fnuz, {1}}}), Error) << "no safetensors spelling";
    EXPECT_THROW(SafetensorsWriter(path, {{"x", DType::kU8, {-1}}}), Error) << "negative dimension";
    EXPECT_THROW(SafetensorsWriter(dir / "no_such_dir" / "x.safetensors", {{"x", DType::kU8, {1}}}), Error);
}

TEST(PlanShards, ContiguousNonEmptyBalancedAndAligned) {
    std::vector<TensorDecl> tensors;
    for (int i = 0; i < 40; ++i) {
        tensors.push_back({"t" + std::to_string(100 + i), i % 3 == 0 ? DType::kF8E4M3 : DType::kF32, {i % 5 + 1, 7}});
    }
    for (int shards : {1, 2, 3, 7, 40}) {
        auto plan = plan_shards(tensors, shards);
        ASSERT_EQ(plan.size(), static_cast<size_t>(shards));
        std::vector<std::string> seen;
        uint64_t total = 0, largest = 0;
        for (int s = 0; s < shards; ++s) {
            EXPECT_EQ(plan[s].file_name, shard_file_name(s, shards));
            ASSERT_FALSE(plan[s].tensors.empty()) << "shard " << s << " of " << shards;
            uint64_t offset = 0;
            std::vector<std::string> names;
            for (const auto& t : plan[s].tensors) {
                EXPECT_EQ(offset % (dtype_bits(t.dtype) / 8), 0u) << t.name << " is not aligned to its element size";
                offset += tensor_nbytes(t);
                names.push_back(t.name);
            }
            EXPECT_EQ(offset, plan[s].bytes);
            total += offset;
            largest = std::max(largest, offset);
            std::sort(names.begin(), names.end());  // names sort in the caller's order here
            seen.insert(seen.end(), names.begin(), names.end());
        }
        std::vector<std::string> want;
        for (const auto& t : tensors) want.push_back(t.name);
        EXPECT_EQ(seen, want) << "shards must hold consecutive runs of the caller's order";
        if (shards <= 3) {
            EXPECT_LE(largest, total / shards + 200) << "roughly equal bytes";
        }
    }
    EXPECT_THROW(plan_shards(tensors, 0), Error);
    EXPECT_THROW(plan_shards(tensors, 41), Error);
}

TEST(CheckpointWriter, WritesShardsAndIndexTheCheckpointReaderAccepts) {
    TempDir dir;
    const auto model = dir / "model";
    std::vector<TensorDecl> tensors = kMixed;
    tensors.push_back({"g.weight", DType::kI8, {4, 8}});
    uint64_t total = 0;
    {
        CheckpointWriter writer(model, tensors, 3);
        auto order = writer.write_order();
        ASSERT_EQ(order.size(), tensors.size());
        EXPECT_FALSE(std::filesystem::exists(model / kIndexFileName));
        for (const TensorDecl* t : order) writer.write_tensor(t->name, bytes_of(*t, static_cast<uint8_t>(t->name[0])));
        EXPECT_FALSE(std::filesystem::exists(model / kIndexFileName)) << "the index is written last";
        writer.close();
        total = writer.total_bytes();
    }
    Checkpoint checkpoint = Checkpoint::open(model);
    EXPECT_TRUE(checkpoint.has_index());
    EXPECT_EQ(checkpoint.files().size(), 3u);
    EXPECT_TRUE(checkpoint.warnings().empty()) << checkpoint.warnings().front();
    EXPECT_EQ(checkpoint.total_bytes(), total);
    ASSERT_EQ(checkpoint.tensors().size(), tensors.size());
    for (const auto& t : tensors) {
        const auto want = bytes_of(t, static_cast<uint8_t>(t.name[0]));
        const TensorView& view = checkpoint.at(t.name);
        ASSERT_EQ(view.nbytes, want.size());
        EXPECT_TRUE(std::equal(want.begin(), want.end(), view.data)) << t.name;
    }
    const auto index = nlohmann::json::parse(read_file(model / kIndexFileName));
    EXPECT_EQ(index["metadata"]["total_size"].get<uint64_t>(), total);
}

TEST(CheckpointWriter, IncompleteCheckpointHasNoIndex) {
    TempDir dir;
    const std::vector<TensorDecl> tensors = {{"a", DType::kU8, {3}}, {"b", DType::kU8, {3}}};
    {
        CheckpointWriter writer(dir / "m", tensors, 2);
        writer.write_tensor(writer.write_order()[0]->name, std::vector<uint8_t>(3));
        EXPECT_THROW(writer.close(), Error);
        EXPECT_THROW(writer.write_tensor("zzz", std::vector<uint8_t>(3)), Error) << "not the next tensor";
    }
    EXPECT_FALSE(std::filesystem::exists(dir / "m" / kIndexFileName));
    EXPECT_THROW(Checkpoint::open(dir / "m"), Error);
}

}  // namespace
}  // namespace dsv4
