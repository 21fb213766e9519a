// SafetensorsFile (mmap) and Checkpoint (index + shards): round trips and every structural error.
#include "loader/checkpoint.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "error_matchers.h"
#include "st_writer.h"

namespace dsv4 {
namespace {

namespace fs = std::filesystem;
using test::expect_error;
using test::make_tensor;
using test::TempDir;
using test::TestTensor;

constexpr const char* kShard1 = "model-00001-of-00002.safetensors";
constexpr const char* kShard2 = "model-00002-of-00002.safetensors";

void expect_view_equals(const TensorView& view, const TestTensor& expected) {
    EXPECT_EQ(dtype_name(view.dtype), expected.dtype) << expected.name;
    EXPECT_EQ(std::vector<int64_t>(view.shape.begin(), view.shape.end()), expected.shape) << expected.name;
    ASSERT_EQ(view.nbytes, expected.bytes.size()) << expected.name;
    EXPECT_EQ(std::memcmp(view.data, expected.bytes.data(), view.nbytes), 0) << expected.name;
}

// One tensor of every dtype a checkpoint can hold, over two shards.
std::map<std::string, std::vector<TestTensor>> all_dtype_shards() {
    return {{kShard1,
             {make_tensor("embed.weight", "BF16", {16, 8}, 1), make_tensor("hc_head_fn", "F32", {4, 6}, 2),
              make_tensor("layers.0.ffn.gate.tid2eid", "I64", {10, 6}, 3),
              make_tensor("layers.0.attn.wq_a.weight", "F8_E4M3", {32, 16}, 4),
              make_tensor("layers.0.attn.wq_a.scale", "F8_E8M0", {1, 1}, 5)}},
            {kShard2,
             {make_tensor("layers.0.ffn.experts.0.w1.weight", "I8", {8, 4}, 6),
              make_tensor("layers.0.misc.u8", "U8", {5}, 7), make_tensor("layers.0.misc.f16", "F16", {3, 3}, 8),
              make_tensor("layers.0.misc.i32", "I32", {7}, 9), make_tensor("layers.0.misc.e5m2", "F8_E5M2", {2, 5}, 10),
              make_tensor("norm.weight", "BF16", {8}, 11)}}};
}

TEST(SafetensorsFile, MapsAndReadsBackExactBytes) {
    TempDir dir;
    std::vector<TestTensor> tensors{make_tensor("w", "F32", {3, 5}, 1), make_tensor("b", "BF16", {7}, 2)};
    // A known value so the interpretation is checked too, not only the bytes.
    float third = 3.25f;
    std::memcpy(tensors[0].bytes.data() + 8, &third, 4);
    test::write_bytes(dir / "x.safetensors", test::safetensors_image(tensors, {{"format", "pt"}}));
    SafetensorsFile file = SafetensorsFile::open(dir / "x.safetensors");
    EXPECT_EQ(file.size(), 2u);
    EXPECT_EQ(file.metadata().at("format"), "pt");
    expect_view_equals(file.at("w"), tensors[0]);
    expect_view_equals(file.at("b"), tensors[1]);
    float read = 0;
    std::memcpy(&read, file.at("w").data + 8, 4);
    EXPECT_EQ(read, 3.25f);
    EXPECT_EQ(file.at("w").numel(), 15);
    EXPECT_EQ(file.find("nope"), nullptr);
    expect_error([&] { file.at("nope"); }, {"x.safetensors", "'nope'"});
    file.prefetch(file.at("w"));
    file.release(file.at("w"));  // pages dropped; the bytes are re-read from the file
    expect_view_equals(file.at("w"), tensors[0]);

    // Moving keeps the views valid; the moved-from object owns nothing.
    const TensorView* before = &file.at("b");
    SafetensorsFile moved = std::move(file);
    EXPECT_EQ(&moved.at("b"), before);
    expect_view_equals(moved.at("b"), tensors[1]);
    SafetensorsFile other = SafetensorsFile::open(dir / "x.safetensors");
    other = std::move(moved);
    expect_view_equals(other.at("w"), tensors[0]);
}

TEST(SafetensorsFile, PagingHintRejectsForeignView) {
    TempDir dir;
    test::write_bytes(dir / "x.safetensors", test::safetensors_image({make_tensor("w", "U8", {4}, 1)}));
    SafetensorsFile file = SafetensorsFile::open(dir / "x.safetensors");
    uint8_t local[4] = {};
    TensorView foreign{local, DType::kU8, {}, 4};
    expect_error([&] { file.release(foreign); }, {"x.safetensors", "not inside this file"});
}

TEST(SafetensorsFile, FileLevelErrorsNameTheFile) {
    TempDir dir;
    expect_error([&] { SafetensorsFile::open(dir / "absent.safetensors"); }, {"absent.safetensors", "cannot open"});
    expect_error([&] { SafetensorsFile::open(dir.path()); }, {"not a regular file"});
    test::write_bytes(dir / "empty.safetensors", {});
    expect_error([&] { SafetensorsFile::open(dir / "empty.safetensors"); }, {"empty.safetensors", "0 bytes"});
    test::write_bytes(dir / "short.safetensors", {1, 0, 0});
    expect_error([&] { SafetensorsFile::open(dir / "short.safetensors"); }, {"short.safetensors", "3 bytes"});
    test::write_bytes(dir / "long.safetensors", test::file_image("{}", {}));
    std::vector<uint8_t> bad = test::file_image("{}", {});
    bad[1] = 1;  // header length 256 + 8
    test::write_bytes(dir / "long.safetensors", bad);
    expect_error([&] { SafetensorsFile::open(dir / "long.safetensors"); }, {"long.safetensors", "runs past"});
    test::write_bytes(dir / "text.safetensors", test::file_image("not json", {}));
    expect_error([&] { SafetensorsFile::open(dir / "text.safetensors"); }, {"text.safetensors", "not valid JSON"});
    test::write_bytes(dir / "utf8.safetensors", test::file_image("{\"\xc3\x28\": {}}", {}));
    expect_error([&] { SafetensorsFile::open(dir / "utf8.safetensors"); }, {"utf8.safetensors", "not valid JSON"});
}

TEST(SafetensorsFile, TruncatedFileNamesFileAndTensor) {
    TempDir dir;
    std::vector<TestTensor> tensors{make_tensor("a", "F32", {4}, 1),
                                    make_tensor("layers.1.ffn.gate.weight", "BF16", {4, 4}, 2)};
    std::vector<uint8_t> image = test::safetensors_image(tensors);
    image.resize(image.size() - 10);
    test::write_bytes(dir / kShard1, image);
    expect_error([&] { SafetensorsFile::open(dir / kShard1); },
                 {kShard1, "'layers.1.ffn.gate.weight'", "file truncated"});
}

TEST(Checkpoint, MultiShardRoundTripsEveryDtype) {
    TempDir dir;
    auto shards = all_dtype_shards();
    test::write_sharded_checkpoint(dir.path(), shards);
    Checkpoint checkpoint = Checkpoint::open(dir.path());
    EXPECT_TRUE(checkpoint.has_index());
    EXPECT_TRUE(checkpoint.warnings().empty());
    ASSERT_EQ(checkpoint.files().size(), 2u);
    EXPECT_EQ(checkpoint.files()[0].file_name(), kShard1);
    uint64_t total = 0;
    size_t count = 0;
    for (const auto& [file, tensors] : shards) {
        for (const auto& t : tensors) {
            const CheckpointTensor* entry = checkpoint.find_entry(t.name);
            ASSERT_NE(entry, nullptr) << t.name;
            EXPECT_EQ(checkpoint.file_of(*entry).file_name(), file);
            expect_view_equals(*entry->view, t);
            expect_view_equals(checkpoint.at(t.name), t);
            total += t.bytes.size();
            ++count;
        }
    }
    EXPECT_EQ(checkpoint.tensors().size(), count);
    EXPECT_EQ(checkpoint.total_bytes(), total);
    EXPECT_TRUE(std::is_sorted(checkpoint.tensors().begin(), checkpoint.tensors().end(),
                               [](const auto& a, const auto& b) { return a.name < b.name; }));
    EXPECT_EQ(checkpoint.find("absent"), nullptr);
    expect_error([&] { checkpoint.at("layers.9.absent"); }, {"'layers.9.absent'"});

    // Values survive a move of the whole checkpoint.
    Checkpoint moved = std::move(checkpoint);
    expect_view_equals(moved.at("embed.weight"), shards[kShard1][0]);
}

TEST(Checkpoint, SingleFile) {
    TempDir dir;
    std::vector<TestTensor> tensors{make_tensor("a", "BF16", {2}, 1), make_tensor("b", "I64", {3}, 2)};
    test::write_bytes(dir / "model.safetensors", test::safetensors_image(tensors));
    Checkpoint checkpoint = Checkpoint::open(dir.path());
    EXPECT_FALSE(checkpoint.has_index());
    EXPECT_EQ(checkpoint.tensors().size(), 2u);
    expect_view_equals(checkpoint.at("b"), tensors[1]);
    EXPECT_EQ(checkpoint.total_bytes(), 28u);
}

TEST(Checkpoint, DirectoryErrors) {
    TempDir dir;
    expect_error([&] { Checkpoint::open(dir / "nope"); }, {"nope", "not a directory"});
    expect_error([&] { Checkpoint::open(dir.path()); }, {"neither model.safetensors nor"});
    test::write_bytes(dir / "model.safetensors", test::safetensors_image({make_tensor("a", "U8", {1}, 1)}));
    test::write_text(dir / "model.safetensors.index.json", R"({"weight_map": {"a": "model.safetensors"}})");
    expect_error([&] { Checkpoint::open(dir.path()); }, {"both"});
}

TEST(Checkpoint, IndexErrors) {
    TempDir dir;
    auto open = [&] { Checkpoint::open(dir.path()); };
    const fs::path index = dir / "model.safetensors.index.json";
    test::write_text(index, "{not json");
    expect_error(open, {"model.safetensors.index.json", "not valid JSON"});
    test::write_text(index, R"({"metadata": {}})");
    expect_error(open, {"model.safetensors.index.json", "no 'weight_map'"});
    test::write_text(index, R"({"weight_map": []})");
    expect_error(open, {"'weight_map' is not a JSON object"});
    test::write_text(index, R"({"weight_map": {}})");
    expect_error(open, {"'weight_map' is empty"});
    test::write_text(index, R"({"weight_map": {"a": 3}})");
    expect_error(open, {"tensor 'a'", "not a string"});
    test::write_text(index, R"({"weight_map": {"a": "../outside.safetensors"}})");
    expect_error(open, {"tensor 'a'", "'../outside.safetensors'", "not a plain file name"});
    test::write_text(index, R"({"weight_map": {"a": "x.safetensors", "a": "y.safetensors"}})");
    expect_error(open, {"'a' twice"});
}

TEST(Checkpoint, MissingShardIsNamed) {
    TempDir dir;
    test::write_sharded_checkpoint(dir.path(), all_dtype_shards());
    fs::remove(dir / kShard2);
    expect_error([&] { Checkpoint::open(dir.path()); },
                 {std::string("'") + kShard2 + "'", "missing", "holds 6 tensors"});
}

TEST(Checkpoint, IndexAndShardDisagreements) {
    TempDir dir;
    auto shards = all_dtype_shards();
    test::write_sharded_checkpoint(dir.path(), shards);
    auto index = nlohmann::json::parse(std::ifstream(dir / "model.safetensors.index.json"));
    auto write_index = [&](const nlohmann::json& j) {
        test::write_text(dir / "model.safetensors.index.json", j.dump());
    };
    auto open = [&] { Checkpoint::open(dir.path()); };

    // Listed in the index but absent from its shard.
    auto j = index;
    j["weight_map"]["layers.5.attn.wkv.weight"] = kShard2;
    write_index(j);
    expect_error(open, {kShard2, "'layers.5.attn.wkv.weight'", "absent from the shard"});

    // Present in a shard but mapped to another shard.
    j = index;
    j["weight_map"]["norm.weight"] = kShard1;
    write_index(j);
    expect_error(open,
                 {kShard2, "'norm.weight'", std::string("mapped by model.safetensors.index.json to '") + kShard1});

    // Present in a shard but missing from the index.
    j = index;
    j["weight_map"].erase("layers.0.misc.u8");
    write_index(j);
    expect_error(open, {kShard2, "'layers.0.misc.u8'", "not listed in model.safetensors.index.json"});

    // All problems at once.
    j = index;
    j["weight_map"].erase("layers.0.misc.u8");
    j["weight_map"]["norm.weight"] = kShard1;
    j["weight_map"]["ghost"] = kShard1;
    write_index(j);
    expect_error(open, {"3 problem(s)", "'layers.0.misc.u8'", "'norm.weight'", "'ghost'"});
}

TEST(Checkpoint, SameTensorInTwoShards) {
    TempDir dir;
    auto shards = all_dtype_shards();
    shards[kShard2].push_back(make_tensor("embed.weight", "BF16", {16, 8}, 99));
    test::write_sharded_checkpoint(dir.path(), shards);
    expect_error([&] { Checkpoint::open(dir.path()); }, {"'embed.weight'", "stored in 2 shards", kShard1, kShard2});
}

TEST(Checkpoint, ManyProblemsAreTruncated) {
    TempDir dir;
    test::write_sharded_checkpoint(dir.path(), all_dtype_shards());
    nlohmann::json j = nlohmann::json::parse(std::ifstream(dir / "model.safetensors.index.json"));
    for (int i = 0; i < 50; ++i) j["weight_map"][fmt::format("ghost.{:02}", i)] = kShard1;
    test::write_text(dir / "model.safetensors.index.json", j.dump());
    std::string message = expect_error([&] { Checkpoint::open(dir.path()); }, {"50 problem(s)", "and 30 more"});
    EXPECT_NE(message.find("'ghost.19'"), std::string::npos);
    EXPECT_EQ(message.find("'ghost.20'"), std::string::npos);
}

TEST(Checkpoint, TotalSizeMismatchIsAWarning) {
    TempDir dir;
    test::write_sharded_checkpoint(dir.path(), all_dtype_shards());
    nlohmann::json j = nlohmann::json::parse(std::ifstream(dir / "model.safetensors.index.json"));
    uint64_t real = j["metadata"]["total_size"].get<uint64_t>();
    j["metadata"]["total_size"] = real + 1;
    test::write_text(dir / "model.safetensors.index.json", j.dump());
    Checkpoint checkpoint = Checkpoint::open(dir.path());
    ASSERT_EQ(checkpoint.warnings().size(), 1u);
    EXPECT_NE(checkpoint.warnings()[0].find(std::to_string(real + 1)), std::string::npos);
    EXPECT_NE(checkpoint.warnings()[0].find(std::to_string(real)), std::string::npos);
    EXPECT_EQ(checkpoint.total_bytes(), real);

    j["metadata"]["total_size"] = "big";
    test::write_text(dir / "model.safetensors.index.json", j.dump());
    EXPECT_EQ(Checkpoint::open(dir.path()).warnings().size(), 1u);
    j.erase("metadata");  // optional
    test::write_text(dir / "model.safetensors.index.json", j.dump());
    EXPECT_TRUE(Checkpoint::open(dir.path()).warnings().empty());
}

TEST(Checkpoint, MalformedShardErrorNamesShardAndTensor) {
    TempDir dir;
    test::write_sharded_checkpoint(dir.path(), all_dtype_shards());
    // Rewrite shard 2 with a dtype we do not know.
    nlohmann::json header = nlohmann::json::object();
    header["norm.weight"] = {{"dtype", "F4"}, {"shape", {8}}, {"data_offsets", {0, 4}}};
    test::write_bytes(dir / kShard2, test::file_image(header.dump(), std::vector<uint8_t>(4)));
    expect_error([&] { Checkpoint::open(dir.path()); }, {kShard2, "'norm.weight'", "unknown dtype 'F4'"});
}

}  // namespace
}  // namespace dsv4
