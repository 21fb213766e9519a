// DeepSeek's shipped golden vectors (encoding/tests/test_input_{1..4}.json -> test_output_{1..4}.txt, as vendored by
// vLLM in tests/tokenizers_/fixtures/deepseek_v4): the prompt must match byte for byte.
// Cases 1-3 are encoded in thinking mode, case 4 in chat mode.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "tokenizer/chat_encoding.h"

namespace dsv4 {
namespace {

using Json = nlohmann::ordered_json;

std::string read_file(const std::string& name) {
    const std::string path = std::string(DSV4_SOURCE_DIR) + "/tests/unit/chat/golden/" + name;
    std::ifstream in(path, std::ios::binary);
    EXPECT_TRUE(in.good()) << "cannot open " << path;
    std::stringstream buffer;
    buffer << in.rdbuf();
    return buffer.str();
}

std::vector<Json> functions_of(const Json& tools) {
    std::vector<Json> out;
    for (const auto& tool : tools) out.push_back(tool.at("function"));
    return out;
}

ChatMessage message_from_json(const Json& json) {
    ChatMessage message;
    message.role = parse_chat_role(json.at("role").get<std::string>());
    message.content = json.value("content", "");
    message.reasoning_content = json.value("reasoning_content", json.value("reasoning", ""));
    message.tool_call_id = json.value("tool_call_id", "");
    if (json.contains("tools")) message.tools = functions_of(json.at("tools"));
    if (json.contains("task")) message.task = parse_chat_task(json.at("task").get<std::string>());
    for (const auto& call : json.value("tool_calls", Json::array())) {
        const auto& function = call.at("function");
        message.tool_calls.push_back({call.value("id", ""), function.at("name").get<std::string>(),
                                      function.at("arguments").get<std::string>()});
    }
    return message;
}

ChatConversation conversation_from_json(const Json& json) {
    ChatConversation conversation;
    const Json& messages = json.is_array() ? json : json.at("messages");
    for (const auto& message : messages) conversation.messages.push_back(message_from_json(message));
    if (json.is_object() && json.contains("tools")) conversation.tools = functions_of(json.at("tools"));
    return conversation;
}

void expect_golden(int case_number, ThinkingMode mode) {
    const Json input = Json::parse(read_file("test_input_" + std::to_string(case_number) + ".json"));
    const std::string expected = read_file("test_output_" + std::to_string(case_number) + ".txt");
    ChatOptions options;
    options.thinking_mode = mode;
    for (auto revision : {ChatTemplateRevision::kV4, ChatTemplateRevision::kV4_0731}) {
        const std::string prompt = ChatEncoder(revision).encode(conversation_from_json(input), options);
        EXPECT_EQ(prompt, expected) << "case " << case_number;
    }
}

TEST(ChatEncodingGolden, Case1ToolCallRoundTrip) {
    expect_golden(1, ThinkingMode::kThinking);
}
TEST(ChatEncodingGolden, Case2MultiTurnDropThinking) {
    expect_golden(2, ThinkingMode::kThinking);
}
TEST(ChatEncodingGolden, Case3DeveloperToolsLatestReminder) {
    expect_golden(3, ThinkingMode::kThinking);
}
TEST(ChatEncodingGolden, Case4QuickInstructionTaskChatMode) {
    expect_golden(4, ThinkingMode::kChat);
}

}  // namespace
}  // namespace dsv4
