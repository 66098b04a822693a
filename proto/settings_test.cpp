// settings_test.cpp: the shared setting parsers accept what the README promises and nothing else.
#include "proto/settings.h"

#include <gtest/gtest.h>

namespace gswap::settings {
namespace {

TEST(ParseSize, UnitsAndPercentages) {
  Size s;
  ASSERT_TRUE(parse_size("6GiB", &s));
  EXPECT_EQ(s.bytes, 6ull << 30);
  ASSERT_TRUE(parse_size(" 512 MiB ", &s));
  EXPECT_EQ(s.bytes, 512ull << 20);
  ASSERT_TRUE(parse_size("1.5GB", &s));
  EXPECT_EQ(s.bytes, 1500000000ull);
  ASSERT_TRUE(parse_size("4096", &s));
  EXPECT_EQ(s.bytes, 4096u);
  ASSERT_TRUE(parse_size("75%", &s));
  EXPECT_TRUE(s.is_percent);
  EXPECT_EQ(s.resolve(1000), 750u);
}

TEST(ParseSize, RejectsGarbage) {
  Size s;
  for (const char* bad : {"", "GiB", "-1", "6 parsecs", "0%", "101%", "1e3", "12GiBs", "%"})
    EXPECT_FALSE(parse_size(bad, &s)) << bad;
}

TEST(ParseBool, Forms) {
  bool b = false;
  EXPECT_TRUE(parse_bool("YES", &b) && b);
  EXPECT_TRUE(parse_bool("0", &b) && !b);
  EXPECT_FALSE(parse_bool("maybe", &b));
}

TEST(ParseUint, Overflow) {
  std::uint64_t v;
  EXPECT_TRUE(parse_uint("18446744073709551615", &v));
  EXPECT_FALSE(parse_uint("18446744073709551616", &v));
  EXPECT_FALSE(parse_uint("12a", &v));
}

TEST(Declarations, DefaultsParseByTheirOwnType) {
  for (const Declaration& d : kDeclarations) {
    std::string_view type = d.type;
    if (type == "Size") {
      Size s;
      EXPECT_TRUE(parse_size(d.default_value, &s)) << d.ident;
    } else if (type == "Bool") {
      bool b;
      EXPECT_TRUE(parse_bool(d.default_value, &b)) << d.ident;
    } else if (type.starts_with("Enum:")) {
      EXPECT_TRUE(enum_allows(type, d.default_value)) << d.ident;
    }
    EXPECT_NE(std::string_view(d.doc), "") << d.ident;
  }
  EXPECT_NE(find("budget"), nullptr);
  EXPECT_EQ(find("nonsense"), nullptr);
}

}  // namespace
}  // namespace gswap::settings
