// libFuzzer target: parse_csv with a header and the last column as the label (the first byte of
// the input picks the delimiter and whether a missing cell is filled, so those paths are fuzzed
// too).
#include <cstdint>
#include <string_view>

#include "fuzz_common.h"
#include "ingot/trainer/csv.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const char delimiters[] = {',', ';', '\t', '|'};
  ingot::CsvOptions options;
  options.delimiter = delimiters[data[0] % 4];
  options.header = (data[0] & 4) == 0;
  if (data[0] & 8) options.fill_value = 0.0;
  if (data[0] & 16) options.label_index = 0;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  ingot::fuzz::expect_only_ingot_errors("fuzz_csv", [&] { (void)ingot::parse_csv(text, options, "fuzz.csv"); });
  return 0;
}
