// The CPU back end's use of the persistent compilation cache (docs/compiler.md, "Compilation
// cache"): a second process loads the step instead of compiling it; anything that changes the
// code misses; corrupt entries are recompiled and replaced; concurrent processes share a
// directory; an unusable directory compiles without caching and says so once. Each test uses its
// own temporary cache directory.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>

#include "child_process.h"
#include "codegen/cpu/step_cache.h"
#include "mlp_step.h"
#include "parity.h"

namespace ingot {
namespace {

namespace fs = std::filesystem;

constexpr const char* kWorkerFlag = "INGOT_STEP_CACHE_WORKER";
constexpr const char* kDirVariable = "INGOT_STEP_CACHE_TEST_DIR";

/// A fresh, empty directory for one test (removed by the test).
fs::path fresh_dir(const std::string& tag) {
  const fs::path dir = fs::temp_directory_path() / fmt::format("ingot_step_cache_{}_{}", tag, ::getpid());
  fs::remove_all(dir);
  return dir;
}

struct Step {
  testing::MlpSizes sizes{{12, 16, 5}};
  ir::Graph graph = trace(testing::mlp_train_step(sizes, 0.1), testing::mlp_step_types(sizes, 8), "mlp_step");
  std::vector<Array> args() const {
    std::vector<Array> a = testing::mlp_weights(sizes, 5);
    a.push_back(testing::random_array(Shape{8, 12}, DType::kF32, 9));
    a.push_back(Array::from_vector<int32_t>({0, 1, 2, 3, 4, 0, 1, 2}, Shape{8}));
    return a;
  }
};

codegen::CpuCompileOptions cached_in(const fs::path& dir) {
  codegen::CpuCompileOptions o;
  o.compile_cache_dir = dir.string();
  return o;
}

/// Compiles the step with `options`; returns its CompileInfo and outputs.
std::pair<CompileInfo, std::vector<Array>> compile_and_run(const codegen::CpuCompileOptions& options) {
  const Step step;
  std::shared_ptr<const Executable> exe = compile_graph(step.graph, options);
  return {exe->compile_info(), exe->run(step.args())};
}

void expect_same_outputs(const std::vector<Array>& a, const std::vector<Array>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i].to_doubles(), b[i].to_doubles()) << "output " << i;
}

std::vector<fs::path> entries(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() == ".ingotc") out.push_back(e.path());
  }
  return out;
}

/// Run as a child process (spawn_self): compiles the step with the cache in $INGOT_STEP_CACHE_TEST_DIR
/// and exits 0 when its outputs equal an uncached compile's. Prints whether the step was a hit.
TEST(StepCacheWorker, CompileWithTheSharedCache) {
  if (std::getenv(kWorkerFlag) == nullptr) GTEST_SKIP() << "worker of the StepCache tests (run by them)";
  const auto [info, got] = compile_and_run(cached_in(std::getenv(kDirVariable)));
  codegen::CpuCompileOptions off;
  off.compile_cache_dir = "";
  const auto [off_info, want] = compile_and_run(off);
  expect_same_outputs(got, want);
  std::printf("step_cache_hits=%lld\n", static_cast<long long>(info.step_cache_hits));
  if (::testing::Test::HasFailure()) std::_Exit(3);
  std::_Exit(info.step_cache_hits == 1 ? 10 : 11);  // 10: loaded from the cache, 11: compiled
}

std::vector<std::string> worker_env(const fs::path& dir) {
  std::vector<std::string> env = testing::rank_env(0, 1, 0, kWorkerFlag);
  env.push_back(std::string(kDirVariable) + "=" + dir.string());
  return env;
}

TEST(StepCache, ASecondProcessLoadsTheStepInsteadOfCompilingIt) {
  const fs::path dir = fresh_dir("second");
  const auto [first, first_out] = compile_and_run(cached_in(dir));
  EXPECT_EQ(first.step_cache_hits, 0);
  EXPECT_GT(first.cache_misses, 0);
  EXPECT_FALSE(entries(dir).empty());
  const pid_t child = testing::spawn_self("StepCacheWorker.*", worker_env(dir));
  ASSERT_GT(child, 0);
  EXPECT_EQ(testing::wait_child(child, std::chrono::steady_clock::now() + std::chrono::seconds(120)), 10)
      << "the second process compiled the step instead of loading it";
  fs::remove_all(dir);
}

TEST(StepCache, TwoProcessesFillingOneCacheConcurrentlyBothSucceed) {
  const fs::path dir = fresh_dir("concurrent");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(180);
  const pid_t a = testing::spawn_self("StepCacheWorker.*", worker_env(dir));
  const pid_t b = testing::spawn_self("StepCacheWorker.*", worker_env(dir));
  ASSERT_GT(a, 0);
  ASSERT_GT(b, 0);
  const int ra = testing::wait_child(a, deadline), rb = testing::wait_child(b, deadline);
  EXPECT_TRUE(ra == 10 || ra == 11) << ra;
  EXPECT_TRUE(rb == 10 || rb == 11) << rb;
  const auto [info, out] = compile_and_run(cached_in(dir));
  EXPECT_EQ(info.step_cache_hits, 1) << "what the two processes stored is a valid cached step";
  fs::remove_all(dir);
}

TEST(StepCache, AnythingThatChangesTheCodeMisses) {
  const fs::path dir = fresh_dir("options");
  compile_and_run(cached_in(dir));
  EXPECT_EQ(compile_and_run(cached_in(dir)).first.step_cache_hits, 1);
  codegen::CpuCompileOptions o3 = cached_in(dir);
  o3.opt_level = 3;
  EXPECT_EQ(compile_and_run(o3).first.step_cache_hits, 0) << "another LLVM optimisation level (the default is 2)";
  codegen::CpuCompileOptions serial = cached_in(dir);
  serial.num_threads = 1;
  const CompileInfo serial_info = compile_and_run(serial).first;
  EXPECT_EQ(serial_info.step_cache_hits, 0) << "another loop thread count";
  // The parts split after `outline` are the same MLIR; the loops still to be made from them are not.
  EXPECT_EQ(serial_info.cache_hits, 0) << "no object compiled for other loops is reused";
  codegen::CpuCompileOptions whole = cached_in(dir);
  whole.outline_kernels = false;
  EXPECT_EQ(compile_and_run(whole).first.step_cache_hits, 0) << "without outlining";
  fs::remove_all(dir);
}

TEST(StepCache, ManifestsRoundTripAndRejectOtherText) {
  codegen::detail::StepManifest m;
  m.stats.loop_nests = 7;
  m.stats.copies = 2;
  m.stats.scope_functions = 3;
  m.stats.peak_alloc_bytes = int64_t{3} << 33;
  m.result_arguments = {-1, 0, 4, -1};
  m.objects = {std::string(64, 'a'), std::string(64, 'b')};
  const std::optional<codegen::detail::StepManifest> back = codegen::detail::StepManifest::parse(m.serialize());
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->stats.loop_nests, 7);
  EXPECT_EQ(back->stats.copies, 2);
  EXPECT_EQ(back->stats.scope_functions, 3);
  EXPECT_EQ(back->stats.peak_alloc_bytes, int64_t{3} << 33);
  EXPECT_EQ(back->result_arguments, m.result_arguments);
  EXPECT_EQ(back->objects, m.objects);
  m.result_arguments.clear();
  EXPECT_TRUE(codegen::detail::StepManifest::parse(m.serialize())->result_arguments.empty());
  // An older format, a negative count, an index below -1 and a manifest without objects are misses.
  std::string text = m.serialize();
  EXPECT_FALSE(codegen::detail::StepManifest::parse("ingot-step-manifest 2\n1 2 3 4 5\n" + std::string(64, 'a')));
  EXPECT_FALSE(codegen::detail::StepManifest::parse("ingot-step-manifest 3\n1 2 3 4 5\nresult_arguments 0\n" +
                                                    std::string(64, 'a')));  // before peak_alloc_bytes
  EXPECT_FALSE(codegen::detail::StepManifest::parse("ingot-step-manifest 4\n1 2 3 4 5 6\nresult_arguments -1\n" +
                                                    std::string(64, 'a')));
  EXPECT_FALSE(codegen::detail::StepManifest::parse("ingot-step-manifest 4\n1 2 3 4 5 6\nresult_arguments 1 -2\n" +
                                                    std::string(64, 'a')));
  EXPECT_FALSE(codegen::detail::StepManifest::parse("ingot-step-manifest 4\n1 2 3 4 5 -6\nresult_arguments 0\n" +
                                                    std::string(64, 'a')));
  EXPECT_FALSE(codegen::detail::StepManifest::parse("ingot-step-manifest 4\n1 2 3 4 5 6\nresult_arguments 0\n"));
  EXPECT_TRUE(codegen::detail::StepManifest::parse(text));
}

TEST(StepCache, KeysDependOnVersionTargetOptionsAndIr) {
  const codegen::CpuCompileOptions options;
  const codegen::detail::CacheContext base =
      codegen::detail::cache_context(options, codegen::default_cpu_pipeline(), "main");
  EXPECT_NE(base.version.find("ingot"), std::string::npos);
  EXPECT_FALSE(base.target.empty());
  const std::string key = codegen::detail::step_key(base, "module {}");
  EXPECT_EQ(key.size(), 64u);
  EXPECT_EQ(key, codegen::detail::step_key(base, "module {}")) << "deterministic";
  codegen::detail::CacheContext other_version = base, other_cpu = base, other_options = base;
  other_version.version += "-next";
  other_cpu.target += ",-avx512f";
  other_options.options += "opt_level=2;";
  EXPECT_NE(key, codegen::detail::step_key(other_version, "module {}"));
  EXPECT_NE(key, codegen::detail::step_key(other_cpu, "module {}"));
  EXPECT_NE(key, codegen::detail::step_key(other_options, "module {}"));
  EXPECT_NE(key, codegen::detail::step_key(base, "module { }"));
  const std::string object = codegen::detail::object_key(base, false, "BC");
  EXPECT_NE(object, codegen::detail::object_key(base, true, "BC"));
  EXPECT_NE(object, codegen::detail::object_key(other_version, false, "BC"));
  EXPECT_NE(object, codegen::detail::object_key(other_cpu, false, "BC"));
  EXPECT_NE(object, codegen::detail::object_key(base, false, "BD"));
  EXPECT_NE(object, codegen::detail::object_key(base, false, "BC", "stage loops=x;")) << "later stages";
  EXPECT_NE(codegen::detail::object_key(base, false, "BC", "stage loops=x;"),
            codegen::detail::object_key(base, false, "BC", "stage loops=y;"));
}

TEST(StepCache, CorruptOrTruncatedEntriesAreRecompiledAndReplaced) {
  const fs::path dir = fresh_dir("corrupt");
  const auto [first, want] = compile_and_run(cached_in(dir));
  const std::vector<fs::path> files = entries(dir);
  ASSERT_FALSE(files.empty());
  for (size_t i = 0; i < files.size(); ++i) {
    if (i % 2 == 0) {  // flip a byte of the payload
      std::fstream f(files[i], std::ios::in | std::ios::out | std::ios::binary);
      f.seekg(-1, std::ios::end);
      char c = 0;
      f.get(c);
      f.seekp(-1, std::ios::end);
      f.put(static_cast<char>(c ^ 0x5a));
    } else {  // truncate it
      fs::resize_file(files[i], fs::file_size(files[i]) / 2);
    }
  }
  ::testing::internal::CaptureStderr();
  const auto [second, got] = compile_and_run(cached_in(dir));
  const std::string warnings = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(second.step_cache_hits, 0);
  EXPECT_GT(second.cache_misses, 0);
  EXPECT_NE(warnings.find("corrupt"), std::string::npos) << warnings;
  expect_same_outputs(got, want);
  EXPECT_EQ(compile_and_run(cached_in(dir)).first.step_cache_hits, 1) << "the entries were replaced";
  fs::remove_all(dir);
}

TEST(StepCache, UnusableDirectoriesCompileWithoutCachingAndSaySoOnce) {
  const fs::path root = fresh_dir("unusable");
  fs::create_directories(root);
  const fs::path file = root / "a-file";
  std::ofstream(file) << "not a directory";
  codegen::CpuCompileOptions off;
  off.compile_cache_dir = "";
  const std::vector<Array> want = compile_and_run(off).second;
  for (const fs::path& bad : {file, file / "sub", fs::path("/proc/ingot-compile-cache")}) {
    ::testing::internal::CaptureStderr();
    const auto [first, got] = compile_and_run(cached_in(bad));
    const auto [second, again] = compile_and_run(cached_in(bad));
    const std::string warnings = ::testing::internal::GetCapturedStderr();
    EXPECT_EQ(first.step_cache_hits + second.step_cache_hits, 0) << bad;
    EXPECT_EQ(first.cache_hits + second.cache_hits, 0) << bad;
    expect_same_outputs(got, want);
    expect_same_outputs(again, want);
    size_t lines = 0;
    for (size_t at = warnings.find("warning"); at != std::string::npos; at = warnings.find("warning", at + 1)) ++lines;
    EXPECT_EQ(lines, 1u) << "one warning for two compiles with " << bad << ":\n" << warnings;
    EXPECT_NE(warnings.find(bad.string()), std::string::npos) << warnings;
  }
  fs::remove_all(root);
}

TEST(StepCache, DumpsBypassTheCache) {
  const fs::path dir = fresh_dir("dumps");
  compile_and_run(cached_in(dir));
  codegen::CpuCompileOptions dumping = cached_in(dir);
  dumping.dump_dir = (dir / "dumps").string();
  EXPECT_EQ(compile_and_run(dumping).first.step_cache_hits, 0);
  EXPECT_TRUE(fs::exists(dir / "dumps" / "00-input.mlir"));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace ingot

namespace ingot {
namespace {

TEST(StepCache, CachedObjectsThatDoNotLinkAreRecompiledAndReplaced) {
  // Entries with valid checksums but wrong contents: every object replaced by the first one
  // (duplicate symbols, a missing entry point), written with correct headers by the cache itself.
  const fs::path dir = fresh_dir("nolink");
  const auto [first, want] = compile_and_run(cached_in(dir));
  std::vector<std::string> object_keys;
  for (const fs::path& p : entries(dir)) object_keys.push_back(p.stem().string());
  codegen::CompileCache cache(dir.string());
  std::optional<std::string> any_object;
  for (const std::string& k : object_keys) {
    std::optional<std::string> payload = cache.load(k);
    ASSERT_TRUE(payload.has_value());
    if (payload->rfind("ingot-step-manifest", 0) != 0 && !any_object) any_object = payload;
  }
  ASSERT_TRUE(any_object.has_value());
  for (const std::string& k : object_keys) {
    std::optional<std::string> payload = cache.load(k);
    if (payload->rfind("ingot-step-manifest", 0) != 0) {
      ASSERT_TRUE(cache.store(k, *any_object));
    }
  }
  ::testing::internal::CaptureStderr();
  const auto [second, got] = compile_and_run(cached_in(dir));
  const std::string warnings = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(warnings.find("does not link"), std::string::npos) << warnings;
  expect_same_outputs(got, want);
  const auto [third, again] = compile_and_run(cached_in(dir));
  EXPECT_EQ(third.step_cache_hits, 0) << "the broken step was forgotten";
  expect_same_outputs(again, want);
  EXPECT_EQ(compile_and_run(cached_in(dir)).first.step_cache_hits, 1) << "and stored anew";
  fs::remove_all(dir);
}

}  // namespace
}  // namespace ingot
