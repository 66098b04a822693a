// config_test.cpp: settings from the environment, with defaults from settings.def.
#include "interpose/config.h"

#include <gtest/gtest.h>

#include "interpose/log.h"

#include <cstring>
#include <map>
#include <string>

namespace gswap::interpose {
namespace {

std::map<std::string, std::string>* g_env;
const char* lookup(const char* name) {
  auto it = g_env->find(name);
  return it == g_env->end() ? nullptr : it->second.c_str();
}

bool load(std::map<std::string, std::string> env, Config* c, std::string* err) {
  g_env = &env;
  char buf[512] = {};
  bool ok = load_config(lookup, c, buf, sizeof buf);
  *err = buf;
  return ok;
}

TEST(Config, Defaults) {
  Config c;
  std::string err;
  ASSERT_TRUE(load({}, &c, &err)) << err;
  EXPECT_TRUE(c.budget.is_percent);
  EXPECT_EQ(c.budget.resolve(1000), 1000u);
  EXPECT_EQ(c.pinned_cap, 16ull << 30);
  EXPECT_EQ(c.staging_bytes, 64ull << 20);
  EXPECT_TRUE(c.summary);
  EXPECT_FALSE(c.hook_profile);
  EXPECT_EQ(c.log_level, LogLevel::kWarn);
  EXPECT_FALSE(c.debug_skip_restore);
  EXPECT_EQ(c.daemon, Config::Daemon::kConnect);
  EXPECT_STREQ(c.runtime_dir, "/run/gswap");
  EXPECT_STREQ(c.daemon_path, "");
}

TEST(Config, DaemonSettings) {
  Config c;
  std::string err;
  ASSERT_TRUE(load({{"GSWAP_DAEMON", "spawn"},
                    {"XDG_RUNTIME_DIR", "/run/user/7"},
                    {"GSWAP_DAEMON_PATH", "/opt/gswapd"}},
                   &c, &err))
      << err;
  EXPECT_EQ(c.daemon, Config::Daemon::kSpawn);
  EXPECT_STREQ(c.runtime_dir, "/run/user/7/gswap");
  EXPECT_STREQ(c.daemon_path, "/opt/gswapd");
  ASSERT_TRUE(load({{"GSWAP_DAEMON", "off"}, {"GSWAP_RUNTIME_DIR", "/tmp/rt"}}, &c, &err)) << err;
  EXPECT_EQ(c.daemon, Config::Daemon::kOff);
  EXPECT_STREQ(c.runtime_dir, "/tmp/rt");
}

TEST(Config, TimingSource) {
  Config c;
  std::string err;
  ASSERT_TRUE(load({}, &c, &err)) << err;
  EXPECT_EQ(c.timing, Config::Timing::kEvents);
  EXPECT_STREQ(c.cupti_path, "");
  ASSERT_TRUE(load({{"GSWAP_TIMING", "cupti"}, {"GSWAP_CUPTI_PATH", "/opt/libcupti.so"}}, &c, &err))
      << err;
  EXPECT_EQ(c.timing, Config::Timing::kCupti);
  EXPECT_STREQ(c.cupti_path, "/opt/libcupti.so");
  EXPECT_FALSE(load({{"GSWAP_TIMING", "nvtx"}}, &c, &err));
  EXPECT_NE(err.find("GSWAP_TIMING=\"nvtx\""), std::string::npos) << err;
  EXPECT_NE(err.find("events|cupti"), std::string::npos) << err;
}

TEST(Config, BadDaemonModeIsRefusedLikeEveryOtherSetting) {
  Config c;
  std::string err;
  EXPECT_FALSE(load({{"GSWAP_DAEMON", "sometimes"}}, &c, &err));
  EXPECT_NE(err.find("GSWAP_DAEMON"), std::string::npos) << err;
  EXPECT_NE(err.find("off|connect|spawn"), std::string::npos) << err;
  EXPECT_FALSE(load({{"GSWAP_RUNTIME_DIR", std::string(300, 'x')}}, &c, &err));
  EXPECT_NE(err.find("GSWAP_RUNTIME_DIR"), std::string::npos) << err;
}

TEST(Config, BudgetForms) {
  Config c;
  std::string err;
  ASSERT_TRUE(load({{"GSWAP_BUDGET", "6GiB"}}, &c, &err)) << err;
  EXPECT_EQ(c.budget.resolve(1ull << 40), 6ull << 30);
  ASSERT_TRUE(load({{"GSWAP_BUDGET", "75%"}}, &c, &err)) << err;
  EXPECT_EQ(c.budget.resolve(1000), 750u);
  ASSERT_TRUE(load({{"GSWAP_BUDGET", "123456"}}, &c, &err)) << err;
  EXPECT_EQ(c.budget.resolve(1), 123456u);
}

TEST(Config, BadValuesAreRefusedWithTheVariableName) {
  Config c;
  std::string err;
  EXPECT_FALSE(load({{"GSWAP_BUDGET", "lots"}}, &c, &err));
  EXPECT_NE(err.find("GSWAP_BUDGET"), std::string::npos) << err;
  EXPECT_FALSE(load({{"GSWAP_BUDGET", "0"}}, &c, &err));
  EXPECT_FALSE(load({{"GSWAP_BUDGET", "150%"}}, &c, &err));
  EXPECT_FALSE(load({{"GSWAP_LOG", "loud"}}, &c, &err));
  EXPECT_NE(err.find("GSWAP_LOG"), std::string::npos) << err;
  EXPECT_FALSE(load({{"GSWAP_PINNED_CAP", "50%"}}, &c, &err));
  EXPECT_FALSE(load({{"GSWAP_STAGING_BYTES", "1K"}}, &c, &err));
  EXPECT_FALSE(load({{"GSWAP_SUMMARY", "maybe"}}, &c, &err));
  EXPECT_FALSE(load({{"GSWAP_DEBUG_SKIP_RESTORE", "sometimes"}}, &c, &err));
  EXPECT_NE(err.find("GSWAP_DEBUG_SKIP_RESTORE"), std::string::npos) << err;
  EXPECT_FALSE(load({{"GSWAP_HOOK_PROFILE", "2"}}, &c, &err));
  EXPECT_NE(err.find("GSWAP_HOOK_PROFILE"), std::string::npos) << err;
}

// Sizes in log lines: binary units up to EiB, so the largest size is not 16777216.00 TiB.
TEST(Config, SizesInLogLinesUseUnitsUpToExbibytes) {
  char buf[32];
  EXPECT_STREQ(format_bytes(1000, buf, sizeof buf), "1000 B");
  EXPECT_STREQ(format_bytes(3ull << 29, buf, sizeof buf), "1.50 GiB");
  EXPECT_STREQ(format_bytes(5ull << 50, buf, sizeof buf), "5.00 PiB");
  EXPECT_STREQ(format_bytes(~0ull, buf, sizeof buf), "16.00 EiB");
}

// A refused budget says what is wrong with it: zero, a percentage out of range, or no size.
TEST(Config, ARefusedBudgetSaysWhy) {
  Config c;
  std::string err;
  for (const char* zero : {"0", "0B", "0.4", "0 GiB"}) {
    EXPECT_FALSE(load({{"GSWAP_BUDGET", zero}}, &c, &err));
    EXPECT_NE(err.find("it must be above 0 bytes"), std::string::npos) << err;
  }
  for (const char* percent : {"0%", "101%", "250 %"}) {
    EXPECT_FALSE(load({{"GSWAP_BUDGET", percent}}, &c, &err));
    EXPECT_NE(err.find("a percentage must be above 0% and at most 100%"), std::string::npos) << err;
  }
  for (const char* other : {"1e9", "lots", "6 parsecs"}) {
    EXPECT_FALSE(load({{"GSWAP_BUDGET", other}}, &c, &err));
    EXPECT_NE(err.find("expected bytes, with a unit or without (6GiB, 512MiB, 1048576)"),
              std::string::npos)
        << err;
  }
  // A switch names every spelling it takes.
  EXPECT_FALSE(load({{"GSWAP_SUMMARY", "2"}}, &c, &err));
  EXPECT_NE(err.find("expected 1 or 0 (or true/false, yes/no, on/off)"), std::string::npos) << err;
}

// A refusal is one line that keeps its reason: a long value is cut to its first 64 bytes, and a
// control byte (a newline would forge a log line of its own) is shown as \xNN.
TEST(Config, ARefusalShowsTheValueOnOneLineAndKeepsItsReason) {
  Config c;
  std::string err;
  EXPECT_FALSE(load({{"GSWAP_DAEMON_PATH", "/tmp/" + std::string(1100, 'p')}}, &c, &err));
  EXPECT_NE(err.find("/tmp/" + std::string(59, 'p') + "...\" is not valid: too long"),
            std::string::npos)
      << err;
  EXPECT_FALSE(load({{"GSWAP_BUDGET", std::string(400, '9')}}, &c, &err));
  EXPECT_NE(err.find("expected bytes, with a unit or without"), std::string::npos) << err;
  EXPECT_FALSE(load({{"GSWAP_BUDGET", "6GiB\ngswap[1] info: accepted\x1b[0m"}}, &c, &err));
  EXPECT_EQ(err.find('\n'), std::string::npos) << err;
  EXPECT_EQ(err.find('\x1b'), std::string::npos) << err;
  EXPECT_NE(err.find("GSWAP_BUDGET=\"6GiB\\x0agswap[1] info: accepted\\x1b[0m\" is not valid"),
            std::string::npos)
      << err;
  // Every byte escaped still leaves room for the reason in the library's 512-byte line.
  EXPECT_FALSE(load({{"GSWAP_TIMING", std::string(200, '\x01')}}, &c, &err));
  EXPECT_NE(err.find("...\" is not valid: expected events|cupti"), std::string::npos) << err;
}

// A runtime directory whose daemon socket would not fit a socket address is refused at cuInit
// when there is a daemon to talk to, whatever its length below the directory buffer's.
TEST(Config, ARuntimeDirTooLongForTheDaemonsSocketIsRefused) {
  Config c;
  std::string err;
  const std::string dir = "/tmp/" + std::string(70, 'd');  // + "/GPU-<36>.sock": 121 bytes
  EXPECT_FALSE(load({{"GSWAP_RUNTIME_DIR", dir}}, &c, &err));
  EXPECT_NE(err.find("GSWAP_RUNTIME_DIR"), std::string::npos) << err;
  EXPECT_NE(err.find("too long for a socket directory"), std::string::npos) << err;
  EXPECT_FALSE(load({{"GSWAP_RUNTIME_DIR", dir}, {"GSWAP_DAEMON", "spawn"}}, &c, &err));
  EXPECT_TRUE(load({{"GSWAP_RUNTIME_DIR", dir}, {"GSWAP_DAEMON", "off"}}, &c, &err)) << err;
  EXPECT_TRUE(load({{"GSWAP_RUNTIME_DIR", "/tmp/" + std::string(50, 'd')}}, &c, &err)) << err;
}

TEST(Config, OtherSettings) {
  Config c;
  std::string err;
  ASSERT_TRUE(load({{"GSWAP_PINNED_CAP", "1MiB"},
                    {"GSWAP_STAGING_BYTES", "256KiB"},
                    {"GSWAP_SUMMARY", "0"},
                    {"GSWAP_LOG", "debug"},
                    {"GSWAP_SWAP_THRESHOLD", "4MiB"},
                    {"GSWAP_DEBUG_SKIP_RESTORE", "1"},
                    {"GSWAP_HOOK_PROFILE", "1"}},
                   &c, &err))
      << err;
  EXPECT_EQ(c.pinned_cap, 1ull << 20);
  EXPECT_EQ(c.staging_bytes, 256ull << 10);
  EXPECT_FALSE(c.summary);
  EXPECT_EQ(c.log_level, LogLevel::kDebug);
  EXPECT_EQ(c.swap_threshold.bytes, 4ull << 20);
  EXPECT_TRUE(c.debug_skip_restore);
  EXPECT_TRUE(c.hook_profile);
}

}  // namespace
}  // namespace gswap::interpose
