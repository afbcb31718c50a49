// ingot::version() and the INGOT_VERSION_* macros (include/ingot/runtime/version.h, generated from
// project(ingot VERSION ...)): the library and the headers agree, and the parts make the string.
#include "ingot/runtime/version.h"

#include <gtest/gtest.h>

#include <fmt/format.h>

#include <string>

namespace ingot {
namespace {

TEST(Version, TheLibraryAndTheHeadersAgree) {
  EXPECT_EQ(std::string(version()), INGOT_VERSION_STRING);
  EXPECT_EQ(fmt::format("{}.{}.{}", INGOT_VERSION_MAJOR, INGOT_VERSION_MINOR, INGOT_VERSION_PATCH),
            INGOT_VERSION_STRING);
  EXPECT_EQ(INGOT_VERSION, INGOT_VERSION_MAJOR * 10000 + INGOT_VERSION_MINOR * 100 + INGOT_VERSION_PATCH);
  EXPECT_GE(INGOT_VERSION, 100);  // 0.1.0 or later
}

}  // namespace
}  // namespace ingot
