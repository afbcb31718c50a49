// bracket_depth (include/ingot/runtime/text_scan.h).
#include "ingot/runtime/text_scan.h"

#include <algorithm>

namespace ingot::detail {

int64_t bracket_depth(std::string_view text, int64_t stop, bool line_comments) {
  int64_t depth = 0, deepest = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size() && deepest < stop; ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;  // the escaped character
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (line_comments && c == '/' && i + 1 < text.size() && text[i + 1] == '/') {
      const size_t end = text.find('\n', i);
      if (end == std::string_view::npos) break;
      i = end;
    } else if (c == '[' || c == '{' || c == '(') {
      deepest = std::max(deepest, ++depth);
    } else if ((c == ']' || c == '}' || c == ')') && depth > 0) {
      --depth;  // never below 0: leading closers cannot hide nesting after them
    }
  }
  return deepest;
}

}  // namespace ingot::detail
