// tokenizer_bench: single-thread encode throughput of dsv4's Tokenizer in MB/s.
//
//   tokenizer_bench --tokenizer tokenizer.json [--label NAME FILE...]... [--seconds S] [--oniguruma]
//
// Each --label starts a text made of the FILEs that follow it (concatenated). Reported per text: the first
// (cold: empty BPE cache) pass, and the best of the passes that follow within --seconds (warm cache).
// --oniguruma disables the hand-written DeepSeek pre-tokenizer matchers, to measure Oniguruma alone.
// Without --label it benchmarks the repository's own C++ sources as "code".
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace {

struct Text {
    std::string label;
    std::string bytes;
};

std::string read_file(const std::string& path) {
    std::ifstream file(path, std::ios::binary);
    if (!file) dsv4::fail("tokenizer_bench: cannot open '{}'", path);
    std::ostringstream buffer;
    buffer << file.rdbuf();
    return buffer.str();
}

std::string repository_sources() {
    std::string all;
    for (const char* dir : {"src", "apps", "tests", "bench"}) {
        const std::filesystem::path root = std::filesystem::path(DSV4_SOURCE_DIR) / dir;
        if (!std::filesystem::exists(root)) continue;
        std::vector<std::filesystem::path> files;
        for (const auto& entry : std::filesystem::recursive_directory_iterator(root)) {
            const auto ext = entry.path().extension();
            if (entry.is_regular_file() && (ext == ".cpp" || ext == ".h" || ext == ".cu"))
                files.push_back(entry.path());
        }
        std::sort(files.begin(), files.end());
        for (const auto& f : files) all += read_file(f.string());
    }
    return all;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void run(const dsv4::tokenizer::Tokenizer& tok, const Text& text, double budget_seconds) {
    auto start = std::chrono::steady_clock::now();
    size_t tokens = tok.encode(text.bytes).size();
    const double cold = seconds_since(start);
    double best = cold;
    const auto bench_start = std::chrono::steady_clock::now();
    int passes = 0;
    while (passes < 3 || seconds_since(bench_start) < budget_seconds) {
        start = std::chrono::steady_clock::now();
        tokens = tok.encode(text.bytes).size();
        best = std::min(best, seconds_since(start));
        ++passes;
    }
    const double mb = static_cast<double>(text.bytes.size()) / 1e6;
    std::printf("%-10s %8.2f MB %9zu tokens  %5.2f bytes/token  cold %7.1f MB/s  warm %7.1f MB/s (best of %d)\n",
                text.label.c_str(), mb, tokens, static_cast<double>(text.bytes.size()) / static_cast<double>(tokens),
                mb / cold, mb / best, passes);
}

}  // namespace

int main(int argc, char** argv) {
    try {
        std::string tokenizer_path;
        std::vector<Text> texts;
        double budget_seconds = 3.0;
        dsv4::tokenizer::TokenizerOptions options;
        for (int i = 1; i < argc; ++i) {
            const std::string arg = argv[i];
            const bool has_value = i + 1 < argc;
            if (arg == "--tokenizer" && has_value) {
                tokenizer_path = argv[++i];
            } else if (arg == "--label" && has_value) {
                texts.push_back({argv[++i], ""});
            } else if (arg == "--seconds" && has_value) {
                budget_seconds = std::stod(argv[++i]);
            } else if (arg == "--oniguruma") {
                options.fast_pretokenizer = false;
            } else if (!texts.empty() && arg.rfind("--", 0) != 0) {
                texts.back().bytes += read_file(arg);
            } else {
                dsv4::fail("tokenizer_bench: unexpected argument '{}' (see the header of bench/tokenizer_bench.cpp)",
                           arg);
            }
        }
        if (tokenizer_path.empty()) dsv4::fail("tokenizer_bench: --tokenizer FILE is required");
        if (texts.empty()) texts.push_back({"code", repository_sources()});
        const auto tok = dsv4::tokenizer::Tokenizer::load(tokenizer_path, options);
        std::printf("tokenizer %s, pre-tokenizer fast paths: %d, one thread\n", tokenizer_path.c_str(),
                    tok.fast_path_count());
        for (const Text& text : texts) {
            if (text.bytes.empty()) dsv4::fail("tokenizer_bench: text '{}' is empty", text.label);
            run(tok, text, budget_seconds);
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 1;
    }
    return 0;
}
