// Capacity planning at load (engine/capacity_plan.h): pure arithmetic on the real DeepSeek-V4-Flash shapes against an
// H200's memory (the full 256-expert model must fail with a clear message and fit once experts stay in host memory),
// and every flag the failure message suggests must really make the model fit.
#include "engine/capacity_plan.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "core/error.h"
#include "model/flash_preset.h"
#include "model/tensor_spec.h"

namespace dsv4 {
namespace {

constexpr int64_t kGiB = int64_t{1} << 30;

// One H200 as cudaMemGetInfo reports it (143,771 MiB in total, ~139 GiB free once the context exists) and the engine's
// defaults: 0.9 utilization, 6 GiB workspace, 1 GiB reserve, 64 sequences, fp8 state.
CapacityRequest h200_request() {
    CapacityRequest r;
    r.numerics = Numerics::kFast;
    r.state_dtype = StateDtype::kFp8;
    r.device.name = "GPU";
    r.device.total_bytes = int64_t{143771} << 20;
    r.device.free_bytes = 139 * kGiB;
    r.device.utilization = 0.9;
    r.device.workspace_bytes = 6 * kGiB;
    r.device.reserve_bytes = kGiB;
    r.host_available_bytes = 900 * kGiB;
    r.max_num_seqs = 64;
    r.block_tokens = 256;
    r.rewind_capacity = 16;
    return r;
}

std::string plan_error(const ModelConfig& model, const CapacityRequest& r) {
    try {
        plan_capacity(model, r);
    } catch (const Error& e) {
        return e.what();
    }
    return {};
}

// The integer right after `flag ` in a message (-1 when the flag is not there).
int64_t suggested(const std::string& message, const std::string& flag) {
    const size_t at = message.find(flag + " ");
    if (at == std::string::npos) return -1;
    return std::stoll(message.substr(at + flag.size() + 1));
}

TEST(CapacityPlan, FlashExpertBytesAreTheCheckpointForm) {
    const ModelConfig flash = flash_preset_config("flash");
    const WeightFootprint w = weight_footprint(flash, Numerics::kFast);
    // Three FP4 matrices of moe_intermediate x hidden: half a byte per value plus one UE8M0 scale per 32 values.
    const int64_t values = int64_t{flash.moe_intermediate_size} * flash.hidden_size;
    EXPECT_EQ(w.expert_bytes, 3 * (values / 2 + values / 32));
    EXPECT_EQ(w.experts_per_layer, 256);
    EXPECT_EQ(w.moe_layers, 43);
    // The whole model is ~145 GiB, more than an H200 has.
    EXPECT_GT(w.non_expert_bytes + w.all_experts_bytes(), 143 * kGiB);
    EXPECT_LT(w.non_expert_bytes, 10 * kGiB);
    // Counted from two small copies of the model: the same as listing every tensor (here 4 layers, 64 experts).
    const ModelConfig small = flash_preset_config("flash", 4, 64);
    int64_t non_expert = 0, experts = 0;
    for (const TensorSpec& s : expected_tensors(small)) {
        int64_t n = 1;
        for (int64_t d : s.shape) n *= d;
        int64_t bytes = n * dtype_bits(s.dtype) / 8;
        if (s.dtype == DType::kBF16 && s.shape.size() == 1) bytes = n * 4;
        if (s.dtype == DType::kI64) bytes = n * 4;
        (s.component == Component::kRoutedExperts ? experts : non_expert) += bytes;
    }
    const WeightFootprint f = weight_footprint(small, Numerics::kExact);
    EXPECT_EQ(f.non_expert_bytes, non_expert);
    EXPECT_EQ(f.expert_bytes * 4 * 64, experts);
}

TEST(CapacityPlan, FullFlashOnOneH200FailsNamingBytesAndFlags) {
    const ModelConfig flash = flash_preset_config("flash");
    const CapacityRequest r = h200_request();
    const std::string message = plan_error(flash, r);
    ASSERT_FALSE(message.empty()) << "the 256-expert model must not fit one H200";
    RecordProperty("message", message);  // --gtest_output=xml shows it (docs/operations.md quotes it)
    EXPECT_NE(message.find("does not fit the GPU"), std::string::npos) << message;
    EXPECT_NE(message.find("are available"), std::string::npos) << message;
    EXPECT_NE(message.find("routed experts"), std::string::npos) << message;
    // Raising the utilization cannot help (the weights alone exceed the device): not suggested.
    EXPECT_EQ(message.find("--gpu-memory-utilization"), std::string::npos) << message;
    const int64_t experts = suggested(message, "--gpu-experts");
    ASSERT_GT(experts, 0) << message;
    ASSERT_LT(experts, 256) << message;

    // The suggestion is the most experts that fit: it fits, one more does not.
    CapacityRequest fits = r;
    fits.gpu_experts = static_cast<int>(experts);
    const CapacityPlan plan = plan_capacity(flash, fits);
    EXPECT_EQ(plan.resident_experts, experts);
    EXPECT_EQ(plan.host_experts, 256 - experts);
    EXPECT_LE(plan.device_bytes(), plan.device_budget_bytes);
    // The tier keeps the experts not on the device in host memory, plus one it writes evicted experts back to.
    EXPECT_EQ(plan.host_expert_bytes, plan.weights.expert_bytes * (43 * (256 - experts) + 1));
    EXPECT_GE(plan.state.state.num_blocks, 1);
    fits.gpu_experts = static_cast<int>(experts) + 1;
    EXPECT_FALSE(plan_error(flash, fits).empty());
}

TEST(CapacityPlan, FlashWithMostExpertsOnTheHostLeavesRoomForState) {
    const ModelConfig flash = flash_preset_config("flash");
    CapacityRequest r = h200_request();
    r.gpu_experts = 160;
    r.max_model_len = 1 << 20;  // a 1M-token context must fit alongside
    const CapacityPlan plan = plan_capacity(flash, r);
    EXPECT_EQ(plan.max_model_len, 1 << 20);
    EXPECT_GE(plan.state.token_capacity, int64_t{1} << 20);
    EXPECT_NE(plan.summary().find("96 per layer"), std::string::npos) << plan.summary();
    // Host memory holds only the 96 experts per layer the device does not (51.4 GiB for flash, plus one expert):
    // a 128 GiB host holds them, a 48 GiB one does not.
    EXPECT_EQ(plan.host_expert_bytes, plan.weights.expert_bytes * (43 * 96 + 1));
    r.host_available_bytes = 128 * kGiB;
    EXPECT_NO_THROW(plan_capacity(flash, r));
    r.host_available_bytes = 48 * kGiB;
    const std::string message = plan_error(flash, r);
    EXPECT_NE(message.find("host tiers do not fit host memory"), std::string::npos) << message;
    EXPECT_NE(message.find("keeps the others in pinned host memory"), std::string::npos) << message;
}

TEST(CapacityPlan, EverySuggestedFlagMakesItFit) {
    const ModelConfig flash = flash_preset_config("flash");
    CapacityRequest r = h200_request();
    r.gpu_experts = 200;
    r.state_dtype = StateDtype::kBf16;
    r.max_model_len = 1 << 20;
    r.max_num_seqs = 128;
    const std::string message = plan_error(flash, r);
    ASSERT_FALSE(message.empty());
    int found = 0;
    for (const char* flag : {"--gpu-experts", "--gpu-memory-utilization", "--max-model-len", "--max-num-seqs"}) {
        const int64_t value = suggested(message, flag);
        if (value < 0) continue;
        ++found;
        CapacityRequest fixed = r;
        if (std::string(flag) == "--gpu-experts") fixed.gpu_experts = static_cast<int>(value);
        if (std::string(flag) == "--max-model-len") fixed.max_model_len = value;
        if (std::string(flag) == "--max-num-seqs") fixed.max_num_seqs = static_cast<int>(value);
        if (std::string(flag) == "--gpu-memory-utilization") {
            const size_t at = message.find("--gpu-memory-utilization ");
            fixed.device.utilization = std::stod(message.substr(at + 25));
        }
        EXPECT_NO_THROW(plan_capacity(flash, fixed)) << flag << " " << value << "\n" << message;
    }
    EXPECT_GE(found, 3) << message;
    // fp8 state is suggested exactly when it alone makes the model fit.
    CapacityRequest fp8 = r;
    fp8.state_dtype = StateDtype::kFp8;
    const bool fp8_fits = plan_error(flash, fp8).empty();
    EXPECT_EQ(message.find("--kv-cache-dtype fp8") != std::string::npos, fp8_fits) << message;
    fp8.gpu_experts = 190;
    EXPECT_EQ(plan_error(flash, fp8).find("--kv-cache-dtype"), std::string::npos) << "already fp8: never suggested";
}

TEST(CapacityPlan, ExplicitStateBudgetAndBadValues) {
    const ModelConfig flash = flash_preset_config("flash");
    CapacityRequest r = h200_request();
    r.gpu_experts = 200;
    r.kv_cache_bytes = 100 * kGiB;
    const std::string message = plan_error(flash, r);
    const int64_t budget = suggested(message, "--kv-cache-memory-bytes");
    ASSERT_GT(budget, 0) << message;
    r.kv_cache_bytes = budget;
    EXPECT_NO_THROW(plan_capacity(flash, r));
    r.gpu_experts = 257;
    EXPECT_NE(plan_error(flash, r).find("--gpu-experts 257 is outside [0, 256]"), std::string::npos);
}

TEST(CapacityPlan, CpuReadsCheckpointWeightsInPlace) {
    const ModelConfig model =
        load_model_config(std::filesystem::path(DSV4_SOURCE_DIR) / "tests/fixtures/flash_schedule/config.json");
    CapacityRequest r;
    r.device.name = "host memory";
    r.device.total_bytes = r.device.free_bytes = 8 * kGiB;
    r.device.holds_weights = false;
    r.device.auto_state_cap_bytes = kGiB;
    r.max_num_seqs = 4;
    r.block_tokens = 128;
    const CapacityPlan plan = plan_capacity(model, r);
    EXPECT_EQ(plan.device_weight_bytes, 0);
    // The automatic state: the slots plus at most 1 GiB.
    const StateLayout layout = compute_state_layout(model, 128, 16, StateDtype::kF32);
    EXPECT_LE(plan.state.total_bytes, 4 * layout.slot_bytes + kGiB);
    EXPECT_GT(plan.state.total_bytes, 4 * layout.slot_bytes + kGiB / 2);
    r.device.total_bytes = r.device.free_bytes = 4 * layout.slot_bytes;  // not even the slots
    EXPECT_NE(plan_error(model, r).find("does not fit the host memory"), std::string::npos);
}

}  // namespace
}  // namespace dsv4
