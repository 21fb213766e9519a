#include "tokenizer/bpe.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/byte_level.h"

namespace dsv4::tokenizer {
namespace {

uint64_t pair_key(int32_t left, int32_t right) {
    return (uint64_t{static_cast<uint32_t>(left)} << 32) | static_cast<uint32_t>(right);
}

}  // namespace

// ---- MergeTable ----------------------------------------------------------------------------------------------

MergeTable::MergeTable(size_t expected_entries) {
    size_t capacity = 16;
    while (capacity < expected_entries * 2) capacity *= 2;
    slots_.assign(capacity, Slot{kEmpty, {0, 0}});
    mask_ = capacity - 1;
}

size_t MergeTable::slot_of(uint64_t key) const {
    return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> 20) & mask_;
}

void MergeTable::insert(int32_t left, int32_t right, Merge merge) {
    if ((size_ + 1) * 2 > slots_.size()) {
        MergeTable bigger(slots_.size());
        for (const Slot& s : slots_)
            if (s.key != kEmpty) bigger.insert(static_cast<int32_t>(s.key >> 32), static_cast<int32_t>(s.key), s.merge);
        *this = std::move(bigger);
    }
    const uint64_t key = pair_key(left, right);
    for (size_t i = slot_of(key);; i = (i + 1) & mask_) {
        if (slots_[i].key == key) {
            slots_[i].merge = merge;
            return;
        }
        if (slots_[i].key == kEmpty) {
            slots_[i] = {key, merge};
            ++size_;
            return;
        }
    }
}

const MergeTable::Merge* MergeTable::find(int32_t left, int32_t right) const {
    const uint64_t key = pair_key(left, right);
    for (size_t i = slot_of(key);; i = (i + 1) & mask_) {
        if (slots_[i].key == key) return &slots_[i].merge;
        if (slots_[i].key == kEmpty) return nullptr;
    }
}

// ---- BpeCache: results for repeated pieces ------------------------------------------------------------------
// Direct-mapped and thread-local, so lookups take no lock: each thread keeps its own slots, tagged with the owning
// model's serial number (never reused), so several tokenizers can share a thread safely.

class BpeCache {
  public:
    static constexpr size_t kMaxPieceBytes = 48;
    static constexpr size_t kMaxIds = 12;

    BpeCache() : serial_(next_serial().fetch_add(1) + 1) {}

    bool lookup(std::string_view piece, std::vector<int32_t>& out) const {
        const uint64_t hash = hash_of(piece);
        const Slot& slot = slots()[hash & (kSlots - 1)];
        if (slot.owner != serial_ || slot.hash != hash || slot.key_size != piece.size() ||
            std::memcmp(slot.key, piece.data(), piece.size()) != 0)
            return false;
        out.insert(out.end(), slot.ids, slot.ids + slot.id_count);
        return true;
    }

    void store(std::string_view piece, const int32_t* ids, size_t count) const {
        if (piece.size() > kMaxPieceBytes || count > kMaxIds) return;
        const uint64_t hash = hash_of(piece);
        Slot& slot = slots()[hash & (kSlots - 1)];
        slot.owner = serial_;
        slot.hash = hash;
        slot.key_size = static_cast<uint8_t>(piece.size());
        std::memcpy(slot.key, piece.data(), piece.size());
        slot.id_count = static_cast<uint8_t>(count);
        std::copy(ids, ids + count, slot.ids);
    }

  private:
    static constexpr size_t kSlots = 1 << 13;  // about 1 MB per thread
    struct Slot {
        uint64_t owner = 0;
        uint64_t hash = 0;
        uint8_t key_size = 0;
        uint8_t id_count = 0;
        char key[kMaxPieceBytes];
        int32_t ids[kMaxIds];
    };

    static std::atomic<uint64_t>& next_serial() {
        static std::atomic<uint64_t> serial{0};
        return serial;
    }
    static Slot* slots() {
        thread_local std::vector<Slot> table(kSlots);
        return table.data();
    }
    // FNV-1a: pieces are short, so a byte loop beats heavier hashes.
    static uint64_t hash_of(std::string_view piece) {
        uint64_t h = 0xcbf29ce484222325ull;
        for (char c : piece) h = (h ^ static_cast<uint8_t>(c)) * 0x100000001b3ull;
        return h ^ (h >> 29);
    }

    uint64_t serial_;
};

// ---- BpeModel ------------------------------------------------------------------------------------------------

BpeModel::BpeModel() : cache_(std::make_unique<BpeCache>()) {}
BpeModel::BpeModel(BpeModel&&) noexcept = default;
BpeModel& BpeModel::operator=(BpeModel&&) noexcept = default;
BpeModel::~BpeModel() = default;

namespace {

void check_model_options(const nlohmann::json& model) {
    if (!model.is_object()) fail("tokenizer: \"model\" is not an object");
    const std::string type = model.value("type", std::string("BPE"));
    if (type != "BPE") fail("tokenizer: model type '{}' is not supported (only BPE)", type);
    if (model.contains("dropout") && !model["dropout"].is_null())
        fail("tokenizer: BPE dropout is not supported (got {})", model["dropout"].dump());
    for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
        if (model.contains(key) && !model[key].is_null() && model[key] != "")
            fail("tokenizer: BPE option {} is not supported (got {})", key, model[key].dump());
    }
    if (!model.contains("vocab") || !model["vocab"].is_object()) fail("tokenizer: BPE model has no \"vocab\" object");
    if (!model.contains("merges") || !model["merges"].is_array()) fail("tokenizer: BPE model has no \"merges\" array");
}

// A merge entry is "left right" or ["left", "right"].
std::pair<std::string, std::string> merge_parts(const nlohmann::json& entry, size_t index) {
    if (entry.is_array() && entry.size() == 2 && entry[0].is_string() && entry[1].is_string())
        return {entry[0].get<std::string>(), entry[1].get<std::string>()};
    if (entry.is_string()) {
        const std::string text = entry.get<std::string>();
        const size_t space = text.find(' ');
        if (space != std::string::npos && text.find(' ', space + 1) == std::string::npos)
            return {text.substr(0, space), text.substr(space + 1)};
    }
    fail("tokenizer: merge #{} is neither \"a b\" nor [\"a\", \"b\"]: {}", index, entry.dump());
}

}  // namespace

BpeModel BpeModel::from_json(const nlohmann::json& model) {
    check_model_options(model);
    BpeModel result;
    result.ignore_merges_ = model.value("ignore_merges", false);
    int32_t limit = 0;
    for (const auto& [token, id_json] : model["vocab"].items()) {
        if (!id_json.is_number_integer() || id_json.get<int64_t>() < 0 || id_json.get<int64_t>() >= kMaxTokenId)
            fail("tokenizer: vocab entry '{}' has an invalid id {}", token, id_json.dump());
        const auto id = id_json.get<int32_t>();
        result.vocab_.emplace(token, id);
        limit = std::max(limit, id + 1);
    }
    result.tokens_.assign(static_cast<size_t>(limit), std::string());
    result.has_token_.assign(static_cast<size_t>(limit), false);
    for (const auto& [token, id] : result.vocab_) {
        if (result.has_token_[static_cast<size_t>(id)])
            fail("tokenizer: vocab id {} is used by two tokens ('{}' and '{}')", id, result.tokens_[id], token);
        result.tokens_[static_cast<size_t>(id)] = token;
        result.has_token_[static_cast<size_t>(id)] = true;
    }
    for (int byte = 0; byte < 256; ++byte) {
        const std::string symbol = byte_level_encode(std::string(1, static_cast<char>(byte)));
        const auto it = result.vocab_.find(symbol);
        if (it == result.vocab_.end())
            fail("tokenizer: vocabulary lacks the byte-level token for byte 0x{:02X} ('{}')", byte, symbol);
        result.byte_ids_[static_cast<size_t>(byte)] = it->second;
    }
    const auto& merges = model["merges"];
    result.merges_ = MergeTable(merges.size());
    for (size_t rank = 0; rank < merges.size(); ++rank) {
        const auto [left, right] = merge_parts(merges[rank], rank);
        const auto left_it = result.vocab_.find(left);
        const auto right_it = result.vocab_.find(right);
        const auto merged_it = result.vocab_.find(left + right);
        if (left_it == result.vocab_.end() || right_it == result.vocab_.end() || merged_it == result.vocab_.end())
            fail("tokenizer: merge #{} ('{}' '{}') uses a token that is not in the vocabulary", rank, left, right);
        result.merges_.insert(left_it->second, right_it->second, {static_cast<int32_t>(rank), merged_it->second});
    }
    return result;
}

std::optional<int32_t> BpeModel::token_to_id(std::string_view token) const {
    const auto it = vocab_.find(std::string(token));
    if (it == vocab_.end()) return std::nullopt;
    return it->second;
}

const std::string* BpeModel::id_to_token(int32_t id) const {
    if (id < 0 || id >= id_limit() || !has_token_[static_cast<size_t>(id)]) return nullptr;
    return &tokens_[static_cast<size_t>(id)];
}

void BpeModel::encode_piece(std::string_view bytes, std::vector<int32_t>& out) const {
    if (bytes.empty()) return;
    if (bytes.size() == 1) {
        out.push_back(byte_ids_[static_cast<uint8_t>(bytes[0])]);
        return;
    }
    if (ignore_merges_) {
        if (const auto id = token_to_id(byte_level_encode(bytes))) {
            out.push_back(*id);
            return;
        }
    }
    const bool cacheable = bytes.size() <= BpeCache::kMaxPieceBytes;
    if (cacheable && cache_->lookup(bytes, out)) return;
    const size_t first = out.size();
    merge_bytes(bytes, out);
    if (cacheable) cache_->store(bytes, out.data() + first, out.size() - first);
}

// The HF merge loop: repeatedly apply the lowest-rank merge among adjacent symbols, leftmost first. Symbols form
// a linked list over the byte positions; a min-heap holds candidate merges, and entries whose pair changed since
// they were pushed are skipped when popped.
void BpeModel::merge_bytes(std::string_view bytes, std::vector<int32_t>& out) const {
    struct Symbol {
        int32_t id;
        int32_t prev;
        int32_t next;
        bool alive;
    };
    struct Candidate {
        int32_t rank;
        int32_t pos;
        int32_t merged_id;
        bool operator>(const Candidate& other) const {
            return rank != other.rank ? rank > other.rank : pos > other.pos;
        }
    };
    thread_local std::vector<Symbol> symbols;
    thread_local std::vector<Candidate> heap;  // a min-heap through std::push_heap / std::pop_heap
    const auto n = static_cast<int32_t>(bytes.size());
    symbols.resize(static_cast<size_t>(n));
    for (int32_t i = 0; i < n; ++i)
        symbols[static_cast<size_t>(i)] = {byte_ids_[static_cast<uint8_t>(bytes[static_cast<size_t>(i)])], i - 1,
                                           i + 1 < n ? i + 1 : -1, true};
    heap.clear();
    const auto later = [](const Candidate& a, const Candidate& b) { return a > b; };
    auto push_candidate = [&](int32_t pos) {
        const Symbol& left = symbols[static_cast<size_t>(pos)];
        if (left.next < 0) return;
        if (const MergeTable::Merge* m = merges_.find(left.id, symbols[static_cast<size_t>(left.next)].id)) {
            heap.push_back({m->rank, pos, m->merged_id});
            std::push_heap(heap.begin(), heap.end(), later);
        }
    };
    for (int32_t i = 0; i + 1 < n; ++i) push_candidate(i);
    while (!heap.empty()) {
        std::pop_heap(heap.begin(), heap.end(), later);
        const Candidate top = heap.back();
        heap.pop_back();
        Symbol& left = symbols[static_cast<size_t>(top.pos)];
        if (!left.alive || left.next < 0) continue;
        Symbol& right = symbols[static_cast<size_t>(left.next)];
        const MergeTable::Merge* current = merges_.find(left.id, right.id);
        if (current == nullptr || current->merged_id != top.merged_id) continue;  // stale entry
        left.id = top.merged_id;
        right.alive = false;
        left.next = right.next;
        if (right.next >= 0) symbols[static_cast<size_t>(right.next)].prev = top.pos;
        if (left.prev >= 0) push_candidate(left.prev);
        push_candidate(top.pos);
    }
    for (int32_t i = 0; i >= 0; i = symbols[static_cast<size_t>(i)].next)
        out.push_back(symbols[static_cast<size_t>(i)].id);
}

}  // namespace dsv4::tokenizer
