// CSV files (ingot/trainer/csv.h): a small iris-like table against hard-coded values, choosing
// columns by name and by index, label numbering (integers as class ids, text sorted as sklearn's
// LabelEncoder sorts it), RFC 4180 quoting, line ends and byte order marks, missing values,
// dtypes, and one test per error, checking its code and that the message names the file, the
// line and column and the offending text.
#include "ingot/trainer/csv.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <limits>
#include <string>
#include <vector>

namespace ingot {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

/// The ingot::Error `fn` throws; a test failure (and an Error of code kInternal) when it throws
/// nothing or another exception.
Error error_from(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "threw a non-ingot exception: " << e.what();
    return Error(ErrorCode::kInternal, "a non-ingot exception");
  }
  ADD_FAILURE() << "did not throw";
  return Error(ErrorCode::kInternal, "no exception");
}

/// Expects `fn` to throw ingot::Error with `code` and a what() containing every needle.
void expect_error(const std::function<void()>& fn, ErrorCode code, const std::vector<std::string>& needles) {
  const Error e = error_from(fn);
  EXPECT_EQ(e.code(), code) << e.what();
  for (const std::string& needle : needles) EXPECT_THAT(std::string(e.what()), HasSubstr(needle));
}

/// A fresh directory per test, removed afterwards.
class CsvTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ =
        fs::temp_directory_path() / (std::string("ingot_csv_test_") + info->name() + "_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path(const std::string& name = "data.csv") const { return (dir_ / name).string(); }

  /// Writes `text` to the test's data.csv (as bytes) and returns its path.
  std::string write(const std::string& text) const {
    std::ofstream out(path(), std::ios::binary | std::ios::trunc);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    return path();
  }

  /// load_csv of `text` written to a file.
  CsvData load(const std::string& text, const CsvOptions& options = {}) const { return load_csv(write(text), options); }

  /// Expects load_csv of `text` to throw `code` with a message naming the file and every needle.
  void expect_load_error(const std::string& text, const CsvOptions& options, ErrorCode code,
                         std::vector<std::string> needles) const {
    const std::string p = write(text);
    needles.push_back("'" + p + "'");
    expect_error([&] { load_csv(p, options); }, code, needles);
  }

  fs::path dir_;
};

constexpr float kInf = std::numeric_limits<float>::infinity();

const std::string kIris =
    "sepal_length,sepal_width,petal_length,petal_width,species\n"
    "6.3,3.3,6.0,2.5,virginica\n"
    "5.1,3.5,1.4,0.2,setosa\n"
    "7.0,3.2,4.7,1.4,versicolor\n"
    "4.9,3.0,1.4,0.2,setosa\n";

// --- reading -----------------------------------------------------------------------------------

TEST_F(CsvTest, ReadsATableWithAHeaderAndTextLabels) {
  const CsvData d = load(kIris, {.label_column = "species"});
  EXPECT_EQ(d.x.dtype(), DType::kF32);
  EXPECT_EQ(d.x.shape(), (Shape{4, 4}));
  EXPECT_EQ(d.x.to_vector<float>(), (std::vector<float>{6.3f, 3.3f, 6.0f, 2.5f, 5.1f, 3.5f, 1.4f, 0.2f, 7.0f, 3.2f,
                                                        4.7f, 1.4f, 4.9f, 3.0f, 1.4f, 0.2f}));
  ASSERT_TRUE(d.y.has_value());
  EXPECT_EQ(d.y->dtype(), DType::kI32);
  EXPECT_EQ(d.y->shape(), (Shape{4}));
  EXPECT_EQ(d.y->to_vector<int32_t>(), (std::vector<int32_t>{2, 0, 1, 0}));
  EXPECT_THAT(d.classes, ElementsAre("setosa", "versicolor", "virginica"));
  EXPECT_THAT(d.feature_names, ElementsAre("sepal_length", "sepal_width", "petal_length", "petal_width"));
}

TEST_F(CsvTest, ChoosesFeatureColumnsByNameInTheGivenOrder) {
  const CsvData d = load(kIris, {.columns = {"petal_width", "sepal_length"}, .label_column = "species"});
  EXPECT_EQ(d.x.shape(), (Shape{4, 2}));
  EXPECT_EQ(d.x.to_vector<float>(), (std::vector<float>{2.5f, 6.3f, 0.2f, 5.1f, 1.4f, 7.0f, 0.2f, 4.9f}));
  EXPECT_THAT(d.feature_names, ElementsAre("petal_width", "sepal_length"));
  EXPECT_EQ(d.y->to_vector<int32_t>(), (std::vector<int32_t>{2, 0, 1, 0}));
}

TEST_F(CsvTest, ChoosesColumnsByIndex) {
  const CsvData d = load(kIris, {.column_indices = {3, 0}, .label_index = 4});
  EXPECT_EQ(d.x.to_vector<float>(), (std::vector<float>{2.5f, 6.3f, 0.2f, 5.1f, 1.4f, 7.0f, 0.2f, 4.9f}));
  EXPECT_THAT(d.feature_names, ElementsAre("petal_width", "sepal_length"));
  EXPECT_THAT(d.classes, ElementsAre("setosa", "versicolor", "virginica"));
}

TEST_F(CsvTest, WithoutALabelEveryColumnIsAFeature) {
  const CsvData d = load("a,b\n1,2\n3,4\n");
  EXPECT_EQ(d.x.shape(), (Shape{2, 2}));
  EXPECT_EQ(d.x.to_vector<float>(), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_FALSE(d.y.has_value());
  EXPECT_TRUE(d.classes.empty());
  // With a label and no feature columns named: every other column, in the file's order.
  const CsvData l = load("a,label,b\n1,x,2\n3,y,4\n", {.label_index = 1});
  EXPECT_EQ(l.x.to_vector<float>(), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_THAT(l.feature_names, ElementsAre("a", "b"));
}

TEST_F(CsvTest, IntegerLabelsAreClassIds) {
  const CsvData d = load("f,label\n0.5,2\n1.5,0\n2.5, 2\n3.5,002\n", {.label_column = "label"});
  EXPECT_EQ(d.y->to_vector<int32_t>(), (std::vector<int32_t>{2, 0, 2, 2}));
  EXPECT_THAT(d.classes, ElementsAre("0", "1", "2"));
}

TEST_F(CsvTest, OtherLabelsAreNumberedInSortedOrder) {
  // Not all integers: every label is text, sorted by bytes ("10" < "9" < "B" < "a"), as
  // LabelEncoder sorts them; surrounding spaces do not count.
  const CsvData d = load("f,label\n1,b\n2,B\n3,10\n4,9\n5, a \n6,b\n", {.label_column = "label"});
  EXPECT_THAT(d.classes, ElementsAre("10", "9", "B", "a", "b"));
  EXPECT_EQ(d.y->to_vector<int32_t>(), (std::vector<int32_t>{4, 2, 0, 1, 3, 4}));
}

TEST_F(CsvTest, ReadsQuotedCells) {
  const CsvData d = load(
      "label,x,\"y, z\"\n"
      "\"Smith, J.\",1.5,\"-2\"\n"
      "\"say \"\"hi\"\"\",2,3\n"
      "\"two\nlines\",\" 4 \" ,5\n",
      {.label_column = "label"});
  EXPECT_THAT(d.feature_names, ElementsAre("x", "y, z"));
  EXPECT_EQ(d.x.to_vector<float>(), (std::vector<float>{1.5f, -2, 2, 3, 4, 5}));
  EXPECT_THAT(d.classes, ElementsAre("Smith, J.", "say \"hi\"", "two\nlines"));
  EXPECT_EQ(d.y->to_vector<int32_t>(), (std::vector<int32_t>{0, 1, 2}));
}

TEST_F(CsvTest, CountsLinesInsideQuotedCells) {
  // The quoted label spans lines 2 and 3, so 'abc' is on line 4.
  expect_load_error("f,label\n1,\"multi\nline\"\nabc,x\n", {.label_index = 1}, ErrorCode::kParseError,
                    {"line 4, column 1 ('f'): 'abc' is not a number"});
}

TEST_F(CsvTest, ReadsCrlfLoneCrByteOrderMarksAndBlankLinesAtTheEnd) {
  const std::string bom = "\xEF\xBB\xBF";
  for (const std::string& text :
       {bom + "a,b\r\n1,2\r\n3,4", std::string("a,b\r1,2\r3,4\r"), std::string("a,b\n1,2\n3,4\n\n\r\n\n")}) {
    const CsvData d = load(text);
    EXPECT_THAT(d.feature_names, ElementsAre("a", "b"));
    EXPECT_EQ(d.x.to_vector<float>(), (std::vector<float>{1, 2, 3, 4}));
  }
}

TEST_F(CsvTest, FillsMissingCells) {
  const std::string text = "a,b,c\n1,,\"\"\n ,4,5\n";
  const CsvData nan = load(text, {.fill_value = std::nan("")});
  const std::vector<float> v = nan.x.to_vector<float>();
  ASSERT_EQ(v.size(), 6u);
  EXPECT_EQ(v[0], 1);
  EXPECT_TRUE(std::isnan(v[1]));
  EXPECT_TRUE(std::isnan(v[2]));
  EXPECT_TRUE(std::isnan(v[3]));
  EXPECT_EQ(v[4], 4);
  EXPECT_EQ(v[5], 5);
  EXPECT_EQ(load(text, {.fill_value = 0}).x.to_vector<float>(), (std::vector<float>{1, 0, 0, 0, 4, 5}));
}

TEST_F(CsvTest, ReadsFloat64) {
  const CsvData d = load("a,b\n0.1,1e300\n", {.dtype = DType::kF64});
  EXPECT_EQ(d.x.dtype(), DType::kF64);
  EXPECT_EQ(d.x.to_vector<double>(), (std::vector<double>{0.1, 1e300}));
}

TEST_F(CsvTest, NumbersMayHaveSpacesSignsAndSpecialValues) {
  const CsvData d = load(
      "a,b,c,d,e,f,g,h,i,j\n"
      " 1.5 ,\t+2\t,-inf,nan,Infinity,1e-50,-1e-50,.5,5.,+INF\n");
  const std::vector<float> v = d.x.to_vector<float>();
  ASSERT_EQ(v.size(), 10u);
  EXPECT_EQ(v[0], 1.5f);
  EXPECT_EQ(v[1], 2.0f);
  EXPECT_EQ(v[2], -kInf);
  EXPECT_TRUE(std::isnan(v[3]));
  EXPECT_EQ(v[4], kInf);
  EXPECT_EQ(v[5], 0.0f);  // below f32's smallest denormal
  EXPECT_FALSE(std::signbit(v[5]));
  EXPECT_EQ(v[6], 0.0f);
  EXPECT_TRUE(std::signbit(v[6]));
  EXPECT_EQ(v[7], 0.5f);
  EXPECT_EQ(v[8], 5.0f);
  EXPECT_EQ(v[9], kInf);
}

TEST_F(CsvTest, ReadsFilesWithoutAHeader) {
  const CsvData d = load("1,2,x\n3,4,y\n", {.header = false, .label_index = 2});
  EXPECT_THAT(d.feature_names, ElementsAre("column 1", "column 2"));
  EXPECT_EQ(d.x.to_vector<float>(), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_THAT(d.classes, ElementsAre("x", "y"));
  EXPECT_EQ(d.y->to_vector<int32_t>(), (std::vector<int32_t>{0, 1}));
}

TEST_F(CsvTest, ReadsOtherDelimiters) {
  EXPECT_EQ(load("a\tb\n1\t2\n", {.delimiter = '\t'}).x.to_vector<float>(), (std::vector<float>{1, 2}));
  EXPECT_EQ(load("a;b\n\"1;\"\"\";2\n3;4\n", {.delimiter = ';', .label_index = 0}).classes,
            (std::vector<std::string>{"1;\"", "3"}));
}

TEST_F(CsvTest, DuplicateHeaderNamesAreKeptWhenNotChosenByName) {
  EXPECT_THAT(load("a,a,b\n1,2,3\n").feature_names, ElementsAre("a", "a", "b"));
}

TEST_F(CsvTest, ParseCsvReadsTextAndNamesItInErrors) {
  const CsvData d = parse_csv("a,b\n1,2\n", {}, "<inline>");
  EXPECT_EQ(d.x.to_vector<float>(), (std::vector<float>{1, 2}));
  expect_error([] { parse_csv("a\nx\n", {}, "<inline>"); }, ErrorCode::kParseError,
               {"<inline>, line 2, column 1 ('a'): 'x' is not a number"});
}

// --- errors ------------------------------------------------------------------------------------

TEST_F(CsvTest, NoFileIsNotFound) {
  expect_error([&] { load_csv(path("none.csv")); }, ErrorCode::kNotFound, {path("none.csv"), "opening"});
}

TEST_F(CsvTest, ADirectoryIsNotARegularFile) {
  expect_error([&] { load_csv(dir_.string()); }, ErrorCode::kInvalidArgument, {dir_.string(), "not a regular file"});
}

TEST_F(CsvTest, AFifoIsRefusedWithoutWaitingForAWriter) {
  ASSERT_EQ(::mkfifo(path("fifo").c_str(), 0600), 0);
  expect_error([&] { load_csv(path("fifo")); }, ErrorCode::kInvalidArgument, {path("fifo"), "not a regular file"});
}

TEST_F(CsvTest, AnEmptyFileIsAParseError) {
  for (const std::string text : {"", "\n\r\n", "\xEF\xBB\xBF"}) {
    expect_load_error(text, {}, ErrorCode::kParseError, {"is empty"});
  }
}

TEST_F(CsvTest, AHeaderWithoutRowsIsRefused) {
  expect_load_error("a,b\n", {}, ErrorCode::kInvalidArgument, {"header (line 1) but no rows", "header = false"});
}

TEST_F(CsvTest, ARowWithAnotherNumberOfCellsIsAParseError) {
  expect_load_error("a,b,c,d\n1,2,3,4\n1,2,3\n", {}, ErrorCode::kParseError,
                    {"line 3: 3 cells, expected 4 as in the header (line 1): '1,2,3'"});
  expect_load_error("a,b\n1,2,3\n", {}, ErrorCode::kParseError, {"line 2: 3 cells, expected 2", "'1,2,3'"});
  expect_load_error("1,2\n3,4\n5\n", {.header = false}, ErrorCode::kParseError,
                    {"line 3: 1 cell, expected 2 as in the first row (line 1): '5'"});
}

TEST_F(CsvTest, ABlankLineBetweenRowsIsAParseError) {
  expect_load_error("a,b\n1,2\n\n3,4\n", {}, ErrorCode::kParseError,
                    {"line 3: 1 cell, expected 2 as in the header (line 1): ''", "blank lines"});
}

TEST_F(CsvTest, AnUnterminatedQuoteNamesTheLineWhereItOpened) {
  expect_load_error("a,b\n1,2\n3,\"4\n5,6\n", {}, ErrorCode::kParseError,
                    {"line 3, column 2 ('b'): the quoted cell '\"4\\n5,6\\n' is never closed"});
}

TEST_F(CsvTest, TextAfterAClosingQuoteIsAParseError) {
  expect_load_error("a,b\n\"1\"x,2\n", {}, ErrorCode::kParseError,
                    {"line 2, column 1 ('a'): 'x,2' follows the closing quote"});
}

TEST_F(CsvTest, ACellThatIsNotANumberIsAParseError) {
  const std::string text =
      "sepal_length,sepal_width,petal_width,species\n"
      "5.1,3.5,0.2,setosa\n"
      "4.9,3.0,0.2,setosa\n"
      "4.7,3.2,0.2,setosa\n"
      "4.6,3.1,0.2,setosa\n"
      "5.0,3.6,0.2,setosa\n"
      "5.4,3.9,abc,setosa\n";
  expect_load_error(text, {.label_column = "species"}, ErrorCode::kParseError,
                    {"line 7, column 3 ('petal_width'): 'abc' is not a number", "CsvOptions::columns"});
  // The label column, when it is not chosen as the label, is a feature column like any other.
  expect_load_error(text, {}, ErrorCode::kParseError, {"line 2, column 4 ('species'): 'setosa' is not a number"});
  expect_load_error("1,x\n", {.header = false}, ErrorCode::kParseError, {"line 1, column 2: 'x' is not a number"});
  expect_load_error("a\n0x10\n", {}, ErrorCode::kParseError, {"'0x10' is not a number"});
  expect_load_error("a\n+-1\n", {}, ErrorCode::kParseError, {"'+-1' is not a number"});
}

TEST_F(CsvTest, LongTextInMessagesIsCut) {
  const std::string long_text(100, 'z');
  const std::string p = write("a\n" + long_text + "\n");
  const Error e = error_from([&] { load_csv(p); });
  EXPECT_THAT(std::string(e.what()), HasSubstr("'" + std::string(40, 'z') + "...'"));
  EXPECT_THAT(std::string(e.what()), Not(HasSubstr(std::string(41, 'z'))));
}

TEST_F(CsvTest, AnEmptyCellWithoutFillValueIsAParseError) {
  expect_load_error("a,b\n1,2\n3,\n", {}, ErrorCode::kParseError,
                    {"line 3, column 2 ('b'): the cell is empty", "CsvOptions::fill_value"});
}

TEST_F(CsvTest, AnEmptyLabelIsAParseErrorEvenWithFillValue) {
  expect_load_error("a,label\n1,x\n2, \n", {.label_column = "label", .fill_value = 0}, ErrorCode::kParseError,
                    {"line 3, column 2 ('label'): the label is empty"});
}

TEST_F(CsvTest, AnUnknownColumnNameListsTheHeader) {
  expect_load_error("a,b,c\n1,2,3\n", {.columns = {"a", "nope"}}, ErrorCode::kInvalidArgument,
                    {"CsvOptions::columns[1] is 'nope'", "'a', 'b', 'c'"});
  expect_load_error("a,b,c\n1,2,3\n", {.label_column = "label"}, ErrorCode::kInvalidArgument,
                    {"CsvOptions::label_column is 'label'", "'a', 'b', 'c'"});
}

TEST_F(CsvTest, AnAmbiguousColumnNameIsRefused) {
  expect_load_error("a,a,b\n1,2,3\n", {.columns = {"a"}}, ErrorCode::kInvalidArgument,
                    {"'a'", "2 columns of that name (columns 1 and 2)"});
}

TEST_F(CsvTest, AColumnIndexOutOfRangeIsRefused) {
  expect_load_error("a,b,c\n1,2,3\n", {.column_indices = {0, 3}}, ErrorCode::kOutOfRange,
                    {"CsvOptions::column_indices[1] is 3, outside [0, 3)"});
  expect_load_error("a,b,c\n1,2,3\n", {.label_index = -1}, ErrorCode::kOutOfRange,
                    {"CsvOptions::label_index is -1, outside [0, 3)"});
}

TEST_F(CsvTest, AColumnChosenTwiceIsRefused) {
  expect_load_error("a,b,c\n1,2,3\n", {.columns = {"a", "b", "a"}}, ErrorCode::kInvalidArgument,
                    {"column 1 ('a') is chosen twice (CsvOptions::columns[0] and [2])"});
  expect_load_error("a,b,c\n1,2,3\n", {.column_indices = {1, 1}}, ErrorCode::kInvalidArgument,
                    {"column 2 ('b') is chosen twice (CsvOptions::column_indices[0] and [1])"});
}

TEST_F(CsvTest, TheLabelAsAFeatureIsRefused) {
  expect_load_error("a,b,c\n1,2,3\n", {.columns = {"a", "c"}, .label_column = "c"}, ErrorCode::kInvalidArgument,
                    {"column 3 ('c') is the label column and also a feature (CsvOptions::columns[1])"});
}

TEST_F(CsvTest, NoFeatureColumnLeftIsRefused) {
  expect_load_error("label\nx\n", {.label_index = 0}, ErrorCode::kInvalidArgument, {"no feature column"});
}

TEST_F(CsvTest, NamesWithoutAHeaderAreRefused) {
  expect_load_error("1,2\n", {.header = false, .columns = {"a"}}, ErrorCode::kInvalidArgument,
                    {"CsvOptions::columns", "header is false"});
  expect_load_error("1,2\n", {.header = false, .label_column = "a"}, ErrorCode::kInvalidArgument,
                    {"CsvOptions::label_column", "header is false"});
}

TEST_F(CsvTest, BadOptionsAreRefused) {
  const std::string text = "a,b\n1,2\n";
  expect_load_error(text, {.columns = {"a"}, .column_indices = {0}}, ErrorCode::kInvalidArgument,
                    {"columns and column_indices are both given"});
  expect_load_error(text, {.label_column = "a", .label_index = 0}, ErrorCode::kInvalidArgument,
                    {"label_column and label_index are both given"});
  expect_load_error(text, {.delimiter = '"'}, ErrorCode::kInvalidArgument, {"CsvOptions::delimiter is '\"'"});
  expect_load_error(text, {.delimiter = '\n'}, ErrorCode::kInvalidArgument, {"CsvOptions::delimiter is '\\n'"});
  expect_load_error(text, {.dtype = DType::kI32}, ErrorCode::kInvalidArgument, {"CsvOptions::dtype is i32"});
  expect_load_error(text, {.fill_value = 1e39}, ErrorCode::kInvalidArgument, {"fill_value", "too large for f32"});
}

TEST_F(CsvTest, ANumberTooLargeForTheDtypeIsAParseError) {
  expect_load_error("a\n1e39\n", {}, ErrorCode::kParseError,
                    {"line 2, column 1 ('a'): '1e39' is out of range: too large for f32", "kF64"});
  expect_load_error("a\n-1e39\n", {}, ErrorCode::kParseError, {"'-1e39' is out of range"});
  expect_load_error("a\n1e400\n", {.dtype = DType::kF64}, ErrorCode::kParseError, {"'1e400'", "too large for f64"});
  // f64 holds it; "inf" is an infinity in either.
  EXPECT_EQ(load("a\n1e39\ninf\n", {.dtype = DType::kF64}).x.to_vector<double>(),
            (std::vector<double>{1e39, std::numeric_limits<double>::infinity()}));
  EXPECT_EQ(load("a\ninf\n").x.to_vector<float>(), (std::vector<float>{kInf}));
}

TEST_F(CsvTest, AnIntegerLabelOverTheLargestClassIdIsAParseError) {
  expect_load_error("a,l\n1,0\n2,1048576\n", {.label_column = "l"}, ErrorCode::kParseError,
                    {"line 3, column 2 ('l'): the integer label '1048576' is over 1048575"});
  // Not all integers: text labels, numbered in sorted order.
  EXPECT_THAT(load("a,l\n1,16777216\n2,x\n", {.label_column = "l"}).classes, ElementsAre("16777216", "x"));
}

}  // namespace
}  // namespace ingot
