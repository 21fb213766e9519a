#include "layering_check.h"

#include <cctype>
#include <fstream>
#include <functional>
#include <sstream>
#include <stdexcept>

namespace dsv4::layering {
namespace fs = std::filesystem;
namespace {

std::string trim(const std::string& s) {
    const auto b = s.find_first_not_of(" \t\r");
    const auto e = s.find_last_not_of(" \t\r");
    return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

void check_acyclic(const Dag& dag) {
    std::map<std::string, int> state;  // 0 unseen, 1 on the stack, 2 done
    std::function<void(const std::string&, std::vector<std::string>&)> visit = [&](const std::string& m,
                                                                                   std::vector<std::string>& path) {
        if (state[m] == 2) return;
        path.push_back(m);
        if (state[m] == 1) {
            std::string cycle;
            for (const auto& p : path) cycle += (cycle.empty() ? "" : " -> ") + p;
            throw std::runtime_error("module DAG has a cycle: " + cycle);
        }
        state[m] = 1;
        for (const auto& d : dag.at(m)) visit(d, path);
        state[m] = 2;
        path.pop_back();
    };
    for (const auto& [m, deps] : dag) {
        std::vector<std::string> path;
        visit(m, path);
    }
}

// The module a repository-relative path belongs to, or "" when none.
std::string module_of_path(const std::string& rel) {
    auto starts = [&](const std::string& p) { return rel.rfind(p, 0) == 0; };
    if (starts("src/backend/cpu/")) return "backend/cpu";
    if (starts("src/backend/cuda/")) return "backend/cuda";
    if (starts("src/")) {
        const auto slash = rel.find('/', 4);
        return slash == std::string::npos ? "" : rel.substr(4, slash - 4);
    }
    if (starts("include/dsv4/")) return "dsv4";
    if (starts("apps/dsv4/")) return "apps";
    if (starts("bench/client/")) return "bench";
    return "";
}

// The module an include path names, or "" for an include without a directory.
std::string module_of_include(const std::string& inc) {
    const auto slash = inc.find('/');
    if (slash == std::string::npos) return "";
    const std::string first = inc.substr(0, slash);
    if (first == "backend" && (inc.rfind("backend/cpu/", 0) == 0 || inc.rfind("backend/cuda/", 0) == 0))
        return inc.substr(0, inc.find('/', slash + 1));
    if (first == "bench") return "bench";
    return first;
}

bool is_source(const fs::path& p) {
    static const std::set<std::string> exts = {".h", ".hpp", ".cpp", ".cc", ".cu", ".cuh"};
    return exts.count(p.extension().string()) != 0;
}

// The path of a `#include "path"` line (any spacing), or "" for other lines and <system> includes. (Parsed by hand:
// GCC 12's <regex> fails the sanitizer build with -Wmaybe-uninitialized.)
std::string quoted_include(const std::string& line) {
    size_t i = line.find_first_not_of(" \t");
    if (i == std::string::npos || line[i] != '#') return {};
    i = line.find_first_not_of(" \t", i + 1);
    if (i == std::string::npos || line.compare(i, 7, "include") != 0) return {};
    i = line.find_first_not_of(" \t", i + 7);
    if (i == std::string::npos || line[i] != '"') return {};
    const size_t end = line.find('"', i + 1);
    return end == std::string::npos ? std::string() : line.substr(i + 1, end - i - 1);
}

void check_includes(const fs::path& file, const std::string& rel, const std::string& module, const Dag& dag,
                    const std::set<std::string>& allowed, std::vector<Violation>& out) {
    std::ifstream in(file);
    std::string line;
    int number = 0;
    while (std::getline(in, line)) {
        ++number;
        const std::string path = quoted_include(line);
        if (path.empty()) continue;
        const std::string target = module_of_include(path);
        if (target.empty() || target == module) continue;
        if (dag.count(target) == 0) {
            out.push_back({rel, number, "includes \"" + path + "\" of '" + target + "', which is no module"});
        } else if (allowed.count(target) == 0) {
            out.push_back({rel, number,
                           "module '" + module + "' includes \"" + path + "\" of '" + target +
                               "', which the DAG does not put below it"});
        }
    }
}

// dsv4_add_module(NAME SOURCES ... PUBLIC_DEPS dsv4_x ... DEPS ...): every dsv4_<dep> must be allowed.
void check_cmake(const fs::path& file, const std::string& rel, const std::string& module,
                 const std::set<std::string>& allowed, std::vector<Violation>& out) {
    std::ifstream in(file);
    std::stringstream text;
    text << in.rdbuf();
    const std::string s = text.str();
    const auto call = s.find("dsv4_add_module(");
    if (call == std::string::npos) return;
    const auto end = s.find(')', call);
    const std::string args = s.substr(call, end - call);
    // Every word dsv4_<name> (<name> of [a-z_]) that does not continue a longer identifier.
    auto word_char = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
    for (size_t at = args.find("dsv4_"); at != std::string::npos; at = args.find("dsv4_", at + 1)) {
        if (at > 0 && word_char(args[at - 1])) continue;
        size_t stop = at + 5;
        while (stop < args.size() && ((args[stop] >= 'a' && args[stop] <= 'z') || args[stop] == '_')) ++stop;
        if (stop < args.size() && word_char(args[stop])) continue;
        const std::string name = args.substr(at + 5, stop - at - 5);
        std::string dep = name;
        if (dep.empty() || dep == "add_module" || dep == "warnings") continue;
        if (dep.rfind("backend_", 0) == 0) dep = "backend/" + dep.substr(8);
        if (dep == module || allowed.count(dep) != 0) continue;
        out.push_back({rel, 0, "module '" + module + "' links dsv4_" + name + ", which the DAG does not put below it"});
    }
}

}  // namespace

Dag parse_dag(const std::string& markdown) {
    std::istringstream in(markdown);
    std::string line;
    bool inside = false, found = false;
    Dag dag;
    while (std::getline(in, line)) {
        const std::string t = trim(line);
        if (!inside) {
            if (t == "```dag") inside = found = true;
            continue;
        }
        if (t == "```") break;
        if (t.empty() || t[0] == '#') continue;
        const auto colon = t.find(':');
        if (colon == std::string::npos) throw std::runtime_error("module DAG line without ':': " + t);
        const std::string name = trim(t.substr(0, colon));
        if (name.empty() || dag.count(name) != 0) throw std::runtime_error("module DAG names '" + name + "' twice");
        std::istringstream deps(t.substr(colon + 1));
        std::set<std::string> list;
        for (std::string d; deps >> d;) list.insert(d);
        dag[name] = list;
    }
    if (!found) throw std::runtime_error("no ```dag block found");
    for (const auto& [m, deps] : dag)
        for (const auto& d : deps)
            if (dag.count(d) == 0) throw std::runtime_error("module '" + m + "' lists '" + d + "', which is no module");
    check_acyclic(dag);
    return dag;
}

std::set<std::string> reachable(const Dag& dag, const std::string& module) {
    std::set<std::string> seen;
    std::vector<std::string> todo(dag.at(module).begin(), dag.at(module).end());
    while (!todo.empty()) {
        const std::string m = todo.back();
        todo.pop_back();
        if (!seen.insert(m).second) continue;
        for (const auto& d : dag.at(m)) todo.push_back(d);
    }
    return seen;
}

std::vector<Violation> check_tree(const fs::path& root, const Dag& dag) {
    std::vector<Violation> out;
    for (const char* top : {"src", "include", "apps", "bench/client"}) {
        if (!fs::exists(root / top)) continue;
        for (const auto& entry : fs::recursive_directory_iterator(root / top)) {
            if (!entry.is_regular_file()) continue;
            const std::string rel = fs::relative(entry.path(), root).generic_string();
            const bool cmake = entry.path().filename() == "CMakeLists.txt";
            if (!cmake && !is_source(entry.path())) continue;
            const std::string module = module_of_path(rel);
            if (module.empty()) {
                if (!cmake) out.push_back({rel, 0, "file outside every module"});
                continue;
            }
            if (dag.count(module) == 0) {
                out.push_back({rel, 0, "module '" + module + "' is not in the DAG"});
                continue;
            }
            const std::set<std::string> allowed = reachable(dag, module);
            if (cmake) {
                check_cmake(entry.path(), rel, module, allowed, out);
            } else {
                check_includes(entry.path(), rel, module, dag, allowed, out);
            }
        }
    }
    return out;
}

std::string describe(const std::vector<Violation>& violations) {
    std::string s;
    for (const auto& v : violations) s += v.file + ":" + std::to_string(v.line) + ": " + v.what + "\n";
    return s;
}

}  // namespace dsv4::layering
