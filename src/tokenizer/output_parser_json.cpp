#include "tokenizer/output_parser_json.h"

#include <cstring>
#include <string_view>

namespace dsv4 {
namespace {

bool is_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}
bool is_digit(char c) {
    return c >= '0' && c <= '9';
}
bool is_hex(char c) {
    return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

}  // namespace

bool JsonPrefixValidator::feed(char c) {
    if (mode_ == Mode::kNumber && number_can_end() && !is_digit(c) && c != '.' && c != 'e' && c != 'E') {
        // The byte ends the number and must then be accepted after it; try that on a copy.
        JsonPrefixValidator next = *this;
        next.value_done();
        if (!next.step(c)) return false;
        *this = std::move(next);
        return true;
    }
    return step(c);
}

bool JsonPrefixValidator::step(char c) {
    switch (mode_) {
        case Mode::kValue:
            return step_value(c);
        case Mode::kKey:
            if (is_space(c)) return true;
            if (c == '"') {
                mode_ = Mode::kString;
                string_is_key_ = true;
                return true;
            }
            if (c == '}' && key_first_) {
                stack_.pop_back();
                value_done();
                return true;
            }
            return false;
        case Mode::kColon:
            if (is_space(c)) return true;
            if (c != ':') return false;
            mode_ = Mode::kValue;
            slot_ = ValueSlot::kObjectValue;
            return true;
        case Mode::kString:
            if (static_cast<unsigned char>(c) < 0x20) return false;
            if (c == '\\') {
                mode_ = Mode::kEscape;
            } else if (c == '"') {
                if (string_is_key_) {
                    mode_ = Mode::kColon;
                } else {
                    value_done();
                }
            }
            return true;
        case Mode::kEscape:
            if (c == 'u') {
                mode_ = Mode::kUnicode;
                hex_digits_ = 0;
                return true;
            }
            if (std::strchr("\"\\/bfnrt", c) == nullptr || c == '\0') return false;
            mode_ = Mode::kString;
            return true;
        case Mode::kUnicode:
            if (!is_hex(c)) return false;
            if (++hex_digits_ == 4) mode_ = Mode::kString;
            return true;
        case Mode::kNumber:
            return step_number(c);
        case Mode::kLiteral:
            if (c != literal_[literal_pos_]) return false;
            if (literal_[++literal_pos_] == '\0') value_done();
            return true;
        case Mode::kAfterValue:
            return step_after_value(c);
        case Mode::kDone:
            return is_space(c);
    }
    return false;
}

bool JsonPrefixValidator::step_value(char c) {
    if (is_space(c)) return true;
    if (c == ']' && slot_ == ValueSlot::kArrayFirst) {
        stack_.pop_back();
        value_done();
        return true;
    }
    if (!start_value(c)) return false;
    started_ = true;
    return true;
}

bool JsonPrefixValidator::start_value(char c) {
    switch (c) {
        case '{':
        case '[':
            if (stack_.size() >= kMaxDepth) return false;
            stack_ += c == '{' ? 'o' : 'a';
            mode_ = c == '{' ? Mode::kKey : Mode::kValue;
            key_first_ = true;
            slot_ = ValueSlot::kArrayFirst;
            return true;
        case '"':
            mode_ = Mode::kString;
            string_is_key_ = false;
            return true;
        case '-':
            mode_ = Mode::kNumber;
            number_ = NumberPart::kMinus;
            return true;
        case 't':
        case 'f':
        case 'n':
            mode_ = Mode::kLiteral;
            literal_ = c == 't' ? "true" : c == 'f' ? "false" : "null";
            literal_pos_ = 1;
            return true;
        default:
            if (!is_digit(c)) return false;
            mode_ = Mode::kNumber;
            number_ = c == '0' ? NumberPart::kZero : NumberPart::kInt;
            return true;
    }
}

bool JsonPrefixValidator::step_number(char c) {
    switch (number_) {
        case NumberPart::kMinus:
            if (!is_digit(c)) return false;
            number_ = c == '0' ? NumberPart::kZero : NumberPart::kInt;
            return true;
        case NumberPart::kZero:
        case NumberPart::kInt:
        case NumberPart::kFraction:
            if (is_digit(c) && number_ != NumberPart::kZero) return true;
            if (c == '.' && number_ != NumberPart::kFraction) {
                number_ = NumberPart::kDot;
                return true;
            }
            if (c == 'e' || c == 'E') {
                number_ = NumberPart::kExp;
                return true;
            }
            return false;
        case NumberPart::kDot:
            if (!is_digit(c)) return false;
            number_ = NumberPart::kFraction;
            return true;
        case NumberPart::kExp:
            if (c == '+' || c == '-') {
                number_ = NumberPart::kExpSign;
                return true;
            }
            [[fallthrough]];
        case NumberPart::kExpSign:
        case NumberPart::kExpDigits:
            if (!is_digit(c)) return false;
            number_ = NumberPart::kExpDigits;
            return true;
    }
    return false;
}

bool JsonPrefixValidator::step_after_value(char c) {
    if (is_space(c)) return true;
    const char container = stack_.back();
    if (c == ',') {
        if (container == 'a') {
            mode_ = Mode::kValue;
            slot_ = ValueSlot::kArrayNext;
        } else {
            mode_ = Mode::kKey;
            key_first_ = false;
        }
        return true;
    }
    if ((c == ']' && container == 'a') || (c == '}' && container == 'o')) {
        stack_.pop_back();
        value_done();
        return true;
    }
    return false;
}

void JsonPrefixValidator::value_done() {
    mode_ = stack_.empty() ? Mode::kDone : Mode::kAfterValue;
}

bool JsonPrefixValidator::number_can_end() const {
    return number_ == NumberPart::kZero || number_ == NumberPart::kInt || number_ == NumberPart::kFraction ||
           number_ == NumberPart::kExpDigits;
}

bool JsonPrefixValidator::complete() const {
    return mode_ == Mode::kDone || (mode_ == Mode::kNumber && stack_.empty() && number_can_end());
}

std::string JsonPrefixValidator::completion() const {
    // Built with appends only (GCC 12 -O3 reports a false -Wrestrict on std::string assignment from literals).
    std::string out;
    const std::string_view key_tail = string_is_key_ ? "\": null" : "\"";
    switch (mode_) {
        case Mode::kValue:
            if (slot_ != ValueSlot::kArrayFirst) out.append("null");
            break;
        case Mode::kKey:
            if (!key_first_) out.append("\"\": null");
            break;
        case Mode::kColon:
            out.append(": null");
            break;
        case Mode::kString:
            out.append(key_tail);
            break;
        case Mode::kEscape:
            out.append("\\").append(key_tail);
            break;
        case Mode::kUnicode:
            out.append(4u - hex_digits_, '0').append(key_tail);
            break;
        case Mode::kNumber:
            if (!number_can_end()) out.append("0");
            break;
        case Mode::kLiteral:
            out.append(literal_ + literal_pos_);
            break;
        case Mode::kAfterValue:
        case Mode::kDone:
            break;
    }
    for (auto it = stack_.rbegin(); it != stack_.rend(); ++it) out.push_back(*it == 'a' ? ']' : '}');
    return out;
}

}  // namespace dsv4
