// The layering check: every `#include "X/..."` between modules, and every module's CMake dependency list, must be
// allowed by the module DAG written in docs/architecture.md (a ```dag fenced block of lines `module: dep dep ...`;
// a module may use what it lists and, transitively, what those list). Directories map to modules as:
//   src/<m>/...            -> <m>, except src/backend/cpu and src/backend/cuda -> backend/cpu, backend/cuda
//   include/dsv4/...       -> dsv4 (the public engine API)
//   apps/dsv4/...          -> apps            bench/client/... -> bench
// An include's target module is named by its first path component (its first two for backend/cpu|cuda);
// includes without a directory ("x.h") and system includes (<x>) are not checked.
#pragma once

#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace dsv4::layering {

// module -> the modules it lists directly.
using Dag = std::map<std::string, std::set<std::string>>;

// Parses the first ```dag block of a markdown text; throws std::runtime_error on a malformed line, a module
// listed twice, a dependency that is not itself a module, or a cycle.
Dag parse_dag(const std::string& markdown);

// Every module reachable from `module` (not including itself).
std::set<std::string> reachable(const Dag& dag, const std::string& module);

struct Violation {
    std::string file;  // relative to the root
    int line = 0;      // 0 for a file outside every module
    std::string what;
};

// Scans the tree under `root` (src/, include/, apps/, bench/client/) against the DAG.
std::vector<Violation> check_tree(const std::filesystem::path& root, const Dag& dag);

// One line per violation, for test output.
std::string describe(const std::vector<Violation>& violations);

}  // namespace dsv4::layering
