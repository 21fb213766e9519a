// The module DAG of docs/architecture.md holds for the whole tree (every include between modules and every
// module's CMake dependencies point down), and the check does catch what it is for: a planted upward include, an
// upward link, an unknown module, and a cyclic or malformed DAG.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "layering_check.h"

namespace dsv4::layering {
namespace {
namespace fs = std::filesystem;

std::string read(const fs::path& p) {
    std::ifstream in(p);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

void write(const fs::path& p, const std::string& text) {
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
}

const char* kSmallDag = "# doc\n```dag\ncore:\nkv: core\nbackend: core\nserver: kv core\n```\n";

// A scratch tree that follows kSmallDag; each test plants one fault in it.
struct Tree {
    fs::path root;
    Tree() {
        root = fs::temp_directory_path() /
               ("dsv4_layering_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "_" +
                ::testing::UnitTest::GetInstance()->current_test_info()->name());
        fs::remove_all(root);
        write(root / "src/core/error.h", "#pragma once\n#include <string>\n");
        write(root / "src/kv/pool.h", "#include \"core/error.h\"\n#include \"pool_detail.h\"\n");
        write(root / "src/server/http/route.cpp", "#include \"kv/pool.h\"\n#include \"server/x.h\"\n");
        write(root / "src/kv/CMakeLists.txt", "dsv4_add_module(kv SOURCES a.cpp PUBLIC_DEPS dsv4_core)\n");
    }
    ~Tree() { fs::remove_all(root); }
};

TEST(Layering, RepositoryFollowsTheModuleDag) {
    const fs::path root = DSV4_SOURCE_DIR;
    const Dag dag = parse_dag(read(root / "docs/architecture.md"));
    ASSERT_GE(dag.size(), 10u) << "the DAG in docs/architecture.md lists every module";
    const auto violations = check_tree(root, dag);
    EXPECT_TRUE(violations.empty()) << describe(violations);
}

TEST(Layering, TheScratchTreeIsClean) {
    Tree t;
    EXPECT_TRUE(check_tree(t.root, parse_dag(kSmallDag)).empty()) << describe(check_tree(t.root, parse_dag(kSmallDag)));
}

TEST(Layering, CatchesAPlantedUpwardInclude) {
    Tree t;
    write(t.root / "src/kv/manager.cpp", "#include \"core/error.h\"\n\n  #  include \"server/http/route.h\"\n");
    const auto v = check_tree(t.root, parse_dag(kSmallDag));
    ASSERT_EQ(v.size(), 1u) << describe(v);
    EXPECT_EQ(v[0].file, "src/kv/manager.cpp");
    EXPECT_EQ(v[0].line, 3);
    EXPECT_NE(v[0].what.find("'server'"), std::string::npos) << v[0].what;
}

TEST(Layering, CatchesASidewaysInclude) {
    Tree t;  // kv and backend are unrelated: neither may include the other
    write(t.root / "src/backend/backend.h", "#include \"kv/pool.h\"\n");
    EXPECT_EQ(check_tree(t.root, parse_dag(kSmallDag)).size(), 1u);
}

TEST(Layering, CatchesAnUpwardLinkInCMake) {
    Tree t;
    write(t.root / "src/kv/CMakeLists.txt",
          "dsv4_add_module(kv SOURCES a.cpp\n  PUBLIC_DEPS dsv4_backend dsv4_core)\n");
    const auto v = check_tree(t.root, parse_dag(kSmallDag));
    ASSERT_EQ(v.size(), 1u) << describe(v);
    EXPECT_NE(v[0].what.find("dsv4_backend"), std::string::npos);
}

TEST(Layering, CatchesModulesMissingFromTheDag) {
    Tree t;
    write(t.root / "src/spec/drafter.h", "#pragma once\n");
    write(t.root / "src/core/x.h", "#include \"nowhere/y.h\"\n");
    EXPECT_EQ(check_tree(t.root, parse_dag(kSmallDag)).size(), 2u);
}

TEST(Layering, TransitiveDependenciesAreAllowed) {
    Tree t;  // server lists kv, kv lists core: server may include core
    write(t.root / "src/server/y.cpp", "#include \"core/error.h\"\n");
    EXPECT_TRUE(check_tree(t.root, parse_dag(kSmallDag)).empty());
}

TEST(Layering, RejectsCyclicAndMalformedDags) {
    EXPECT_THROW(parse_dag("```dag\na: b\nb: a\n```\n"), std::runtime_error);
    EXPECT_THROW(parse_dag("```dag\na: b\n```\n"), std::runtime_error);  // b is no module
    EXPECT_THROW(parse_dag("```dag\na:\na:\n```\n"), std::runtime_error);
    EXPECT_THROW(parse_dag("```dag\nno colon\n```\n"), std::runtime_error);
    EXPECT_THROW(parse_dag("no block at all"), std::runtime_error);
    EXPECT_EQ(reachable(parse_dag(kSmallDag), "server"), (std::set<std::string>{"kv", "core"}));
}

}  // namespace
}  // namespace dsv4::layering
