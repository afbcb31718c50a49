// Cheap checks of untrusted text before a recursive parser sees it (safetensors' JSON header,
// MLIR given to ingot-opt or the pipelines): a small file must not exhaust the stack.
#pragma once

#include <cstdint>
#include <string_view>

namespace ingot::detail {

/// The deepest nesting of brackets ('[', '{', '(' opening, ']', '}', ')' closing, not checked for
/// matching; a closer at depth 0 is ignored) in `text`, outside double-quoted strings (backslash escapes the next
/// character) and, with `line_comments`, outside `//` comments to the end of the line (MLIR's). The scan stops once the
/// depth reaches `stop` and returns it, so it is linear, allocation-free and never throws, whatever the input.
int64_t bracket_depth(std::string_view text, int64_t stop, bool line_comments);

}  // namespace ingot::detail
