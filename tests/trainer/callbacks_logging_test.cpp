// CSVLogger: Keras's file format (sorted header, added val_ columns, repr(float) values, NA,
// "\r\n"), streaming vs. at-train-end vs. in-memory writing, append, separators and quoting,
// reuse across fits, and every bad option; python_float against Python's repr.
#include "ingot/trainer/callbacks_logging.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "ingot/runtime/error.h"
#include "test_util.h"

namespace ingot::callbacks {
namespace {

namespace fs = std::filesystem;
using ::ingot::testing::expect_error;

/// A fresh directory per test, removed afterwards.
class CSVLoggerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           (std::string("ingot_csvlogger_test_") + info->name() + "_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  static std::string read(const std::string& p) {
    std::ifstream f(p, std::ios::binary);
    std::ostringstream s;
    s << f.rdbuf();
    return s.str();
  }
  static void write(const std::string& p, const std::string& text) {
    std::ofstream f(p, std::ios::binary);
    f << text;
  }

  fs::path dir_;
};

/// Runs a fit's epoch hooks with `epochs` logs through a list holding `csv`.
void run_epochs(CallbackList& list, const std::vector<Logs>& epochs) {
  list.on_train_begin({});
  for (size_t e = 0; e < epochs.size(); ++e) list.on_epoch_end(static_cast<int64_t>(e), epochs[e]);
  list.on_train_end(epochs.empty() ? Logs{} : epochs.back());
}

TEST(PythonFloat, MatchesPythonRepr) {
  // Expected strings are CPython's repr() of the same doubles.
  EXPECT_EQ(python_float(0.5), "0.5");
  EXPECT_EQ(python_float(1.0), "1.0");
  EXPECT_EQ(python_float(-2.0), "-2.0");
  EXPECT_EQ(python_float(0.0), "0.0");
  EXPECT_EQ(python_float(123.0), "123.0");
  EXPECT_EQ(python_float(static_cast<double>(0.1f)), "0.10000000149011612");
  EXPECT_EQ(python_float(0.1), "0.1");
  EXPECT_EQ(python_float(0.0001), "0.0001");
  EXPECT_EQ(python_float(0.00001), "1e-05");
  EXPECT_EQ(python_float(1.5e-7), "1.5e-07");
  EXPECT_EQ(python_float(1e16), "1e+16");
  EXPECT_EQ(python_float(1234567890123456.0), "1234567890123456.0");
  EXPECT_EQ(python_float(2.5e100), "2.5e+100");
  EXPECT_EQ(python_float(std::numeric_limits<double>::quiet_NaN()), "nan");
  EXPECT_EQ(python_float(std::numeric_limits<double>::infinity()), "inf");
  EXPECT_EQ(python_float(-std::numeric_limits<double>::infinity()), "-inf");
}

TEST(CsvField, QuotesLikeTheExcelDialect) {
  EXPECT_EQ(csv_field("loss"), "loss");
  EXPECT_EQ(csv_field("a,b"), "\"a,b\"");
  EXPECT_EQ(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
  EXPECT_EQ(csv_field("two\nlines"), "\"two\nlines\"");
  EXPECT_EQ(csv_field("a,b", ";"), "a,b");
  EXPECT_EQ(csv_field("a;b", ";"), "\"a;b\"");
}

TEST_F(CSVLoggerTest, WritesKerasFormatAndStreamsEachRow) {
  auto csv = std::make_shared<CSVLogger>(CSVLoggerOptions{.filename = path("log.csv")});
  CallbackList list({csv}, {.params = {.epochs = 3, .verbose = 0}});
  list.on_train_begin({});
  EXPECT_EQ(read(path("log.csv")), "");  // created (truncated) before the first epoch
  // No validation in epoch 0: Keras adds val_ columns for every name (sorted names first).
  list.on_epoch_end(0, {{"loss", 0.5}, {"accuracy", static_cast<double>(0.1f)}});
  const std::string header = "epoch,accuracy,loss,val_accuracy,val_loss\r\n";
  const std::string row0 = "0,0.10000000149011612,0.5,NA,NA\r\n";
  EXPECT_EQ(read(path("log.csv")), header + row0);  // streamed: there before the fit ends
  list.on_epoch_end(1, {{"loss", 0.25}, {"accuracy", 1.0}, {"val_loss", 1e-5}, {"val_accuracy", 0.75}});
  // A name the first epoch lacked is not a column.
  list.on_epoch_end(2, {{"loss", 2.0}, {"extra", 9.0}});
  list.on_train_end({});
  const std::string expected = header + row0 + "1,1.0,0.25,0.75,1e-05\r\n" + "2,NA,2.0,NA,NA\r\n";
  EXPECT_EQ(read(path("log.csv")), expected);
  EXPECT_EQ(csv->text(), expected);
  EXPECT_EQ(csv->keys(), (std::vector<std::string>{"accuracy", "loss", "val_accuracy", "val_loss"}));

  // With val_ names in the first epoch, the columns are just the sorted names; a reused logger
  // starts the file over.
  run_epochs(list, {{{"loss", 1.0}, {"val_loss", 2.0}, {"learning_rate", 0.125}}});
  EXPECT_EQ(read(path("log.csv")), "epoch,learning_rate,loss,val_loss\r\n0,0.125,1.0,2.0\r\n");
}

TEST_F(CSVLoggerTest, AppendingToAFifoIsRefusedInsteadOfBlocking) {
  // append = true reads the file first; a FIFO would block that read until a writer came.
  ASSERT_EQ(::mkfifo(path("log.fifo").c_str(), 0600), 0);
  auto csv = std::make_shared<CSVLogger>(CSVLoggerOptions{.filename = path("log.fifo"), .append = true});
  CallbackList list({csv}, {.params = {.verbose = 0}});
  testing::expect_error([&] { run_epochs(list, {{{"loss", 1.0}}}); }, ErrorCode::kInvalidArgument,
                        {path("log.fifo"), "is a FIFO"});
}

TEST_F(CSVLoggerTest, AppendWritesTheHeaderOnlyForANewOrHeaderlessFile) {
  auto csv = std::make_shared<CSVLogger>(CSVLoggerOptions{.filename = path("a.csv"), .append = true});
  CallbackList list({csv}, {.params = {.verbose = 0}});
  run_epochs(list, {{{"loss", 1.0}, {"val_loss", 2.0}}});
  run_epochs(list, {{{"loss", 0.5}, {"val_loss", 1.5}}, {{"loss", 0.25}, {"val_loss", 1.0}}});
  EXPECT_EQ(read(path("a.csv")), "epoch,loss,val_loss\r\n0,1.0,2.0\r\n0,0.5,1.5\r\n1,0.25,1.0\r\n");
  EXPECT_EQ(csv->text(), "0,0.5,1.5\r\n1,0.25,1.0\r\n");

  // An existing file whose first line is empty gets a header.
  write(path("b.csv"), "\r\nold\r\n");
  auto b = std::make_shared<CSVLogger>(CSVLoggerOptions{.filename = path("b.csv"), .append = true});
  CallbackList list_b({b}, {.params = {.verbose = 0}});
  run_epochs(list_b, {{{"loss", 3.0}, {"val_loss", 4.0}}});
  EXPECT_EQ(read(path("b.csv")), "\r\nold\r\nepoch,loss,val_loss\r\n0,3.0,4.0\r\n");

  // Without append an existing file is replaced.
  auto c = std::make_shared<CSVLogger>(CSVLoggerOptions{.filename = path("b.csv")});
  CallbackList list_c({c}, {.params = {.verbose = 0}});
  run_epochs(list_c, {{{"loss", 5.0}, {"val_loss", 6.0}}});
  EXPECT_EQ(read(path("b.csv")), "epoch,loss,val_loss\r\n0,5.0,6.0\r\n");
}

TEST_F(CSVLoggerTest, SeparatorAndQuotedNames) {
  auto csv = std::make_shared<CSVLogger>(CSVLoggerOptions{.filename = path("s.csv"), .separator = ";"});
  CallbackList list({csv}, {.params = {.verbose = 0}});
  run_epochs(list, {{{"a;b", 1.0}, {"val_x", -0.5}}});
  EXPECT_EQ(read(path("s.csv")), "epoch;\"a;b\";val_x\r\n0;1.0;-0.5\r\n");
}

TEST_F(CSVLoggerTest, AtTrainEndAndInMemory) {
  auto at_end =
      std::make_shared<CSVLogger>(CSVLoggerOptions{.filename = path("end.csv"), .write = CSVLoggerWrite::kAtTrainEnd});
  CallbackList list({at_end}, {.params = {.verbose = 0}});
  list.on_train_begin({});
  list.on_epoch_end(0, {{"loss", 1.0}});
  EXPECT_FALSE(fs::exists(path("end.csv")));  // nothing until training has ended
  list.on_train_end({});
  EXPECT_EQ(read(path("end.csv")), "epoch,loss,val_loss\r\n0,1.0,NA\r\n");

  // Appending at train end keeps the previous content (and its header).
  auto append_end = std::make_shared<CSVLogger>(
      CSVLoggerOptions{.filename = path("end.csv"), .append = true, .write = CSVLoggerWrite::kAtTrainEnd});
  CallbackList list2({append_end}, {.params = {.verbose = 0}});
  run_epochs(list2, {{{"loss", 0.5}}});
  EXPECT_EQ(read(path("end.csv")), "epoch,loss,val_loss\r\n0,1.0,NA\r\n0,0.5,NA\r\n");

  auto memory = std::make_shared<CSVLogger>(CSVLoggerOptions{.write = CSVLoggerWrite::kInMemory});
  CallbackList list3({memory}, {.params = {.verbose = 0}});
  run_epochs(list3, {{{"loss", 0.5}, {"val_loss", 0.75}}});
  EXPECT_EQ(memory->text(), "epoch,loss,val_loss\r\n0,0.5,0.75\r\n");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator{}), 1);  // end.csv only
}

TEST_F(CSVLoggerTest, RejectsBadOptionsAndUnwritableFiles) {
  expect_error([] { CSVLogger({.filename = ""}); }, ErrorCode::kInvalidArgument, {"filename is empty"});
  expect_error([&] { CSVLogger({.filename = path("x.csv"), .separator = ""}); }, ErrorCode::kInvalidArgument,
               {"separator = ''"});
  expect_error([&] { CSVLogger({.filename = path("x.csv"), .separator = ";;"}); }, ErrorCode::kInvalidArgument,
               {"separator = ';;'"});
  expect_error([&] { CSVLogger({.filename = path("x.csv"), .separator = "\""}); }, ErrorCode::kInvalidArgument,
               {"separator"});
  // A missing folder fails at train begin, before any epoch ran.
  auto csv = std::make_shared<CSVLogger>(CSVLoggerOptions{.filename = path("no_dir/x.csv")});
  CallbackList list({csv}, {.params = {.verbose = 0}});
  expect_error([&] { list.on_train_begin({}); }, ErrorCode::kInvalidArgument, {"cannot write", "no_dir/x.csv"});
  // A directory as the at-train-end target fails at train end and leaves no temporary file.
  auto dir =
      std::make_shared<CSVLogger>(CSVLoggerOptions{.filename = dir_.string(), .write = CSVLoggerWrite::kAtTrainEnd});
  CallbackList list2({dir}, {.params = {.verbose = 0}});
  list2.on_train_begin({});
  list2.on_epoch_end(0, {{"loss", 1.0}});
  expect_error([&] { list2.on_train_end({}); }, ErrorCode::kInvalidArgument, {"cannot write", dir_.string()});
  EXPECT_FALSE(fs::exists(dir_.string() + ".ingot-tmp"));
}

}  // namespace
}  // namespace ingot::callbacks
