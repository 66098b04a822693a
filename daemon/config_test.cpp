// config_test.cpp: every error path of config validation names the key, environment variables
// override the file, and good files pass.
#include "daemon/config.h"
#include "daemon/gpu_probe.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <thread>
#include <vector>

namespace gswap::daemon {
namespace {

// The first key of a one-key document such as {"budget": 1}.
std::string key_of(const std::string& doc) {
  return doc.substr(2, doc.find('"', 2) - 2);
}

std::vector<std::string> check(const std::string& json) {
  Config c;
  return c.merge_json(json);
}

TEST(Config, DefaultsAndGoodFile) {
  Config c;
  EXPECT_EQ(c.text("log_level"), "warn");
  EXPECT_EQ(c.origin("budget"), "default");
  auto errors = c.merge_json(R"({"budget": "6GiB", "log_level": "info", "summary": false,
    "gpu_budget": "50%", "share": "weighted", "weights": {"train": 3, "eval": 1},
    "allow_uids": [1000, 1001], "trace_launches": 4096})");
  EXPECT_TRUE(errors.empty()) << errors.front();
  EXPECT_EQ(c.size("budget").bytes, 6ull << 30);
  EXPECT_FALSE(c.boolean("summary"));
  EXPECT_EQ(c.uint("trace_launches"), 4096u);
  EXPECT_DOUBLE_EQ(c.weight_for("train"), 3.0);
  EXPECT_DOUBLE_EQ(c.weight_for("other"), 1.0);
  EXPECT_EQ(c.allow_uids(), (std::vector<std::uint32_t>{1000, 1001}));
}

// The library sends at most 64 bytes of its executable's name: a weight given for a longer name
// applies to the name cut there, and to nothing shorter.
TEST(Config, AWeightForANameLongerThanTheLibrarySendsApplies) {
  Config c;
  const std::string name(80, 'n');
  ASSERT_TRUE(
      c.merge_json(nlohmann::json{{"share", "weighted"}, {"weights", {{name, 4}}}}.dump()).empty());
  EXPECT_DOUBLE_EQ(c.weight_for(name.substr(0, 64)), 4.0);
  EXPECT_DOUBLE_EQ(c.weight_for(name.substr(0, 63)), 1.0);
  EXPECT_DOUBLE_EQ(c.weight_for(name), 4.0);
}

TEST(Config, SyntaxErrorAndNonObject) {
  auto e = check("{\"budget\": ");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_NE(e[0].find("not valid JSON"), std::string::npos);
  e = check("[1, 2]");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_NE(e[0].find("JSON object"), std::string::npos);
  // A NUL byte would end the reader's input, and the settings after it go unread.
  e = check(std::string(R"({"budget": "6GiB"})") + std::string(1, '\0') + R"(, "x": 1})");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_NE(e[0].find("a NUL byte at offset 18"), std::string::npos) << e[0];
  // A number beyond a double is invalid JSON too, not an exception out of the reader.
  e = check(R"({"max_clients": 1e400})");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_NE(e[0].find("not valid JSON"), std::string::npos) << e[0];
  // A daemon that serves no client, or keeps too few launches to find an iteration in.
  e = check(R"({"max_clients": 0, "trace_launches": 15})");
  ASSERT_EQ(e.size(), 2u);
  EXPECT_NE(e[0].find("max_clients: out of range: '0' serves no client: it must be at least 1"),
            std::string::npos)
      << e[0];
  EXPECT_NE(e[1].find("trace_launches: out of range: '15' is too few launches"), std::string::npos)
      << e[1];
  EXPECT_TRUE(check(R"({"max_clients": 1, "trace_launches": 16})").empty());
  // A search with no walk, or more than the search runs.
  e = check(R"({"plan_search_threads": 0})");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_NE(e[0].find("plan_search_threads: out of range: '0' is not a number of search threads: "
                      "it must be 1 to 64"),
            std::string::npos)
      << e[0];
  EXPECT_EQ(check(R"({"plan_search_threads": 65})").size(), 1u);
  EXPECT_TRUE(check(R"({"plan_search_threads": 1})").empty());
  EXPECT_TRUE(check(R"({"plan_search_threads": 64})").empty());
  // Settings that would hold the shared planning thread, or memory, without bound.
  e = check(
      R"({"plan_search_ms": 60001, "plan_refine_ms": 600001, "trace_launches": 4194305, "max_clients": 1025})");
  ASSERT_EQ(e.size(), 4u);
  EXPECT_NE(e[0].find("max_clients: out of range: '1025' is too many clients: it must be at most "
                      "1024"),
            std::string::npos)
      << e[0];
  EXPECT_NE(e[1].find("plan_refine_ms: out of range: '600001'"), std::string::npos) << e[1];
  EXPECT_NE(e[2].find("plan_search_ms: out of range: '60001' would hold the planning thread"),
            std::string::npos)
      << e[2];
  EXPECT_NE(e[3].find("trace_launches: out of range: '4194305' would not bound"), std::string::npos)
      << e[3];
  EXPECT_TRUE(
      check(
          R"({"plan_search_ms": 60000, "plan_refine_ms": 600000, "trace_launches": 4194304, "max_clients": 1024})")
          .empty());
  EXPECT_EQ(check(R"({"plan_search_ms": 18446744073709551615})").size(), 1u);
  // A value's control characters are escaped in the message, as \xNN.
  e = check(std::string(R"({"gpu_budget": "50%\u0000junk"})"));
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].find('\0'), std::string::npos);
  EXPECT_NE(e[0].find("\\x00"), std::string::npos) << e[0];
}

// A string setting holding a NUL (log_file, runtime_dir, daemon_path, cupti_path) is refused:
// gswapctl run hands it on with setenv, which would cut it there, and the library would use
// another path than the one checked.
TEST(Config, AStringWithANulIsRefused) {
  for (const char* key : {"log_file", "runtime_dir", "daemon_path", "cupti_path"}) {
    auto e = check(fmt::format(R"({{"{}": "/tmp/a\u0000b"}})", key));
    ASSERT_EQ(e.size(), 1u) << key;
    EXPECT_EQ(e[0], fmt::format("{}: out of range: '/tmp/a\\x00b' holds a NUL character "
                                "(\\u0000), where it would be cut short",
                                key));
  }
  EXPECT_TRUE(check(R"({"log_file": "/tmp/a-b"})").empty());
}

TEST(Config, UnknownKeyIsNamed) {
  auto e = check(R"({"budgett": "1GiB", "config": "x"})");
  ASSERT_EQ(e.size(), 2u);  // "config" is environment-only
  EXPECT_EQ(e[0], "budgett: unknown key");
  EXPECT_EQ(e[1], "config: unknown key");
}

TEST(Config, WrongTypesAreNamed) {
  for (const char* doc :
       {R"({"summary": "yes"})", R"({"log_level": 3})", R"({"budget": true})",
        R"({"trace_launches": -5})", R"({"trace_launches": 1.5})", R"({"weights": [1]})",
        R"({"weights": {"a": "x"}})", R"({"allow_uids": [-1]})", R"({"allow_gids": 7})"}) {
    auto e = check(doc);
    ASSERT_EQ(e.size(), 1u) << doc;
    EXPECT_NE(e[0].find("wrong type"), std::string::npos) << e[0];
    std::string key = key_of(doc);
    EXPECT_EQ(e[0].rfind(key + ":", 0), 0u) << e[0];
  }
}

TEST(Config, OutOfRangeValuesAreNamed) {
  for (const char* doc :
       {R"({"budget": "150%"})", R"({"budget": "6 parsecs"})", R"({"log_level": "loud"})",
        R"({"daemon": "sometimes"})", R"({"weights": {"a": 0}})", R"({"allow_uids": [4294967296]})",
        R"({"budget": "0"})", R"({"gpu_budget": "0B"})"}) {
    auto e = check(doc);
    ASSERT_EQ(e.size(), 1u) << doc;
    std::string key = key_of(doc);
    EXPECT_EQ(e[0].rfind(key + ":", 0), 0u) << e[0];
  }
}

TEST(Config, EnvironmentOverridesFileAndIsValidated) {
  Config c;
  ASSERT_TRUE(c.merge_json(R"({"budget": "6GiB", "log_level": "info"})").empty());
  std::map<std::string, std::string> env = {{"GSWAP_BUDGET", "2GiB"},
                                            {"GSWAP_WEIGHTS", "a=2,b=0.5"}};
  auto lookup = [&](const char* n) -> const char* {
    auto it = env.find(n);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  EXPECT_TRUE(c.merge_env(lookup).empty());
  EXPECT_EQ(c.size("budget").bytes, 2ull << 30);
  EXPECT_EQ(c.origin("budget"), "GSWAP_BUDGET");
  EXPECT_EQ(c.text("log_level"), "info");
  env = {{"GSWAP_LOG", "chatty"}, {"GSWAP_ALLOW_UIDS", "12,x"}};
  auto e = c.merge_env(lookup);
  ASSERT_EQ(e.size(), 2u);
  EXPECT_EQ(e[0].rfind("GSWAP_LOG:", 0), 0u) << e[0];
  EXPECT_EQ(e[1].rfind("GSWAP_ALLOW_UIDS:", 0), 0u) << e[1];
  // A name given two weights is refused, as a key given twice in the file's "weights".
  env = {{"GSWAP_WEIGHTS", "a=1,a=2"}};
  e = c.merge_env(lookup);
  ASSERT_EQ(e.size(), 1u);
  EXPECT_NE(e[0].find("GSWAP_WEIGHTS: 'a' is given a weight twice"), std::string::npos) << e[0];
}

// A command-line value (gswapctl run --budget) is checked as its environment variable is.
TEST(Config, MergeValueChecksAsTheEnvironmentDoes) {
  Config c;
  EXPECT_EQ(c.merge_value("budget", "0.5", "--budget"),
            "'0.5' is not a budget: it must be above 0 bytes");
  EXPECT_EQ(c.merge_value("budget", "0", "--budget"),
            "'0' is not a budget: it must be above 0 bytes");
  EXPECT_EQ(c.merge_value("budget", "\xff", "--budget"),
            "'\\xff' is not a size (bytes with a unit such as 6GiB, or 1-100%)");
  EXPECT_EQ(c.origin("budget"), "default");
  EXPECT_EQ(c.merge_value("budget", "6GiB", "--budget"), "");
  EXPECT_EQ(c.origin("budget"), "--budget");
  EXPECT_EQ(c.size("budget").bytes, 6ull << 30);
}

// gswapd names its log file after the GPU it serves: a selector that could name a path is
// refused wherever it comes from.
TEST(Config, GpuIsAnOrdinalOrAUuid) {
  for (const char* good : {"0", "12", "GPU-01234567-89ab-cdef-0123-456789abcdef",
                           "0123456789abcdef0123456789ABCDEF", "01234567890123456789012345678901"})
    EXPECT_EQ(gpu_selector_error(good), "") << good;
  for (const char* bad : {"", " 0", "0 ", "-1", "0/../x", "GPU-../../x", "..", "GPU-", "a",
                          "GPU-01234567-89ab-cdef-0123-456789abcdef/..", "99999999999999999999"}) {
    EXPECT_NE(gpu_selector_error(bad), "") << bad;
    Config c;
    auto e =
        c.merge_env([&](const char* n) { return std::string(n) == "GSWAP_GPU" ? bad : nullptr; });
    ASSERT_EQ(e.size(), 1u) << bad;
    EXPECT_EQ(e[0], fmt::format("GSWAP_GPU: '{}' is neither a GPU ordinal (0, 1, ...) nor a GPU "
                                "UUID (GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx, as nvidia-smi -L "
                                "prints it)",
                                bad));
    EXPECT_EQ(c.text("gpu"), "0");
  }
  // A NUL would cut the UUID short where the path is made.
  std::string with_nul = "GPU-01234567-89ab-cdef-0123-456789abcdef";
  with_nul += '\0';
  with_nul += "/x";
  EXPECT_NE(gpu_selector_error(with_nul), "");
  auto e = check(R"({"gpu": "GPU-01234567-89ab-cdef-0123-456789abcdef\u0000/../x"})");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].rfind("gpu: out of range: 'GPU-01234567-89ab-cdef-0123-456789abcdef\\x00/../x' is "
                       "neither",
                       0),
            0u)
      << e[0];
  Config c;
  EXPECT_NE(c.merge_value("gpu", "../../x", "--gpu"), "");
  EXPECT_EQ(c.merge_value("gpu", "3", "--gpu"), "");
  EXPECT_EQ(c.text("gpu"), "3");
}

TEST(Config, MissingFileIsOneError) {
  Config c;
  auto e = c.merge_file("/nonexistent/gswap.json");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_NE(e[0].find("/nonexistent/gswap.json"), std::string::npos);
}

TEST(Config, DuplicateKeysAreNamed) {
  Config c;
  auto e = c.merge_json(R"({"budget": "1GiB", "log_level": "info", "budget": "2GiB"})");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0], "budget: duplicate key (given more than once)");
  // Which value was meant is unknown: the key keeps its previous value; the others apply.
  EXPECT_EQ(c.origin("budget"), "default");
  EXPECT_EQ(c.text("log_level"), "info");
  e = check(R"({"weights": {"train": 1, "eval": 2, "train": 3}, "share": "weighted"})");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0], "weights.train: duplicate key (given more than once)");
  // The same name in two different objects is not a duplicate.
  EXPECT_TRUE(check(R"({"weights": {"budget": 1}, "budget": "1GiB"})").empty());
  // Nesting deeper than any config has is refused where it goes too deep.
  e = check(R"({"weights": {"a": )" + std::string(100, '[') + std::string(100, ']') + "}}");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].rfind("weights.a[0][0]", 0), 0u) << e[0];
  EXPECT_NE(e[0].find("]: nested more than 64 deep"), std::string::npos) << e[0];
}

TEST(Config, DirectoryIsNotReadable) {
  Config c;
  auto e = c.merge_file("/tmp");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0], "/tmp: cannot read the file: Is a directory");
  std::string text, why;
  EXPECT_FALSE(read_config_file("/nonexistent/gswap.json", &text, &why));
  EXPECT_EQ(why, "cannot read the file: No such file or directory");
}

// /dev/zero never ends: a device is refused without being read, and a pipe or file is read up to
// kMaxConfigBytes, not until memory runs out.
TEST(Config, DevicesAndEndlessInputAreRefused) {
  std::string text, why;
  EXPECT_FALSE(read_config_file("/dev/zero", &text, &why));
  EXPECT_EQ(why, "cannot read the file: it is not a regular file or a pipe");
  Config c;
  auto e = c.merge_file("/dev/null");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0], "/dev/null: cannot read the file: it is not a regular file or a pipe");

  // A pipe whose writer never stops.
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  std::thread writer([w = fds[1]] {
    std::signal(SIGPIPE, SIG_IGN);
    std::vector<char> spaces(1 << 16, ' ');
    while (write(w, spaces.data(), spaces.size()) > 0) {
    }
    close(w);
  });
  const std::string pipe_path = "/proc/self/fd/" + std::to_string(fds[0]);
  EXPECT_FALSE(read_config_file(pipe_path, &text, &why));
  EXPECT_EQ(why, "cannot read the file: it is larger than 1 MiB, the most a config file may hold");
  close(fds[0]);  // the writer's next write fails with EPIPE
  writer.join();

  // A regular file one byte over the bound; at the bound it is read (and is JSON).
  char dir_template[] = "/tmp/gswap-config-test-XXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);
  const std::string dir = dir_template, big = dir + "/big.json";
  {
    std::ofstream f(big, std::ios::binary);
    f << "{}" << std::string(kMaxConfigBytes - 2, ' ');
  }
  EXPECT_TRUE(read_config_file(big, &text, &why)) << why;
  EXPECT_EQ(text.size(), kMaxConfigBytes);
  EXPECT_TRUE(Config().merge_file(big).empty());
  {
    std::ofstream f(big, std::ios::binary | std::ios::app);
    f << ' ';
  }
  EXPECT_FALSE(read_config_file(big, &text, &why));
  EXPECT_NE(why.find("larger than 1 MiB"), std::string::npos) << why;

  // A FIFO that nobody writes to reads as empty at once, rather than waiting for a writer.
  const std::string fifo = dir + "/fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_TRUE(read_config_file(fifo, &text, &why)) << why;
  EXPECT_EQ(text, "");
  std::remove(fifo.c_str());
  std::remove(big.c_str());
  rmdir(dir.c_str());
}

TEST(Config, ExampleConfigIsValid) {
  Config c;
  auto e = c.merge_file(GSWAP_SOURCE_DIR "/daemon/gswap.example.json");
  EXPECT_TRUE(e.empty()) << e.front();
}

}  // namespace
}  // namespace gswap::daemon
