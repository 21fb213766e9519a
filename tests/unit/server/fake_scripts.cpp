// The FakeEngine's vocabulary pool, model info and demo scripts (see fake_engine.h).
#include <string_view>

#include "fake_engine.h"

namespace dsv4::testing {
namespace {

constexpr std::string_view kUserMarker = "<｜User｜>";
constexpr std::string_view kThinkOpen = "<think>";

std::string tool_block(std::string_view invokes) {
    return std::string("\n\n<｜DSML｜tool_calls>\n") + std::string(invokes) + "\n</｜DSML｜tool_calls>";
}

std::string weather_invoke(bool with_days) {
    std::string invoke =
        "<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter name=\"city\" "
        "string=\"true\">Paris</｜DSML｜parameter>";
    if (with_days) invoke += "\n<｜DSML｜parameter name=\"days\" string=\"false\">3</｜DSML｜parameter>";
    return invoke + "\n</｜DSML｜invoke>";
}

// The scripted text for a prompt, or "" for the default generator.
std::string script_text(std::string_view prompt) {
    const size_t user = prompt.rfind(kUserMarker);
    const std::string_view last_turn = user == std::string_view::npos ? prompt : prompt.substr(user);
    const bool thinking = prompt.size() >= kThinkOpen.size() && prompt.ends_with(kThinkOpen);
    auto reasoned = [&](std::string_view reasoning, std::string text) {
        return thinking ? std::string(reasoning) + "</think>" + text : text;
    };
    if (last_turn.find("<tool_result>") != std::string_view::npos) return reasoned("Got it.", kFakeToolResultAnswer);
    if (last_turn.find("[[parallel]]") != std::string_view::npos) {
        const std::string time_invoke =
            "<｜DSML｜invoke name=\"get_time\">\n<｜DSML｜parameter name=\"zone\" "
            "string=\"true\">Asia/Tokyo</｜DSML｜parameter>\n</｜DSML｜invoke>";
        return reasoned(kFakeToolReasoning, tool_block(weather_invoke(false) + "\n" + time_invoke));
    }
    if (last_turn.find("[[tool]]") != std::string_view::npos) {
        return reasoned(kFakeToolReasoning, tool_block(weather_invoke(true)));
    }
    if (last_turn.find("[[think]]") != std::string_view::npos) return reasoned(kFakeThinkReasoning, kFakeThinkAnswer);
    if (last_turn.find("[[stop]]") != std::string_view::npos) return kFakeStopText;
    if (last_turn.find("[[utf8]]") != std::string_view::npos) return kFakeUtf8Text;
    if (last_turn.find("[[markdown]]") != std::string_view::npos)
        return reasoned(kFakeThinkReasoning, kFakeMarkdownText);
    return {};
}

}  // namespace

std::vector<int32_t> fake_word_tokens(const tokenizer::Tokenizer& tokenizer) {
    static constexpr std::string_view kWords[] = {
        " alpha",  " bravo",   " charlie", " delta", " echo",  " foxtrot", " golf",  " hotel",  " india",
        " juliet", " kilo",    " lima",    " mike",  " oscar", " papa",    " romeo", " sierra", " tango",
        " victor", " whiskey", " yankee",  " zulu",  " red",   " green",   " blue",  " river",  " stone"};
    std::vector<int32_t> tokens;
    for (std::string_view word : kWords) {
        const std::vector<int32_t> ids = tokenizer.encode(word, false);
        if (ids.size() == 1) tokens.push_back(ids[0]);  // single-token words only: decoding stays unambiguous
    }
    return tokens;
}

ModelInfo fake_model_info(const tokenizer::Tokenizer& tokenizer, int max_model_len) {
    ModelInfo info;
    info.name = "fake";
    info.vocab_size = tokenizer.vocab_size();
    info.max_model_len = max_model_len;
    info.bos_token_id = tokenizer.token_to_id("<｜begin▁of▁sentence｜>").value_or(0);
    info.eos_token_ids = {tokenizer.token_to_id("<｜end▁of▁sentence｜>").value_or(1)};
    info.cache.block_size = 256;
    info.cache.cache_dtype = "fake";
    info.cache.num_blocks = 64;
    info.cache.num_slots = 64;
    info.cache.enable_prefix_caching = false;
    return info;
}

FakeScript fake_demo_script(std::shared_ptr<const tokenizer::Tokenizer> tokenizer) {
    return [tokenizer](const std::vector<int32_t>& prompt) -> std::optional<std::vector<int32_t>> {
        const std::string text = script_text(tokenizer->decode(prompt, false));
        if (text.empty()) return std::nullopt;
        return tokenizer->encode(text, true);
    };
}

}  // namespace dsv4::testing
