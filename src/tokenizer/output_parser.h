// Splits DeepSeek-V4 generated TEXT (detokenized, special tokens kept as literal strings) into reasoning, content and
// OpenAI tool calls, streaming or at once (model-spec 6.2, anchors 2.1 item 3).
//
// Output grammar: [reasoning "</think>"] content ["\n\n<｜DSML｜tool_calls>" invokes "</｜DSML｜tool_calls>"] EOS, with
// invoke = <｜DSML｜invoke name="N"> params </｜DSML｜invoke> and
// param  = <｜DSML｜parameter name="K" string="true|false">VALUE</｜DSML｜parameter>.
// Tool-call arguments are a JSON object text {"K": V, …} in Python json.dumps style: string="true" values become JSON
// strings, string="false" values are copied raw while they stay valid JSON (else repaired, see below).
//
// Streaming: deltas are emitted as soon as they are certain; only bytes that could still start a marker are held
// (a trailing "<", "<｜DS", "</｜DSML｜para", "\n" before a possible tool block, …). Arguments stream while a value is
// generated: `{"city": "` when the parameter opens, then the escaped value bytes, then `"` and `}`.
// Whatever the chunking, the concatenated reasoning, content, tool names and arguments are identical.
//
// What the model really does, and what the parser makes of it:
// - missing <｜DSML｜tool_calls> wrapper (bare invokes), or invokes after the block: still tool calls;
// - <｜DSML｜tool_calls> or an invoke inside unterminated reasoning: ends the reasoning (like vLLM);
// - reasoning never terminated: stays reasoning at finish();
// - missing </｜DSML｜parameter> / </｜DSML｜invoke>: the next parameter / invoke / block end closes them;
// - output cut inside a call: the call is closed (arguments completed to valid JSON) and flagged incomplete;
// - string="false" value that is not valid JSON: if its first byte cannot start JSON it is sent as a JSON string;
//   otherwise the valid prefix is kept, the rest dropped and the value completed; the call is flagged repaired;
// - text between invokes, or stray text inside an invoke: content (whitespace there is dropped);
// - special tokens (<｜end▁of▁sentence｜>, <｜User｜>, …), stray DSML tags, <think> in content: removed, parsing goes
// on. Content and reasoning never contain "<｜", "｜DSML｜", "<think>" or "</think>"; arguments and tool names never
// contain "<｜" or "｜DSML｜".
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace dsv4 {

enum class OutputDeltaKind {
    kReasoning,          // text: reasoning text
    kContent,            // text: content text
    kToolCallStart,      // tool_index, tool_call_id, tool_name
    kToolCallArguments,  // tool_index, text: the next piece of the arguments JSON
    kToolCallEnd,        // tool_index, complete, arguments_repaired
};

struct OutputDelta {
    OutputDeltaKind kind = OutputDeltaKind::kContent;
    std::string text;
    int tool_index = -1;
    std::string tool_call_id;
    std::string tool_name;
    bool complete = false;            // kToolCallEnd: closed by markup, not cut off by the end of the output
    bool arguments_repaired = false;  // kToolCallEnd: a string="false" value was not valid JSON and was repaired
};

struct OutputParserOptions {
    bool thinking = false;                      // the prompt ended with <think>: output starts inside reasoning
    std::string tool_call_id_prefix = "call_";  // ids are prefix + index; give each request a unique prefix
};

struct ParsedToolCall {
    std::string id;
    std::string name;
    std::string arguments;  // a JSON object text
    bool complete = false;
    bool arguments_repaired = false;
};

struct ParsedOutput {
    std::string reasoning;
    std::string content;
    std::vector<ParsedToolCall> tool_calls;
};

class StreamingOutputParser {
  public:
    explicit StreamingOutputParser(OutputParserOptions options = {});
    ~StreamingOutputParser();
    StreamingOutputParser(StreamingOutputParser&&) noexcept;
    StreamingOutputParser& operator=(StreamingOutputParser&&) noexcept;

    // Feeds the next piece of generated text (any split, even inside a UTF-8 character or a marker).
    std::vector<OutputDelta> push(std::string_view text);

    // End of the output: releases held text, closes open calls. push/finish after finish throw dsv4::Error.
    std::vector<OutputDelta> finish();

    bool finished() const;

  private:
    class Impl;
    std::unique_ptr<Impl> impl_;
};

// Folds deltas into a result (appends to reasoning/content, creates and extends tool calls).
void accumulate_deltas(ParsedOutput& output, const std::vector<OutputDelta>& deltas);

// The whole output at once: same rules and same result as streaming it.
ParsedOutput parse_output(std::string_view text, const OutputParserOptions& options = {});

}  // namespace dsv4
