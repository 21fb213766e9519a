#include "tokenizer/unicode.h"

namespace dsv4::tokenizer {
namespace {

// The well-formed UTF-8 table (Unicode 15, table 3-7): for a lead byte, how many continuation bytes follow and
// the allowed range of the first continuation byte (the others are always 80..BF).
struct LeadInfo {
    int continuation_count;  // -1: the byte can never start a sequence
    uint8_t second_low;
    uint8_t second_high;
};

LeadInfo lead_info(uint8_t byte) {
    if (byte < 0x80) return {0, 0, 0};
    if (byte < 0xC2) return {-1, 0, 0};
    if (byte < 0xE0) return {1, 0x80, 0xBF};
    if (byte == 0xE0) return {2, 0xA0, 0xBF};
    if (byte == 0xED) return {2, 0x80, 0x9F};
    if (byte < 0xF0) return {2, 0x80, 0xBF};
    if (byte == 0xF0) return {3, 0x90, 0xBF};
    if (byte < 0xF4) return {3, 0x80, 0xBF};
    if (byte == 0xF4) return {3, 0x80, 0x8F};
    return {-1, 0, 0};
}

bool continuation_ok(const LeadInfo& info, int index, uint8_t byte) {
    if (index == 1) return byte >= info.second_low && byte <= info.second_high;
    return byte >= 0x80 && byte <= 0xBF;
}

enum class SequenceStatus { kComplete, kInvalid, kTruncated };

// Examines the sequence starting at data[0]; `length` receives the bytes consumed: the whole sequence when
// complete, the maximal valid prefix (>= 1) when invalid, and everything available when truncated.
SequenceStatus examine_sequence(const uint8_t* data, size_t available, size_t& length) {
    const LeadInfo info = lead_info(data[0]);
    if (info.continuation_count < 0) {
        length = 1;
        return SequenceStatus::kInvalid;
    }
    for (int i = 1; i <= info.continuation_count; ++i) {
        if (static_cast<size_t>(i) >= available) {
            length = available;
            return SequenceStatus::kTruncated;
        }
        if (!continuation_ok(info, i, data[i])) {
            length = static_cast<size_t>(i);
            return SequenceStatus::kInvalid;
        }
    }
    length = static_cast<size_t>(info.continuation_count) + 1;
    return SequenceStatus::kComplete;
}

const uint8_t* as_bytes(std::string_view text) {
    return reinterpret_cast<const uint8_t*>(text.data());
}

}  // namespace

std::optional<size_t> find_invalid_utf8(std::string_view text) {
    const uint8_t* data = as_bytes(text);
    size_t pos = 0;
    while (pos < text.size()) {
        if (data[pos] < 0x80) {
            ++pos;
            continue;
        }
        size_t length = 0;
        if (examine_sequence(data + pos, text.size() - pos, length) != SequenceStatus::kComplete) return pos;
        pos += length;
    }
    return std::nullopt;
}

char32_t decode_utf8_at(std::string_view text, size_t pos, int& length) {
    const uint8_t* data = as_bytes(text) + pos;
    const uint8_t lead = data[0];
    if (lead < 0x80) {
        length = 1;
        return lead;
    }
    if (lead < 0xE0) {
        length = 2;
        return (char32_t{lead & 0x1Fu} << 6) | (data[1] & 0x3Fu);
    }
    if (lead < 0xF0) {
        length = 3;
        return (char32_t{lead & 0x0Fu} << 12) | (char32_t{data[1] & 0x3Fu} << 6) | (data[2] & 0x3Fu);
    }
    length = 4;
    return (char32_t{lead & 0x07u} << 18) | (char32_t{data[1] & 0x3Fu} << 12) | (char32_t{data[2] & 0x3Fu} << 6) |
           (data[3] & 0x3Fu);
}

void append_utf8(std::string& out, char32_t cp) {
    if (cp < 0x80) {
        out.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
        out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
        out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
        out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
}

size_t Utf8Sanitizer::complete_pending(std::string_view bytes, std::string& out) {
    // Re-examine pending + new bytes; at most 3 new bytes can matter for the pending sequence.
    uint8_t buffer[8];
    const size_t take = bytes.size() < 4 ? bytes.size() : 4;
    for (int i = 0; i < pending_size_; ++i) buffer[i] = static_cast<uint8_t>(pending_[i]);
    for (size_t i = 0; i < take; ++i) buffer[pending_size_ + i] = static_cast<uint8_t>(bytes[i]);
    const size_t available = static_cast<size_t>(pending_size_) + take;
    size_t length = 0;
    const SequenceStatus status = examine_sequence(buffer, available, length);
    if (status == SequenceStatus::kTruncated) {
        for (size_t i = 0; i < take && pending_size_ < 3; ++i) pending_[pending_size_++] = bytes[i];
        return take;
    }
    // The pending bytes were a valid prefix, so `length` is at least pending_size_.
    if (status == SequenceStatus::kComplete) {
        out.append(reinterpret_cast<const char*>(buffer), length);
    } else {
        out.append(kReplacementCharacter);
    }
    const size_t used = length - static_cast<size_t>(pending_size_);
    pending_size_ = 0;
    return used;
}

void Utf8Sanitizer::push(std::string_view bytes, std::string& out) {
    size_t pos = 0;
    if (pending_size_ > 0) {
        pos = complete_pending(bytes, out);
        if (pending_size_ > 0) return;
    }
    const uint8_t* data = as_bytes(bytes);
    size_t run_start = pos;  // start of a run of valid bytes copied in one append
    while (pos < bytes.size()) {
        if (data[pos] < 0x80) {
            ++pos;
            continue;
        }
        size_t length = 0;
        const SequenceStatus status = examine_sequence(data + pos, bytes.size() - pos, length);
        if (status == SequenceStatus::kComplete) {
            pos += length;
            continue;
        }
        out.append(bytes.data() + run_start, pos - run_start);
        if (status == SequenceStatus::kTruncated) {
            // A truncated sequence is at most 3 bytes; the bound also keeps the copy provably in range.
            const size_t kept = length < sizeof(pending_) ? length : sizeof(pending_) - 1;
            for (size_t i = 0; i < kept; ++i) pending_[i] = bytes[pos + i];
            pending_size_ = static_cast<int>(kept);
            return;
        }
        out.append(kReplacementCharacter);
        pos += length;
        run_start = pos;
    }
    out.append(bytes.data() + run_start, pos - run_start);
}

void Utf8Sanitizer::finish(std::string& out) {
    if (pending_size_ > 0) out.append(kReplacementCharacter);
    pending_size_ = 0;
}

std::string utf8_lossy(std::string_view bytes) {
    std::string out;
    out.reserve(bytes.size());
    Utf8Sanitizer sanitizer;
    sanitizer.push(bytes, out);
    sanitizer.finish(out);
    return out;
}

}  // namespace dsv4::tokenizer
