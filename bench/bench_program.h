// What the benchmark programs of bench/ share: comma-separated option lists, the median of repeated timings, and a
// main that turns an exception into "error: ..." and exit status 1.
#pragma once

#include <algorithm>
#include <cstdio>
#include <exception>
#include <sstream>
#include <string>
#include <vector>

namespace dsv4::bench {

// "a,b,,c" -> {"a", "b", "c"}.
inline std::vector<std::string> split_list(const std::string& list) {
    std::vector<std::string> out;
    std::stringstream in(list);
    for (std::string item; std::getline(in, item, ',');) {
        if (!item.empty()) out.push_back(item);
    }
    return out;
}

inline std::vector<int> int_list(const std::string& list) {
    std::vector<int> out;
    for (const std::string& item : split_list(list)) out.push_back(std::stoi(item));
    return out;
}

// The middle value (the upper middle of an even count); 0 for none.
inline double median(std::vector<double> values) {
    if (values.empty()) return 0.0;
    std::sort(values.begin(), values.end());
    return values[values.size() / 2];
}

inline int run_program(int (*run)(int, char**), int argc, char** argv) {
    try {
        return run(argc, argv);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 1;
    }
}

}  // namespace dsv4::bench
