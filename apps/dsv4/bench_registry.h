// `dsv4 bench <name>`: benchmark programs register here (like command.h's subcommands), so `bench offline` and
// `bench serve` live in their own files.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

namespace dsv4::cli {

struct Benchmark {
    std::string name;
    std::string description;
    std::function<void(CLI::App& app)> setup;
};

std::vector<Benchmark>& benchmark_registry();

struct BenchmarkRegistrar {
    BenchmarkRegistrar(std::string name, std::string description, std::function<void(CLI::App&)> setup) {
        benchmark_registry().push_back({std::move(name), std::move(description), std::move(setup)});
    }
};

}  // namespace dsv4::cli
