// Regression tests for the HTTP faults found by driving the server with curl, the openai SDK and raw sockets
// (issue 22): form-encoded bodies over 8 KB got a false 413; a 413 did not say what it measured; slow clients held
// the HTTP threads; a declared Content-Length above the limit (or a huge or negative one) was read or waited for
// first; conflicting Content-Length or Content-Length with Transfer-Encoding were accepted; PUT on a POST route was
// 404. Each test talks raw HTTP where the fault lives below what an HTTP client library would send.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <thread>

#include "test_support.h"

namespace dsv4::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

const std::string kCompletion = R"({"prompt":"hi","max_tokens":2})";

std::string request_with_headers(const std::string& method, const std::string& path, const std::string& headers,
                                 const std::string& body = "") {
    return method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n" + headers + "\r\n" + body;
}

std::string read_response(RawConnection& connection, std::chrono::milliseconds timeout = 3s);

// Sends `bytes` on a new connection and reads one response (or, with `until`, until that text arrived).
std::string exchange(int port, const std::string& bytes, const std::string& until = "") {
    RawConnection connection(port);
    connection.send_all(bytes);
    return until.empty() ? read_response(connection) : connection.read_until(until, 3s);
}

int status_of(const std::string& response) {
    if (response.rfind("HTTP/1.1 ", 0) != 0) return -1;
    return std::stoi(response.substr(9, 3));
}

// The JSON body of a raw response with Content-Length (whole response read by the caller).
json body_of(const std::string& response) {
    const size_t start = response.find("\r\n\r\n");
    if (start == std::string::npos) return json();
    return json::parse(response.substr(start + 4), nullptr, false);
}

std::string read_response(RawConnection& connection, std::chrono::milliseconds timeout) {
    std::string received = connection.read_until("\r\n\r\n", timeout);
    const size_t header_end = received.find("\r\n\r\n");
    if (header_end == std::string::npos) return received;
    const size_t length_at = received.find("Content-Length: ");
    if (length_at == std::string::npos || length_at > header_end) return received;
    const size_t length = std::stoul(received.substr(length_at + 16));
    while (received.size() < header_end + 4 + length) {
        const std::string more = connection.read_until(std::string(1, '\x01'), 50ms);
        if (more.size() == received.size() && connection.peer_closed()) break;
        received = more;
    }
    return received;
}

TestServerOptions small_limit(size_t bytes) {
    TestServerOptions options;
    options.server = [bytes](server::ServerConfig& c) { c.max_request_bytes = bytes; };
    return options;
}

TEST(HttpFaults, FormEncodedBodiesOver8KBAreServedLikeAnyOther) {
    DSV4_REQUIRE_TOKENIZER();
    TestServer server;
    // `curl -d @file.json` sends application/x-www-form-urlencoded; cpp-httplib capped those at 8 KB with a 413.
    const std::string body = R"({"prompt":"hi","max_tokens":2)" + std::string(20000, ' ') + "}";
    httplib::Client client = server.client();
    auto response = client.Post("/v1/completions", body, "application/x-www-form-urlencoded");
    ASSERT_TRUE(response);
    EXPECT_EQ(response->status, 200) << response->body;
    EXPECT_EQ(json::parse(response->body)["object"], "text_completion");
    // Chunked and gzip-compressed bodies take the same path.
    const std::string chunked = request_with_headers(
        "POST", "/v1/completions", "Transfer-Encoding: chunked\r\nConnection: close\r\n",
        "10\r\n" + kCompletion.substr(0, 16) + "\r\n" + fmt::format("{:x}", kCompletion.size() - 16) + "\r\n" +
            kCompletion.substr(16) + "\r\n0\r\n\r\n");
    RawConnection connection(server.port());
    connection.send_all(chunked);
    const std::string answer = read_response(connection);
    EXPECT_EQ(status_of(answer), 200) << answer;
}

TEST(HttpFaults, Every413NamesTheSizeSeenAndTheLimit) {
    DSV4_REQUIRE_TOKENIZER();
    TestServer server(small_limit(4096));
    // Declared: refused from the headers alone, at once, before a byte of the body is sent.
    RawConnection declared(server.port());
    const auto sent = std::chrono::steady_clock::now();
    declared.send_all(
        request_with_headers("POST", "/v1/completions", "Content-Type: application/json\r\nContent-Length: 10000\r\n"));
    const std::string answer = read_response(declared);
    EXPECT_LT(std::chrono::steady_clock::now() - sent, 1s);
    EXPECT_EQ(status_of(answer), 413) << answer;
    const std::string message = body_of(answer)["error"]["message"];
    EXPECT_NE(message.find("10000 bytes"), std::string::npos) << message;
    EXPECT_NE(message.find("4096 bytes"), std::string::npos) << message;
    EXPECT_NE(answer.find("Connection: close"), std::string::npos) << answer;
    declared.read_until("never", 1s);
    EXPECT_TRUE(declared.peer_closed());  // the unsent body must never be parsed as a request

    // Chunked: counted as it arrives.
    const std::string chunk(3000, ' ');
    RawConnection streamed(server.port());
    streamed.send_all(
        request_with_headers("POST", "/v1/completions", "Transfer-Encoding: chunked\r\n",
                             fmt::format("{:x}\r\n{}\r\n{:x}\r\n{}\r\n", chunk.size(), chunk, chunk.size(), chunk)));
    const std::string streamed_answer = read_response(streamed);
    EXPECT_EQ(status_of(streamed_answer), 413) << streamed_answer;
    const std::string streamed_message = body_of(streamed_answer)["error"]["message"];
    EXPECT_NE(streamed_message.find("4096 bytes"), std::string::npos) << streamed_message;
    EXPECT_NE(streamed_message.find("6000 bytes had arrived"), std::string::npos) << streamed_message;

    // Expect: 100-continue: the refusal comes instead of "100 Continue", so the client never sends the body.
    const std::string expect =
        exchange(server.port(),
                 request_with_headers("POST", "/v1/completions", "Content-Length: 5000\r\nExpect: 100-continue\r\n"));
    EXPECT_EQ(status_of(expect), 413) << expect;
    EXPECT_EQ(expect.find("100 Continue"), std::string::npos) << expect;
}

TEST(HttpFaults, HugeNegativeOrMalformedContentLengthIsRefusedAtOnce) {
    DSV4_REQUIRE_TOKENIZER();
    TestServer server;
    struct Case {
        std::string header;
        int status;
        std::string words;
    };
    const std::vector<Case> cases = {
        {"Content-Length: 99999999999999999999999\r\n", 413, "99999999999999999999999 bytes"},
        {"Content-Length: 18446744073709551616\r\n", 413, "18446744073709551616 bytes"},
        {"Content-Length: -1\r\n", 400, "not a non-negative decimal number"},
        {"Content-Length: 12abc\r\n", 400, "not a non-negative decimal number"},
        {"Content-Length: 0x10\r\n", 400, "not a non-negative decimal number"},
    };
    for (const Case& c : cases) {
        const auto start = std::chrono::steady_clock::now();
        RawConnection connection(server.port());
        connection.send_all(request_with_headers("POST", "/v1/completions", c.header));
        const std::string answer = read_response(connection);
        EXPECT_LT(std::chrono::steady_clock::now() - start, 1s) << c.header;
        EXPECT_EQ(status_of(answer), c.status) << c.header << answer;
        const json body = body_of(answer);
        ASSERT_TRUE(body.contains("error")) << answer;
        EXPECT_NE(body["error"]["message"].get<std::string>().find(c.words), std::string::npos) << answer;
    }
}

TEST(HttpFaults, AmbiguousFramingIsRejected) {
    DSV4_REQUIRE_TOKENIZER();
    TestServer server;
    const std::string n = std::to_string(kCompletion.size());
    struct Case {
        std::string headers;
        int status;
        std::string words;
    };
    const std::vector<Case> cases = {
        {"Content-Length: " + n + "\r\nContent-Length: 5\r\n", 400, "conflicting Content-Length"},
        {"Content-Length: " + n + ", 5\r\n", 400, "conflicting Content-Length"},
        {"Content-Length: " + n + "\r\nTransfer-Encoding: chunked\r\n", 400, "both Content-Length and Transfer"},
        {"Transfer-Encoding: gzip\r\n", 501, "not supported"},
        {"Transfer-Encoding: gzip, chunked\r\n", 501, "not supported"},
        {"Content-Type: multipart/form-data; boundary=x\r\nContent-Length: " + n + "\r\n", 415, "multipart"},
        {"Content-Encoding: zstd\r\nContent-Length: " + n + "\r\n", 415, "zstd"},
    };
    for (const Case& c : cases) {
        RawConnection connection(server.port());
        connection.send_all(request_with_headers("POST", "/v1/completions", c.headers, kCompletion));
        const std::string answer = read_response(connection);
        EXPECT_EQ(status_of(answer), c.status) << c.headers << answer;
        EXPECT_NE(answer.find(c.words), std::string::npos) << c.headers << answer;
        EXPECT_NE(answer.find("Connection: close"), std::string::npos) << c.headers << answer;
    }
    // The same length twice is not a conflict.
    const std::string same =
        exchange(server.port(),
                 request_with_headers("POST", "/v1/completions",
                                      "Content-Length: " + n + "\r\nContent-Length: " + n + "\r\nConnection: close\r\n",
                                      kCompletion),
                 "\"usage\"");
    EXPECT_EQ(status_of(same), 200) << same;
}

TEST(HttpFaults, WrongMethodIs405WithAllowAndUnknownPathIs404) {
    DSV4_REQUIRE_TOKENIZER();
    TestServer server;
    for (const char* method : {"PUT", "DELETE", "PATCH", "GET"}) {
        const std::string answer = exchange(
            server.port(),
            request_with_headers(method, "/v1/chat/completions",
                                 "Content-Length: " + std::to_string(kCompletion.size()) + "\r\n", kCompletion));
        EXPECT_EQ(status_of(answer), 405) << method << answer;
        EXPECT_NE(answer.find("Allow: POST"), std::string::npos) << answer;
        EXPECT_NE(answer.find("\"code\":\"method_not_allowed\""), std::string::npos) << answer;
    }
    const std::string post_on_get = exchange(server.port(), request_with_headers("POST", "/health", ""));
    EXPECT_EQ(status_of(post_on_get), 405) << post_on_get;
    EXPECT_NE(post_on_get.find("Allow: GET, HEAD"), std::string::npos) << post_on_get;
    // Unknown path: 404 from the headers, the body is not read and the connection closes.
    RawConnection unknown(server.port());
    unknown.send_all(request_with_headers("POST", "/v1/nothing", "Content-Length: 100000\r\n"));
    const std::string not_found = read_response(unknown);
    EXPECT_EQ(status_of(not_found), 404) << not_found;
    unknown.read_until("never", 1s);
    EXPECT_TRUE(unknown.peer_closed());
    const std::string options = exchange(server.port(), request_with_headers("OPTIONS", "/v1/completions", ""));
    EXPECT_EQ(status_of(options), 204) << options;
    EXPECT_NE(options.find("Allow: POST, OPTIONS"), std::string::npos) << options;
}

TEST(HttpFaults, SlowClientsCannotHoldTheHttpThreads) {
    DSV4_REQUIRE_TOKENIZER();
    TestServerOptions options;
    options.server = [](server::ServerConfig& c) {
        c.http_threads = 4;
        c.max_in_flight = 2;
        c.request_read_timeout_s = 0.5;
    };
    TestServer server(options);
    // Every worker thread gets a client that sent its headers and one byte of a 100-byte body, then stalls (two
    // of them stall in the headers instead).
    std::vector<std::unique_ptr<RawConnection>> stalled;
    for (int i = 0; i < 4; ++i) {
        stalled.push_back(std::make_unique<RawConnection>(server.port()));
        if (i < 2) {
            stalled.back()->send_all(request_with_headers("POST", "/v1/completions", "Content-Length: 100\r\n", "{"));
        } else {
            stalled.back()->send_all("POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Le");
        }
    }
    std::this_thread::sleep_for(100ms);  // the workers are now all reading
    const auto start = std::chrono::steady_clock::now();
    const HttpResult health = get(server, "/health");
    EXPECT_EQ(health.status, 200);
    EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);  // one read timeout, not forever
    for (auto& connection : stalled) {
        const std::string answer = read_response(*connection);
        EXPECT_EQ(status_of(answer), 408) << answer;
        EXPECT_NE(answer.find("--request-read-timeout"), std::string::npos) << answer;
        connection->read_until("never", 1s);
        EXPECT_TRUE(connection->peer_closed());
    }
    const std::string metrics = get(server, "/metrics").body;
    EXPECT_NE(metrics.find("reason=\"read_timeout\"} 4\n"), std::string::npos) << metrics;
}

TEST(HttpFaults, PipelinedRequestsAreAllAnswered) {
    DSV4_REQUIRE_TOKENIZER();
    TestServer server;
    RawConnection connection(server.port());
    connection.send_all(request_with_headers("GET", "/health", "") + request_with_headers("GET", "/version", ""));
    const std::string answers = connection.read_until("\"build\"", 3s);
    EXPECT_NE(answers.find("{\"status\":\"ok\"}"), std::string::npos) << answers;
    EXPECT_NE(answers.find("\"version\""), std::string::npos) << answers;
}

}  // namespace
}  // namespace dsv4::testing
