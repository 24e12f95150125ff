#include "prompt_escapes.h"

#include <gtest/gtest.h>

namespace stowage::tools {
namespace {

TEST(ProcessEscapes, NamedEscapes) {
  EXPECT_EQ(ProcessEscapes(R"(a\nb\rc\td)"), "a\nb\rc\td");
  EXPECT_EQ(ProcessEscapes(R"(\'q\' \"q\" \\)"), "'q' \"q\" \\");
  EXPECT_EQ(ProcessEscapes(R"(\\n)"), "\\n");  // an escaped backslash, then a plain n
  EXPECT_EQ(ProcessEscapes("plain text"), "plain text");
  EXPECT_EQ(ProcessEscapes(""), "");
}

TEST(ProcessEscapes, HexBytes) {
  EXPECT_EQ(ProcessEscapes(R"(\x41\x62)"), "Ab");
  EXPECT_EQ(ProcessEscapes(R"(\x0a)"), "\n");
  EXPECT_EQ(ProcessEscapes(R"(\xFf)"), "\xff");
  EXPECT_EQ(ProcessEscapes(R"(\x414)"), "A4");  // two digits only
  // Fewer than two hex digits: kept as written.
  EXPECT_EQ(ProcessEscapes(R"(\x4)"), R"(\x4)");
  EXPECT_EQ(ProcessEscapes(R"(\x4g)"), R"(\x4g)");
  EXPECT_EQ(ProcessEscapes(R"(\x)"), R"(\x)");
}

TEST(ProcessEscapes, UnknownAndTrailing) {
  EXPECT_EQ(ProcessEscapes(R"(\q\0)"), R"(\q\0)");
  EXPECT_EQ(ProcessEscapes("end\\"), "end\\");
  EXPECT_EQ(ProcessEscapes("\\"), "\\");
}

}  // namespace
}  // namespace stowage::tools
