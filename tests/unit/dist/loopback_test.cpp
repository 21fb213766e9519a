// The loopback communicator: every collective on random data against a direct computation, and the failure model
// (a rank that aborts ends its peers' collectives with a clear CommError; a missing rank times out; mismatched
// collectives are caught).
#include <gtest/gtest.h>

#include <random>
#include <thread>

#include "dist/loopback_communicator.h"
#include "dist/rank_group.h"

namespace dsv4::dist {
namespace {

std::vector<Communicator*> raw(const std::vector<std::unique_ptr<Communicator>>& group) {
    std::vector<Communicator*> out;
    for (const auto& c : group) out.push_back(c.get());
    return out;
}

TEST(Loopback, AllToAllVMatchesDirectRouting) {
    for (int n : {1, 2, 4}) {
        auto group = make_loopback_group(n);
        std::mt19937 rng(n);
        std::uniform_int_distribution<int> count(0, 5);
        // counts[s][d]: elements rank s sends rank d; element value encodes (s, d, i).
        std::vector<std::vector<int64_t>> counts(n, std::vector<int64_t>(n));
        for (auto& row : counts)
            for (auto& c : row) c = count(rng);
        std::vector<std::vector<int32_t>> got(n);
        run_ranks(raw(group), [&](int r) {
            std::vector<int32_t> send;
            for (int d = 0; d < n; ++d)
                for (int i = 0; i < counts[r][d]; ++i) send.push_back(r * 10000 + d * 100 + i);
            std::vector<int64_t> recv_counts(n);
            for (int s = 0; s < n; ++s) recv_counts[s] = counts[s][r];
            std::vector<int32_t> recv(std::accumulate(recv_counts.begin(), recv_counts.end(), size_t{0}));
            group[r]->all_to_all_v(send.data(), counts[r], recv.data(), recv_counts, CommDtype::kI32);
            got[r] = recv;
        });
        for (int r = 0; r < n; ++r) {
            std::vector<int32_t> want;
            for (int s = 0; s < n; ++s)
                for (int i = 0; i < counts[s][r]; ++i) want.push_back(s * 10000 + r * 100 + i);
            EXPECT_EQ(got[r], want) << "ranks " << n << " rank " << r;
        }
    }
}

TEST(Loopback, AllGatherAndAllReduce) {
    const int n = 4;
    auto group = make_loopback_group(n);
    std::vector<std::vector<float>> gathered(n), summed(n);
    std::vector<std::vector<int64_t>> counters(n);
    run_ranks(raw(group), [&](int r) {
        std::vector<float> mine = {static_cast<float>(r), static_cast<float>(r) + 0.5f};
        gathered[r].resize(2 * n);
        group[r]->all_gather(mine.data(), 2, gathered[r].data(), CommDtype::kF32);
        summed[r] = {1.0f * r, 2.0f * r, 0.25f};
        group[r]->all_reduce_sum(summed[r].data(), 3, CommDtype::kF32);
        counters[r] = {int64_t{1} << 40, r};
        group[r]->all_reduce_sum(counters[r].data(), 2, CommDtype::kI64);
        group[r]->barrier();
    });
    for (int r = 0; r < n; ++r) {
        for (int s = 0; s < n; ++s) {
            EXPECT_EQ(gathered[r][2 * s], static_cast<float>(s));
            EXPECT_EQ(gathered[r][2 * s + 1], static_cast<float>(s) + 0.5f);
        }
        EXPECT_EQ(summed[r], (std::vector<float>{6.0f, 12.0f, 1.0f}));
        EXPECT_EQ(counters[r], (std::vector<int64_t>{int64_t{4} << 40, 6}));
    }
}

TEST(Loopback, FailedRankStopsItsPeersWithItsError) {
    auto group = make_loopback_group(4);
    try {
        run_ranks(raw(group), [&](int r) {
            for (int step = 0; step < 100; ++step) {
                if (r == 2 && step == 3) throw Error("CUDA error: device lost");
                group[r]->barrier();
            }
        });
        FAIL() << "the job did not fail";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("rank 2"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("device lost"), std::string::npos) << e.what();
    }
}

TEST(Loopback, PeersOfAFailedRankSeeCommErrorNamingIt) {
    auto group = make_loopback_group(3);
    std::vector<std::string> errors(3);
    std::vector<std::thread> threads;
    for (int r = 0; r < 3; ++r) {
        threads.emplace_back([&, r] {
            try {
                if (r == 1) {
                    group[r]->abort("out of memory");
                    return;
                }
                group[r]->barrier();
            } catch (const CommError& e) {
                errors[r] = e.what();
            }
        });
    }
    for (auto& t : threads) t.join();
    for (int r : {0, 2}) EXPECT_NE(errors[r].find("rank 1 stopped: out of memory"), std::string::npos) << errors[r];
}

TEST(Loopback, MissingRankTimesOut) {
    auto group = make_loopback_group(2, std::chrono::milliseconds(200));
    // Rank 1 never calls the collective (it hangs elsewhere): rank 0 must not wait forever.
    EXPECT_THROW(group[0]->barrier(), CommError);
    EXPECT_THROW(group[1]->barrier(), CommError);  // the job is over for every rank
}

TEST(Loopback, MismatchedCollectivesAreAnError) {
    auto group = make_loopback_group(2);
    EXPECT_THROW(run_ranks(raw(group),
                           [&](int r) {
                               int32_t v = r;
                               std::vector<int32_t> out(2);
                               if (r == 0) {
                                   group[r]->all_gather(&v, 1, out.data(), CommDtype::kI32);
                               } else {
                                   group[r]->barrier();
                               }
                           }),
                 Error);
}

TEST(Loopback, DisagreeingCountsAreAnError) {
    auto group = make_loopback_group(2);
    EXPECT_THROW(run_ranks(raw(group),
                           [&](int r) {
                               std::vector<float> send(4, 1.0f), recv(8);
                               std::vector<int64_t> sc = {1, 1};
                               std::vector<int64_t> rc = {1, r == 0 ? 2 : 1};  // rank 0 expects 2 from rank 1
                               group[r]->all_to_all_v(send.data(), sc, recv.data(), rc, CommDtype::kF32);
                           }),
                 Error);
}

}  // namespace
}  // namespace dsv4::dist
