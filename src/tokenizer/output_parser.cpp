#include "tokenizer/output_parser.h"

#include "core/error.h"
#include "tokenizer/chat_json.h"
#include "tokenizer/chat_tokens.h"
#include "tokenizer/output_parser_json.h"
#include "tokenizer/output_parser_lexer.h"

namespace dsv4 {

using output_parser_detail::DsmlTag;
using output_parser_detail::DsmlTagName;
using output_parser_detail::LeakGuard;
using output_parser_detail::Marker;
using output_parser_detail::MarkerKind;
using output_parser_detail::MatchStatus;

namespace {

bool is_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

bool is_tag(const Marker& marker, DsmlTagName name, bool closing) {
    return marker.kind == MarkerKind::kDsmlTag && marker.tag.name == name && marker.tag.closing == closing;
}

}  // namespace

// The parser is a lexer (match_marker over a buffer of not-yet-decided bytes) feeding a state machine. Lexing does
// not depend on the state, and every text handler below treats text byte by byte (or appends it), so the result does
// not depend on where the input was split.
class StreamingOutputParser::Impl {
  public:
    explicit Impl(OutputParserOptions options)
        : options_(std::move(options)), state_(options_.thinking ? State::kReasoning : State::kContent) {}

    std::vector<OutputDelta> push(std::string_view text) {
        DSV4_CHECK(!finished_, "output parser: push() after finish()");
        pending_ += text;
        std::vector<OutputDelta> deltas;
        out_ = &deltas;
        lex(/*at_end=*/false);
        out_ = nullptr;
        return deltas;
    }

    std::vector<OutputDelta> finish() {
        DSV4_CHECK(!finished_, "output parser: finish() called twice");
        std::vector<OutputDelta> deltas;
        out_ = &deltas;
        lex(/*at_end=*/true);
        if (state_ == State::kParam) close_param();
        if (state_ == State::kInvoke) end_call(/*complete=*/false);
        std::string rest;
        reasoning_guard_.flush(rest);
        emit_text(OutputDeltaKind::kReasoning, rest);
        rest.clear();
        content_guard_.flush(rest);
        emit_text(OutputDeltaKind::kContent, rest);
        out_ = nullptr;
        finished_ = true;
        return deltas;
    }

    bool finished() const { return finished_; }

  private:
    enum class State { kReasoning, kContent, kToolBlock, kInvoke, kParam };
    enum class ValueMode { kLeadingSpace, kRaw, kFallbackString, kRejected };

    void lex(bool at_end) {
        const std::string_view buffer = pending_;
        std::size_t pos = 0;
        std::size_t text_start = 0;
        while (pos < buffer.size()) {
            if (!output_parser_detail::is_marker_trigger(buffer[pos])) {
                ++pos;
                continue;
            }
            const auto match = output_parser_detail::match_marker(buffer.substr(pos), at_end);
            if (match.status == MatchStatus::kNeedMore) break;
            if (match.status == MatchStatus::kText) {
                ++pos;
                continue;
            }
            handle_text(buffer.substr(text_start, pos - text_start));
            handle_marker(match.marker);
            pos += match.marker.length;
            text_start = pos;
        }
        handle_text(buffer.substr(text_start, pos - text_start));
        pending_.erase(0, pos);
    }

    // ---- text -------------------------------------------------------------------------------------------------

    void handle_text(std::string_view text) {
        while (!text.empty()) {
            switch (state_) {
                case State::kReasoning:
                    guarded(reasoning_guard_, OutputDeltaKind::kReasoning, text);
                    return;
                case State::kContent:
                    guarded(content_guard_, OutputDeltaKind::kContent, text);
                    return;
                case State::kToolBlock: {
                    // Whitespace between calls is layout; anything else means the model went back to prose.
                    std::size_t skip = 0;
                    while (skip < text.size() && is_space(text[skip])) ++skip;
                    text.remove_prefix(skip);
                    if (!text.empty()) state_ = State::kContent;
                    break;
                }
                case State::kInvoke:
                    if (!stray_text_) {
                        std::size_t skip = 0;
                        while (skip < text.size() && is_space(text[skip])) ++skip;
                        text.remove_prefix(skip);
                        if (text.empty()) return;
                        stray_text_ = true;
                    }
                    guarded(content_guard_, OutputDeltaKind::kContent, text);
                    return;
                case State::kParam: {
                    std::string safe;
                    value_guard_.push(text, safe);
                    append_value(safe);
                    return;
                }
            }
        }
    }

    void guarded(LeakGuard& guard, OutputDeltaKind kind, std::string_view text) {
        std::string safe;
        guard.push(text, safe);
        emit_text(kind, safe);
    }

    // ---- markers ----------------------------------------------------------------------------------------------

    void handle_marker(const Marker& marker) {
        if (marker.newlines > 0) {
            // Newlines before a tool-call block belong to the block in prose; elsewhere they are ordinary text.
            if (state_ != State::kReasoning && state_ != State::kContent) {
                handle_text(std::string_view("\n\n").substr(0, marker.newlines));
            }
        }
        if (state_ == State::kInvoke) stray_text_ = false;
        switch (marker.kind) {
            case MarkerKind::kThinkClose:
                if (state_ == State::kReasoning) state_ = State::kContent;
                if (state_ == State::kParam) append_value_text(chat_tokens::kThinkClose);
                return;
            case MarkerKind::kThinkOpen:
                if (state_ == State::kParam) append_value_text(chat_tokens::kThinkOpen);
                return;
            case MarkerKind::kDsmlTag:
                handle_dsml_tag(marker);
                return;
            case MarkerKind::kSpecialToken:
            case MarkerKind::kBareDsml:
            case MarkerKind::kMalformedDsml:
            case MarkerKind::kTruncatedDsml:
                return;  // removed
        }
    }

    void handle_dsml_tag(const Marker& marker) {
        const bool opens_call = is_tag(marker, DsmlTagName::kInvoke, false);
        switch (state_) {
            case State::kReasoning:
            case State::kContent:
            case State::kToolBlock:
                if (opens_call) {
                    start_call(marker.tag);
                } else if (is_tag(marker, DsmlTagName::kToolCalls, false)) {
                    state_ = State::kToolBlock;
                }
                return;
            case State::kParam:
                if (!is_tag(marker, DsmlTagName::kParameter, false) && !is_tag(marker, DsmlTagName::kParameter, true) &&
                    !is_tag(marker, DsmlTagName::kInvoke, true) && !opens_call &&
                    !is_tag(marker, DsmlTagName::kToolCalls, true)) {
                    return;  // not a structural tag here: dropped
                }
                close_param();
                if (is_tag(marker, DsmlTagName::kParameter, true)) return;
                [[fallthrough]];
            case State::kInvoke:
                if (is_tag(marker, DsmlTagName::kParameter, false)) {
                    open_param(marker.tag);
                } else if (opens_call) {
                    end_call(/*complete=*/true);
                    start_call(marker.tag);
                } else if (is_tag(marker, DsmlTagName::kInvoke, true) ||
                           is_tag(marker, DsmlTagName::kToolCalls, true)) {
                    end_call(/*complete=*/true);
                }
                return;
        }
    }

    // ---- tool calls -------------------------------------------------------------------------------------------

    void start_call(const DsmlTag& tag) {
        call_index_ = next_call_index_++;
        call_has_params_ = false;
        call_repaired_ = false;
        stray_text_ = false;
        OutputDelta delta;
        delta.kind = OutputDeltaKind::kToolCallStart;
        delta.tool_index = call_index_;
        delta.tool_call_id = options_.tool_call_id_prefix + std::to_string(call_index_);
        delta.tool_name = output_parser_detail::sanitize_attribute(tag.name_attribute);
        out_->push_back(std::move(delta));
        state_ = State::kInvoke;
    }

    void end_call(bool complete) {
        emit_arguments(call_has_params_ ? "}" : "{}");
        OutputDelta delta;
        delta.kind = OutputDeltaKind::kToolCallEnd;
        delta.tool_index = call_index_;
        delta.complete = complete;
        delta.arguments_repaired = call_repaired_;
        out_->push_back(std::move(delta));
        state_ = State::kToolBlock;
    }

    void open_param(const DsmlTag& tag) {
        std::string head = call_has_params_ ? ", " : "{";
        append_python_json_string(head, output_parser_detail::sanitize_attribute(tag.name_attribute));
        head += ": ";
        if (tag.string_value) head += '"';
        emit_arguments(head);
        call_has_params_ = true;
        param_is_string_ = tag.string_value;
        value_mode_ = ValueMode::kLeadingSpace;
        leading_space_.clear();
        validator_ = JsonPrefixValidator();
        state_ = State::kParam;
    }

    void close_param() {
        std::string rest;
        value_guard_.flush(rest);
        append_value(rest);
        std::string tail;
        if (param_is_string_) {
            tail = "\"";
        } else {
            switch (value_mode_) {
                case ValueMode::kLeadingSpace:  // empty value: keep it as a string
                    tail = "\"";
                    append_json_escaped(tail, leading_space_);
                    tail += '"';
                    call_repaired_ = true;
                    break;
                case ValueMode::kRaw:
                case ValueMode::kRejected:
                    if (!validator_.complete()) {
                        tail = validator_.completion();
                        call_repaired_ = true;
                    }
                    break;
                case ValueMode::kFallbackString:
                    tail = "\"";
                    break;
            }
        }
        emit_arguments(tail);
        state_ = State::kInvoke;
    }

    void append_value_text(std::string_view text) {
        std::string safe;
        value_guard_.push(text, safe);
        append_value(safe);
    }

    // Value bytes that passed the leak guard.
    void append_value(std::string_view text) {
        std::string fragment;
        if (param_is_string_) {
            append_json_escaped(fragment, text);
        } else {
            for (char c : text) append_json_value_byte(fragment, c);
        }
        emit_arguments(fragment);
    }

    void append_json_value_byte(std::string& fragment, char c) {
        switch (value_mode_) {
            case ValueMode::kLeadingSpace:
                if (is_space(c)) {
                    leading_space_ += c;
                } else if (validator_.feed(c)) {
                    fragment += leading_space_;
                    fragment += c;
                    value_mode_ = ValueMode::kRaw;
                } else {
                    fragment += '"';
                    append_json_escaped(fragment, leading_space_);
                    append_json_escaped(fragment, std::string_view(&c, 1));
                    value_mode_ = ValueMode::kFallbackString;
                    call_repaired_ = true;
                }
                return;
            case ValueMode::kRaw:
                if (validator_.feed(c)) {
                    fragment += c;
                } else {
                    value_mode_ = ValueMode::kRejected;
                    call_repaired_ = true;
                }
                return;
            case ValueMode::kFallbackString:
                append_json_escaped(fragment, std::string_view(&c, 1));
                return;
            case ValueMode::kRejected:
                return;
        }
    }

    // ---- emission ---------------------------------------------------------------------------------------------

    void emit_arguments(std::string_view text) {
        if (text.empty()) return;
        if (!out_->empty() && out_->back().kind == OutputDeltaKind::kToolCallArguments &&
            out_->back().tool_index == call_index_) {
            out_->back().text += text;
            return;
        }
        OutputDelta delta;
        delta.kind = OutputDeltaKind::kToolCallArguments;
        delta.tool_index = call_index_;
        delta.text = std::string(text);
        out_->push_back(std::move(delta));
    }

    void emit_text(OutputDeltaKind kind, std::string_view text) {
        if (text.empty()) return;
        if (!out_->empty() && out_->back().kind == kind) {
            out_->back().text += text;
            return;
        }
        OutputDelta delta;
        delta.kind = kind;
        delta.text = std::string(text);
        out_->push_back(std::move(delta));
    }

    OutputParserOptions options_;
    State state_;
    bool finished_ = false;
    std::string pending_;  // bytes not decided yet (a possible marker at its start)
    std::vector<OutputDelta>* out_ = nullptr;

    LeakGuard reasoning_guard_{/*guard_think_tags=*/true};
    LeakGuard content_guard_{/*guard_think_tags=*/true};
    LeakGuard value_guard_{/*guard_think_tags=*/false};

    int next_call_index_ = 0;
    int call_index_ = -1;
    bool call_has_params_ = false;
    bool call_repaired_ = false;
    bool stray_text_ = false;  // inside an invoke: non-whitespace text seen since the last marker

    bool param_is_string_ = true;
    ValueMode value_mode_ = ValueMode::kLeadingSpace;
    std::string leading_space_;
    JsonPrefixValidator validator_;
};

StreamingOutputParser::StreamingOutputParser(OutputParserOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}
StreamingOutputParser::~StreamingOutputParser() = default;
StreamingOutputParser::StreamingOutputParser(StreamingOutputParser&&) noexcept = default;
StreamingOutputParser& StreamingOutputParser::operator=(StreamingOutputParser&&) noexcept = default;

std::vector<OutputDelta> StreamingOutputParser::push(std::string_view text) {
    return impl_->push(text);
}
std::vector<OutputDelta> StreamingOutputParser::finish() {
    return impl_->finish();
}
bool StreamingOutputParser::finished() const {
    return impl_->finished();
}

void accumulate_deltas(ParsedOutput& output, const std::vector<OutputDelta>& deltas) {
    for (const OutputDelta& delta : deltas) {
        switch (delta.kind) {
            case OutputDeltaKind::kReasoning:
                output.reasoning += delta.text;
                break;
            case OutputDeltaKind::kContent:
                output.content += delta.text;
                break;
            case OutputDeltaKind::kToolCallStart:
                DSV4_CHECK(delta.tool_index == static_cast<int>(output.tool_calls.size()),
                           "tool call {} started out of order", delta.tool_index);
                output.tool_calls.push_back({delta.tool_call_id, delta.tool_name, {}, false, false});
                break;
            case OutputDeltaKind::kToolCallArguments:
            case OutputDeltaKind::kToolCallEnd: {
                DSV4_CHECK(delta.tool_index >= 0 && delta.tool_index < static_cast<int>(output.tool_calls.size()),
                           "delta for unknown tool call {}", delta.tool_index);
                ParsedToolCall& call = output.tool_calls[static_cast<std::size_t>(delta.tool_index)];
                if (delta.kind == OutputDeltaKind::kToolCallArguments) {
                    call.arguments += delta.text;
                } else {
                    call.complete = delta.complete;
                    call.arguments_repaired = delta.arguments_repaired;
                }
                break;
            }
        }
    }
}

ParsedOutput parse_output(std::string_view text, const OutputParserOptions& options) {
    StreamingOutputParser parser(options);
    ParsedOutput output;
    accumulate_deltas(output, parser.push(text));
    accumulate_deltas(output, parser.finish());
    return output;
}

}  // namespace dsv4
