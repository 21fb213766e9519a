// Incremental JSON syntax check for tool-call parameter values written with string="false": the output parser streams
// such a value byte by byte while it is still the prefix of some JSON value, and repairs it when it stops being one.
#pragma once

#include <cstdint>
#include <string>

namespace dsv4 {

class JsonPrefixValidator {
  public:
    // Accepts one byte if the bytes so far plus this one are still a prefix of a JSON value (RFC 8259, one value,
    // surrounding whitespace allowed). On false the state is unchanged.
    bool feed(char c);

    bool started() const { return started_; }  // a non-whitespace byte was accepted
    bool complete() const;                     // the accepted bytes form one complete JSON value

    // Bytes that turn the accepted prefix into a complete JSON value: closes strings, finishes numbers and literals,
    // supplies null for a missing value, closes arrays and objects. "" when already complete.
    std::string completion() const;

    static constexpr std::size_t kMaxDepth = 512;

  private:
    enum class Mode : std::uint8_t {
        kValue,       // expecting a value
        kKey,         // in an object, expecting a key (or '}' right after '{')
        kColon,       // after a key
        kString,      // inside a string
        kEscape,      // after a backslash
        kUnicode,     // inside \uXXXX
        kNumber,      // inside a number
        kLiteral,     // inside true / false / null
        kAfterValue,  // after a value inside an array or object
        kDone,        // after the top-level value
    };
    enum class ValueSlot : std::uint8_t { kTop, kArrayFirst, kArrayNext, kObjectValue };
    enum class NumberPart : std::uint8_t { kMinus, kZero, kInt, kDot, kFraction, kExp, kExpSign, kExpDigits };

    bool step(char c);
    bool step_value(char c);
    bool start_value(char c);
    bool step_number(char c);
    bool step_after_value(char c);
    void value_done();
    bool number_can_end() const;

    Mode mode_ = Mode::kValue;
    ValueSlot slot_ = ValueSlot::kTop;
    NumberPart number_ = NumberPart::kInt;
    bool key_first_ = true;  // kKey: right after '{' ('}' allowed)
    bool string_is_key_ = false;
    std::uint8_t hex_digits_ = 0;  // kUnicode
    const char* literal_ = "";     // kLiteral: "true" / "false" / "null"
    std::uint8_t literal_pos_ = 0;
    bool started_ = false;
    std::string stack_;  // 'a' array, 'o' object
};

}  // namespace dsv4
