// dsv4: the command-line entry point. Dispatches to the registered subcommands (see command.h).
#include <algorithm>
#include <cstdio>
#include <exception>
#include <string>

#include "command.h"
#include "core/error.h"

namespace dsv4::cli {

std::vector<Command>& command_registry() {
    static std::vector<Command> commands;
    return commands;
}

}  // namespace dsv4::cli

int main(int argc, char** argv) {
    CLI::App app{"dsv4: inference engine and OpenAI-compatible server for DeepSeek-V4-class models"};
    app.require_subcommand(1);
    app.set_version_flag("--version", "dsv4 0.1.0");
    auto& commands = dsv4::cli::command_registry();
    std::sort(commands.begin(), commands.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
    for (auto& command : commands) {
        CLI::App* sub = app.add_subcommand(command.name, command.description);
        command.setup(*sub);
    }
    // CLI11 answers an unknown first word with "A subcommand is required": name the word and the commands instead.
    if (argc > 1 && argv[1][0] != '-') {
        const std::string word = argv[1];
        const bool known = std::any_of(commands.begin(), commands.end(), [&](const auto& c) { return c.name == word; });
        if (!known) {
            std::string names;
            for (const auto& command : commands) names += (names.empty() ? "" : ", ") + command.name;
            std::fprintf(stderr, "error: unknown command '%s'; the commands are: %s (dsv4 --help describes them)\n",
                         word.c_str(), names.c_str());
            return 2;
        }
    }
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return app.exit(e);
    } catch (const dsv4::Error& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 1;
    }
    return 0;
}
