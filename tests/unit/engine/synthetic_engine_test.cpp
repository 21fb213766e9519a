// EngineConfig::synthetic_preset (`dsv4 serve --synthetic-weights`): the engine's model comes from the built-in
// full-size configuration instead of model_dir, truncated by synthetic_layers; a backend that cannot make synthetic
// weights (the CPU) and an unknown preset are clear errors. The GPU run itself is a benchmark (docs/).
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "engine/device_registry.h"
#include "engine_test_util.h"

namespace dsv4::engine_test {
namespace {

std::string create_error(const EngineConfig& c) {
    try {
        Engine::create(c);
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

TEST(SyntheticEngine, ModelConfigComesFromThePreset) {
    EngineConfig c = small_config("flash_schedule");
    const ModelConfig from_dir = engine_model_config(c);
    c.synthetic_preset = "flash-160";
    c.synthetic_layers = 4;
    const ModelConfig synthetic = engine_model_config(c);
    EXPECT_EQ(synthetic.num_layers, 4);
    EXPECT_EQ(synthetic.n_routed_experts, 160);
    EXPECT_EQ(synthetic.hidden_size, 4096);
    EXPECT_NE(synthetic.hidden_size, from_dir.hidden_size);
    c.synthetic_layers = 0;
    EXPECT_EQ(engine_model_config(c).num_layers, 43);
}

TEST(SyntheticEngine, UnknownPresetOrNegativeDepthIsAnError) {
    EngineConfig c = small_config("flash_schedule");
    c.synthetic_preset = "flash-999";
    EXPECT_NE(create_error(c).find("unknown preset 'flash-999'"), std::string::npos) << create_error(c);
    c.synthetic_preset = "flash";
    c.synthetic_layers = 99;
    EXPECT_NE(create_error(c).find("exceeds the model's 43"), std::string::npos) << create_error(c);
    c.synthetic_layers = -1;
    EXPECT_NE(create_error(c).find("synthetic_layers must be >= 0"), std::string::npos) << create_error(c);
}

TEST(SyntheticEngine, TheCpuBackendSaysItCannotMakeSyntheticWeights) {
    EngineConfig c = small_config("flash_schedule");
    c.synthetic_preset = "flash";
    c.synthetic_layers = 1;
    c.max_num_seqs = 1;
    c.max_model_len = 256;
    c.kv_cache_bytes = int64_t{1} << 30;
    EXPECT_NE(create_error(c).find("does not make synthetic weights"), std::string::npos) << create_error(c);
}

}  // namespace
}  // namespace dsv4::engine_test
