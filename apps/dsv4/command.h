// Subcommand registry for the dsv4 CLI. Each cmd_*.cpp registers itself with a static CommandRegistrar,
// so adding a command never touches main.cpp. The CLI spellings are a contract (docs/cli.md): add, don't rename.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

namespace dsv4::cli {

struct Command {
    std::string name;
    std::string description;
    // Adds the options to `app` and sets its callback.
    std::function<void(CLI::App& app)> setup;
};

std::vector<Command>& command_registry();

struct CommandRegistrar {
    CommandRegistrar(std::string name, std::string description, std::function<void(CLI::App&)> setup) {
        command_registry().push_back({std::move(name), std::move(description), std::move(setup)});
    }
};

}  // namespace dsv4::cli
