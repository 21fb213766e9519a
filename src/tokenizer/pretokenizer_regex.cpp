#include "tokenizer/pretokenizer_regex.h"

#include <oniguruma.h>

#include <mutex>
#include <optional>

#include "core/error.h"
#include "tokenizer/unicode.h"

namespace dsv4::tokenizer {
namespace {

std::string onig_message(int code, OnigErrorInfo* info) {
    UChar buffer[ONIG_MAX_ERROR_MESSAGE_LEN];
    const int length = info ? onig_error_code_to_str(buffer, code, info) : onig_error_code_to_str(buffer, code);
    return std::string(reinterpret_cast<const char*>(buffer), static_cast<size_t>(length > 0 ? length : 0));
}

// One match region per thread: the compiled regex is shared, the region is per search.
struct ThreadRegion {
    OnigRegion* region = onig_region_new();
    ~ThreadRegion() { onig_region_free(region, 1); }
};

OnigRegion* thread_region() {
    thread_local ThreadRegion holder;
    return holder.region;
}

}  // namespace

void ensure_oniguruma_initialized() {
    static std::once_flag once;
    std::call_once(once, [] {
        OnigEncoding encodings[] = {ONIG_ENCODING_UTF8};
        onig_initialize(encodings, 1);
    });
}

OnigRegex::OnigRegex(std::string_view pattern) : pattern_(pattern) {
    ensure_oniguruma_initialized();
    regex_t* compiled = nullptr;
    OnigErrorInfo error_info;
    const auto* begin = reinterpret_cast<const UChar*>(pattern_.data());
    const int rc = onig_new(&compiled, begin, begin + pattern_.size(), ONIG_OPTION_NONE, ONIG_ENCODING_UTF8,
                            ONIG_SYNTAX_DEFAULT, &error_info);
    if (rc != ONIG_NORMAL) fail("tokenizer: regex /{}/ does not compile: {}", pattern_, onig_message(rc, &error_info));
    regex_ = compiled;
}

OnigRegex::~OnigRegex() {
    if (regex_) onig_free(static_cast<regex_t*>(regex_));
}

void OnigRegex::for_each_match(std::string_view text, const std::function<void(size_t, size_t)>& on_match) const {
    auto* regex = static_cast<regex_t*>(regex_);
    OnigRegion* region = thread_region();
    const auto* begin = reinterpret_cast<const UChar*>(text.data());
    const auto* end = begin + text.size();
    size_t search_from = 0;
    std::optional<size_t> last_match_end;
    while (search_from <= text.size()) {
        onig_region_clear(region);
        const int rc = onig_search(regex, begin, end, begin + search_from, end, region, ONIG_OPTION_NONE);
        if (rc == ONIG_MISMATCH) return;
        if (rc < 0) fail("tokenizer: regex /{}/ failed: {}", pattern_, onig_message(rc, nullptr));
        const auto match_begin = static_cast<size_t>(region->beg[0]);
        const auto match_end = static_cast<size_t>(region->end[0]);
        if (match_begin == match_end && last_match_end == match_end) {
            if (search_from >= text.size()) return;
            int length = 1;
            decode_utf8_at(text, search_from, length);
            search_from += static_cast<size_t>(length);
            continue;
        }
        on_match(match_begin, match_end);
        search_from = match_end;
        last_match_end = match_end;
    }
}

}  // namespace dsv4::tokenizer
