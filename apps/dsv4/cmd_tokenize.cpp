// `dsv4 tokenize --tokenizer FILE (--text S | --jsonl F)`: token ids as JSON arrays (no BOS is added).
// With --jsonl every input line is a JSON string and every output line the JSON array of its ids; "-" reads
// standard input. Errors name the file and, for a bad line, its 1-based line number.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "command.h"
#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace dsv4::cli {
namespace {

struct TokenizeOptions {
    std::string tokenizer_path;
    std::string text;
    std::string jsonl_path;
    bool no_special = false;
};

std::string ids_to_json(const std::vector<int32_t>& ids) {
    return nlohmann::json(ids).dump();
}

void tokenize_jsonl(const tokenizer::Tokenizer& tok, const TokenizeOptions& options) {
    std::ifstream file;
    std::istream* in = &std::cin;
    if (options.jsonl_path != "-") {
        file.open(options.jsonl_path, std::ios::binary);
        if (!file) fail("tokenize: cannot open '{}'", options.jsonl_path);
        in = &file;
    }
    std::string line;
    size_t line_number = 0;
    std::string output;
    while (std::getline(*in, line)) {
        ++line_number;
        if (!line.empty() && line.back() == '\r') line.pop_back();
        nlohmann::json value;
        try {
            value = nlohmann::json::parse(line);
        } catch (const nlohmann::json::exception& e) {
            fail("tokenize: {} line {}: not valid JSON: {}", options.jsonl_path, line_number, e.what());
        }
        if (!value.is_string())
            fail("tokenize: {} line {}: expected a JSON string, got {}", options.jsonl_path, line_number,
                 value.type_name());
        try {
            output = ids_to_json(tok.encode(value.get<std::string>(), !options.no_special));
        } catch (const Error& e) {
            fail("tokenize: {} line {}: {}", options.jsonl_path, line_number, e.what());
        }
        output.push_back('\n');
        std::fwrite(output.data(), 1, output.size(), stdout);
    }
    if (in->bad()) fail("tokenize: error reading '{}'", options.jsonl_path);
}

void run_tokenize(const TokenizeOptions& options, bool has_text) {
    const tokenizer::Tokenizer tok = tokenizer::Tokenizer::load(options.tokenizer_path);
    if (has_text) {
        std::printf("%s\n", ids_to_json(tok.encode(options.text, !options.no_special)).c_str());
        return;
    }
    tokenize_jsonl(tok, options);
    if (std::fflush(stdout) != 0) fail("tokenize: error writing the output");
}

const CommandRegistrar kRegistrar{
    "tokenize", "Print the token ids of a text (or of every JSON string line of a file) as JSON arrays",
    [](CLI::App& app) {
        auto options = std::make_shared<TokenizeOptions>();
        app.add_option("--tokenizer", options->tokenizer_path, "tokenizer.json")->required();
        auto* text = app.add_option("--text", options->text, "the text to tokenize");
        auto* jsonl = app.add_option("--jsonl", options->jsonl_path, "file of JSON strings, one per line (- = stdin)");
        text->excludes(jsonl);
        app.add_flag("--no-special", options->no_special, "treat added/special tokens in the text as plain text");
        app.callback([options, text, jsonl] {
            if (text->count() == 0 && jsonl->count() == 0) fail("tokenize: give --text or --jsonl");
            run_tokenize(*options, text->count() > 0);
        });
    }};

}  // namespace
}  // namespace dsv4::cli
