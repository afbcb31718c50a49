// Where the compilation cache lives and how big it may grow, as users name them: the default
// directory ($XDG_CACHE_HOME, $HOME, the password database) and --compile-cache-max-size values
// (compile_cache.h).
#include <gtest/gtest.h>

#include <cstdlib>
#include <limits>
#include <optional>
#include <string>

#include <unistd.h>

#include "ingot/codegen/compile_cache.h"
#include "test_util.h"

namespace ingot::codegen {
namespace {

/// Sets or unsets an environment variable for a scope, restoring it after.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value != nullptr) {
      ::setenv(name, value, 1);
    } else {
      ::unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(CompileCache, DefaultDirIsXdgCacheHomeThenHome) {
  {
    ScopedEnv xdg("XDG_CACHE_HOME", "/x/cache");
    ScopedEnv home("HOME", "/home/u");
    EXPECT_EQ(default_compile_cache_dir(), "/x/cache/ingot");
  }
  {
    ScopedEnv xdg("XDG_CACHE_HOME", "");
    ScopedEnv home("HOME", "/home/u");
    EXPECT_EQ(default_compile_cache_dir(), "/home/u/.cache/ingot");
  }
  {
    ScopedEnv xdg("XDG_CACHE_HOME", "relative/cache");  // ignored, as the XDG spec says
    ScopedEnv home("HOME", "/home/u");
    EXPECT_EQ(default_compile_cache_dir(), "/home/u/.cache/ingot");
  }
  {
    // Neither variable: the password database's home directory (this test runs as a user that has
    // one, as every CI and developer account does).
    ScopedEnv xdg("XDG_CACHE_HOME", nullptr);
    ScopedEnv home("HOME", nullptr);
    const std::string pw_home = password_database_home();
    ASSERT_FALSE(pw_home.empty()) << "no password database entry for uid " << ::getuid();
    EXPECT_EQ(pw_home.front(), '/');
    EXPECT_EQ(default_compile_cache_dir(), pw_home + "/.cache/ingot");
  }
}

TEST(CompileCacheSizeOption, BytesAndBinaryUnits) {
  EXPECT_EQ(compile_cache_size_option("default"), kDefaultCompileCacheMaxBytes);
  EXPECT_EQ(compile_cache_size_option("0"), 0);
  EXPECT_EQ(compile_cache_size_option("12345"), 12345);
  EXPECT_EQ(compile_cache_size_option("500M"), int64_t{500} << 20);
  EXPECT_EQ(compile_cache_size_option("2g"), int64_t{2} << 30);
  EXPECT_EQ(compile_cache_size_option("1T"), int64_t{1} << 40);
  EXPECT_EQ(compile_cache_size_option("8k"), 8192);
  EXPECT_EQ(compile_cache_size_option("9223372036854775807"), std::numeric_limits<int64_t>::max());
}

TEST(CompileCacheSizeOption, AnythingElseNamesTheOptionAndTheValue) {
  for (const char* bad : {"", "-1", "1.5G", "2GB", "G", "2X", " 2G", "9223372036854775808", "8388608T"}) {
    ingot::testing::expect_error([&] { compile_cache_size_option(bad); }, ErrorCode::kInvalidArgument,
                                 {"--compile-cache-max-size", std::string("'") + bad + "'"});
  }
}

}  // namespace
}  // namespace ingot::codegen
