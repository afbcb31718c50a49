// detail::bracket_depth (include/ingot/runtime/text_scan.h): the pre-parse nesting check of the
// safetensors and MLIR readers.
#include "ingot/runtime/text_scan.h"

#include <gtest/gtest.h>

#include <string>

namespace ingot {
namespace {

using detail::bracket_depth;

TEST(BracketDepth, CountsEveryBracketKindOutsideStrings) {
  EXPECT_EQ(bracket_depth("", 10, false), 0);
  EXPECT_EQ(bracket_depth("{\"a\": [1, (2)]}", 10, false), 3);
  EXPECT_EQ(bracket_depth("[][][]", 10, false), 1);
  // Brackets in strings, escaped quotes included, do not count.
  EXPECT_EQ(bracket_depth(R"({"k": "[[[\"[[[{"})", 10, false), 1);
  // Unbalanced closers never take the depth below 0, so they cannot hide later nesting.
  EXPECT_EQ(bracket_depth("]]]]{{", 10, false), 2);
}

TEST(BracketDepth, SkipsLineCommentsWhenAsked) {
  const std::string text = "module { // [[[[[[\n  func {}\n}";
  EXPECT_EQ(bracket_depth(text, 100, true), 2);
  EXPECT_EQ(bracket_depth(text, 100, false), 8);
  EXPECT_EQ(bracket_depth("{ // unterminated [[[", 100, true), 1);
}

TEST(BracketDepth, StopsAtTheLimit) {
  const std::string deep = std::string(1'000'000, '[') + std::string(1'000'000, ']');
  EXPECT_EQ(bracket_depth(deep, 65, false), 65);
  EXPECT_EQ(bracket_depth(deep, 2'000'000, false), 1'000'000);
}

}  // namespace
}  // namespace ingot
