// ByteSet: a set of byte values (0..255) as four 64-bit words. The grammar IR's only terminal is "one byte in this
// set"; characters, strings and classes are all built from it (src/structured/utf8_ranges.h).
#pragma once

#include <array>
#include <cstdint>

namespace dsv4::structured {

class ByteSet {
  public:
    constexpr ByteSet() = default;

    static ByteSet single(uint8_t byte) {
        ByteSet set;
        set.insert(byte);
        return set;
    }
    static ByteSet range(uint8_t lo, uint8_t hi) {
        ByteSet set;
        for (unsigned b = lo; b <= hi; ++b) set.insert(static_cast<uint8_t>(b));
        return set;
    }
    static ByteSet all() { return range(0, 255); }

    void insert(uint8_t byte) { words_[byte >> 6] |= uint64_t{1} << (byte & 63); }
    void erase(uint8_t byte) { words_[byte >> 6] &= ~(uint64_t{1} << (byte & 63)); }
    bool contains(uint8_t byte) const { return (words_[byte >> 6] >> (byte & 63)) & 1; }
    bool empty() const { return (words_[0] | words_[1] | words_[2] | words_[3]) == 0; }

    ByteSet& operator|=(const ByteSet& other) {
        for (int i = 0; i < 4; ++i) words_[i] |= other.words_[i];
        return *this;
    }
    ByteSet complement() const {
        ByteSet out;
        for (int i = 0; i < 4; ++i) out.words_[i] = ~words_[i];
        return out;
    }
    bool operator==(const ByteSet&) const = default;
    const std::array<uint64_t, 4>& words() const { return words_; }

  private:
    std::array<uint64_t, 4> words_{};
};

}  // namespace dsv4::structured
