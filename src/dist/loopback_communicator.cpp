#include "dist/loopback_communicator.h"

#include <condition_variable>
#include <cstring>
#include <mutex>
#include <numeric>
#include <string>

namespace dsv4::dist {
namespace {

// What one rank posted for the collective in progress.
struct Post {
    const char* op = "";
    uint64_t seq = 0;
    CommDtype dtype = CommDtype::kU8;
    const void* send = nullptr;
    std::vector<int64_t> send_counts;  // all_to_all_v: per destination
    std::vector<int64_t> recv_counts;  // all_to_all_v: per source
    int64_t count = 0;                 // all_gather / all_reduce_sum
};

class Hub {
  public:
    Hub(int ranks, std::chrono::milliseconds timeout)
        : ranks_(ranks), timeout_(timeout), posts_(ranks), here_(ranks, false) {}

    Post& post(int rank) { return posts_[rank]; }
    const Post& post(int rank) const { return posts_[rank]; }
    int ranks() const { return ranks_; }

    // Returns once every rank has arrived; throws CommError after an abort or the timeout.
    void arrive_and_wait(int rank, const Post& mine) {
        std::unique_lock lock(mutex_);
        if (aborted_) throw CommError(abort_message_);
        here_[rank] = true;
        if (++arrived_ == ranks_) {
            arrived_ = 0;
            std::fill(here_.begin(), here_.end(), false);
            ++generation_;
            cv_.notify_all();
            return;
        }
        const uint64_t gen = generation_;
        const bool done = cv_.wait_for(lock, timeout_, [&] { return generation_ != gen || aborted_; });
        if (generation_ != gen) return;
        if (!done && !aborted_) {
            std::string missing;
            for (int r = 0; r < ranks_; ++r) {
                if (!here_[r]) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
            }
            abort_locked(fmt::format("rank {}: collective #{} ({}) timed out after {} ms waiting for rank(s) {}", rank,
                                     mine.seq, mine.op, timeout_.count(), missing));
        }
        throw CommError(abort_message_);
    }

    void abort(const std::string& message) {
        std::lock_guard lock(mutex_);
        abort_locked(message);
    }

  private:
    void abort_locked(const std::string& message) {
        if (!aborted_) {
            aborted_ = true;
            abort_message_ = message;
        }
        cv_.notify_all();
    }

    const int ranks_;
    const std::chrono::milliseconds timeout_;
    std::vector<Post> posts_;
    std::mutex mutex_;
    std::condition_variable cv_;
    int arrived_ = 0;
    uint64_t generation_ = 0;
    std::vector<bool> here_;
    bool aborted_ = false;
    std::string abort_message_;
};

template <typename T>
void add_into(T* acc, const void* src, int64_t count) {
    const T* s = static_cast<const T*>(src);
    for (int64_t i = 0; i < count; ++i) acc[i] += s[i];
}

class LoopbackCommunicator final : public Communicator {
  public:
    LoopbackCommunicator(std::shared_ptr<Hub> hub, int rank) : hub_(std::move(hub)), rank_(rank) {}

    int rank() const override { return rank_; }
    int size() const override { return hub_->ranks(); }
    std::string name() const override { return "loopback"; }
    CommMemory memory() const override { return CommMemory::kHost; }

    void all_to_all_v(const void* send, std::span<const int64_t> send_counts, void* recv,
                      std::span<const int64_t> recv_counts, CommDtype dtype) override {
        const int n = size();
        DSV4_CHECK(static_cast<int>(send_counts.size()) == n && static_cast<int>(recv_counts.size()) == n,
                   "all_to_all_v: {} send / {} receive counts for {} ranks", send_counts.size(), recv_counts.size(), n);
        Post& p = begin("all_to_all_v", dtype);
        p.send = send;
        p.send_counts.assign(send_counts.begin(), send_counts.end());
        p.recv_counts.assign(recv_counts.begin(), recv_counts.end());
        rendezvous(p);
        check_counts_agree(p);
        const size_t bytes = comm_dtype_bytes(dtype);
        int64_t recv_offset = 0;
        for (int src = 0; src < n; ++src) {
            const Post& q = hub_->post(src);
            const int64_t send_offset =
                std::accumulate(q.send_counts.begin(), q.send_counts.begin() + rank_, int64_t{0});
            if (recv_counts[src] > 0) {
                std::memcpy(static_cast<char*>(recv) + recv_offset * bytes,
                            static_cast<const char*>(q.send) + send_offset * bytes, recv_counts[src] * bytes);
            }
            recv_offset += recv_counts[src];
        }
        rendezvous_end(p);
    }

    void all_gather(const void* send, int64_t count, void* recv, CommDtype dtype) override {
        Post& p = begin("all_gather", dtype);
        p.send = send;
        p.count = count;
        rendezvous(p);
        check_same_count(p);
        const size_t bytes = comm_dtype_bytes(dtype) * static_cast<size_t>(count);
        for (int src = 0; src < size(); ++src) {
            const Post& q = hub_->post(src);
            if (bytes > 0) std::memcpy(static_cast<char*>(recv) + src * bytes, q.send, bytes);
        }
        rendezvous_end(p);
    }

    void all_reduce_sum(void* buf, int64_t count, CommDtype dtype) override {
        DSV4_CHECK(dtype != CommDtype::kU8, "all_reduce_sum: bytes cannot be summed");
        Post& p = begin("all_reduce_sum", dtype);
        p.send = buf;
        p.count = count;
        rendezvous(p);
        check_same_count(p);
        std::vector<char> acc(comm_dtype_bytes(dtype) * static_cast<size_t>(count), 0);
        for (int src = 0; src < size(); ++src) {  // rank order: every rank sums the same way
            const Post& q = hub_->post(src);
            switch (dtype) {
                case CommDtype::kF32:
                    add_into(reinterpret_cast<float*>(acc.data()), q.send, count);
                    break;
                case CommDtype::kI32:
                    add_into(reinterpret_cast<int32_t*>(acc.data()), q.send, count);
                    break;
                default:
                    add_into(reinterpret_cast<int64_t*>(acc.data()), q.send, count);
                    break;
            }
        }
        rendezvous_end(p);  // every rank has read every buffer: now each may overwrite its own
        if (!acc.empty()) std::memcpy(buf, acc.data(), acc.size());
    }

    void barrier() override {
        Post& p = begin("barrier", CommDtype::kU8);
        rendezvous(p);
        rendezvous_end(p);
    }

    void abort(const std::string& reason) override { hub_->abort(fmt::format("rank {} stopped: {}", rank_, reason)); }

  private:
    Post& begin(const char* op, CommDtype dtype) {
        Post& p = hub_->post(rank_);
        p.op = op;
        p.seq = ++seq_;
        p.dtype = dtype;
        p.send = nullptr;
        p.send_counts.clear();
        p.recv_counts.clear();
        p.count = 0;
        return p;
    }

    // Waits for every rank, then checks they all entered the same collective.
    void rendezvous(const Post& mine) {
        hub_->arrive_and_wait(rank_, mine);
        check_same(mine);
    }

    // The closing rendezvous of a collective: after it a peer may post its next collective, so nothing is read.
    void rendezvous_end(const Post& mine) { hub_->arrive_and_wait(rank_, mine); }

    void check_same(const Post& mine) {
        for (int src = 0; src < size(); ++src) {
            const Post& q = hub_->post(src);
            if (q.seq != mine.seq || std::strcmp(q.op, mine.op) != 0 || q.dtype != mine.dtype) {
                fail_all(fmt::format("collective mismatch: rank {} is in #{} ({}), rank {} in #{} ({})", src, q.seq,
                                     q.op, rank_, mine.seq, mine.op));
            }
        }
    }

    // The checks below look only at what every rank sees alike (all the posts), before any rank reads a peer's
    // buffer: on a mismatch every rank fails, and none reads a buffer that a failed rank has already released.

    // all_to_all_v: what each rank sends each other rank is what that rank expects from it.
    void check_counts_agree(const Post& mine) {
        for (int src = 0; src < size(); ++src) {
            for (int dst = 0; dst < size(); ++dst) {
                const int64_t sent = hub_->post(src).send_counts[dst], expected = hub_->post(dst).recv_counts[src];
                if (sent != expected) {
                    fail_all(fmt::format("{} #{}: rank {} sends {} elements to rank {}, which expects {}", mine.op,
                                         mine.seq, src, sent, dst, expected));
                }
            }
        }
    }

    // all_gather / all_reduce_sum: every rank has the same element count.
    void check_same_count(const Post& mine) {
        for (int src = 1; src < size(); ++src) {
            const Post& q = hub_->post(src);
            if (q.count != hub_->post(0).count) {
                fail_all(fmt::format("{} #{}: rank {} has {} elements, rank 0 {}", mine.op, mine.seq, src, q.count,
                                     hub_->post(0).count));
            }
        }
    }

    [[noreturn]] void fail_all(const std::string& message) {
        hub_->abort(message);
        throw CommError(message);
    }

    std::shared_ptr<Hub> hub_;
    const int rank_;
    uint64_t seq_ = 0;
};

}  // namespace

std::vector<std::unique_ptr<Communicator>> make_loopback_group(int ranks, std::chrono::milliseconds timeout) {
    DSV4_CHECK(ranks >= 1, "loopback group: {} ranks (at least 1)", ranks);
    auto hub = std::make_shared<Hub>(ranks, timeout);
    std::vector<std::unique_ptr<Communicator>> group;
    for (int r = 0; r < ranks; ++r) group.push_back(std::make_unique<LoopbackCommunicator>(hub, r));
    return group;
}

}  // namespace dsv4::dist
