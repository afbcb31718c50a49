// OutputFile / write_output_file: no partial files, symbolic links followed (the link stays),
// special files such as /dev/null written in place (never replaced by a regular file).
#include "ingot/trainer/output_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "test_util.h"

namespace ingot {
namespace {

namespace fs = std::filesystem;

std::string read(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

TEST(OutputFile, FollowsLinksAndWritesSpecialFilesInPlace) {
  const fs::path dir = fs::temp_directory_path() / ("ingot_output_file_test_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "real");
  fs::create_symlink("real/target.csv", dir / "link.csv");
  write_output_file((dir / "link.csv").string(), "a,b\r\n", "test");
  EXPECT_TRUE(fs::is_symlink(fs::symlink_status(dir / "link.csv")));  // still a link
  EXPECT_EQ(read(dir / "real" / "target.csv"), "a,b\r\n");            // its target written
  EXPECT_EQ(resolve_output((dir / "link.csv").string()).path, dir / "real/target.csv");

  ASSERT_TRUE(fs::is_character_file("/dev/null"));
  EXPECT_TRUE(resolve_output("/dev/null").in_place);
  write_output_file("/dev/null", "discarded", "test");
  EXPECT_TRUE(fs::is_character_file("/dev/null"));  // not replaced by a regular file

  // A failed write leaves the old file and no temporary file.
  write_output_file((dir / "kept.txt").string(), "old", "test");
  {
    OutputFile f((dir / "kept.txt").string(), "test");
    f.write("new, never committed");
  }
  EXPECT_EQ(read(dir / "kept.txt"), "old");
  int64_t entries = 0;
  for (const auto& e : fs::directory_iterator(dir))
    entries += e.path().filename().string().rfind(".kept", 0) == 0 ? 1 : 0;
  EXPECT_EQ(entries, 0);
  testing::expect_error([&] { write_output_file((dir / "missing" / "x.txt").string(), "x", "test"); },
                        ErrorCode::kNotFound, {"test: writing", "missing/x.txt"});
  fs::remove_all(dir);
}

}  // namespace
}  // namespace ingot
