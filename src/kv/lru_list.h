// An intrusive doubly-linked list over the ids [0, n): O(1) insert at either end, removal of any member and pop of
// the oldest. The block and snapshot pools keep their eviction order in one (front = evicted first).
#pragma once

#include <cstdint>
#include <vector>

#include "core/error.h"

namespace dsv4 {

class LruList {
  public:
    explicit LruList(int32_t capacity) : prev_(capacity + 1, kNone), next_(capacity + 1, kNone), sentinel_(capacity) {
        prev_[sentinel_] = next_[sentinel_] = sentinel_;
    }

    bool contains(int32_t id) const { return next_[id] != kNone; }
    bool empty() const { return next_[sentinel_] == sentinel_; }
    int32_t size() const { return size_; }
    int32_t front() const { return empty() ? kNone : next_[sentinel_]; }

    void push_back(int32_t id) { insert_after(prev_[sentinel_], id); }
    void push_front(int32_t id) { insert_after(sentinel_, id); }
    void remove(int32_t id) {
        DSV4_CHECK(contains(id), "lru list: id {} is not a member", id);
        next_[prev_[id]] = next_[id];
        prev_[next_[id]] = prev_[id];
        prev_[id] = next_[id] = kNone;
        --size_;
    }
    // Removes and returns the front member (kNone when empty).
    int32_t pop_front() {
        const int32_t id = front();
        if (id != kNone) remove(id);
        return id;
    }

    static constexpr int32_t kNone = -1;

  private:
    void insert_after(int32_t at, int32_t id) {
        DSV4_CHECK(id >= 0 && id < sentinel_ && !contains(id), "lru list: cannot insert id {}", id);
        prev_[id] = at;
        next_[id] = next_[at];
        prev_[next_[at]] = id;
        next_[at] = id;
        ++size_;
    }

    std::vector<int32_t> prev_, next_;
    int32_t sentinel_;
    int32_t size_ = 0;
};

}  // namespace dsv4
