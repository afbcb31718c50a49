// Printer and parser of the IR text form (docs/ir.md, "Text form").
#include "ingot/ir/text.h"

#include <fmt/format.h>

#include <charconv>
#include <cstring>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <type_traits>
#include <unordered_map>

#include "ingot/ir/op_registry.h"
#include "ingot/runtime/error.h"

namespace ingot::ir {
namespace {

// ------------------------------------------------------------------------------------------
// Printing
// ------------------------------------------------------------------------------------------

/// Characters of a bare word: names of ops, attributes, dtypes, values and functions.
bool is_word_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.';
}

/// True if `s` can be printed without quotes after '@'.
bool is_bare_word(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!is_word_char(c)) return false;
  }
  return true;
}

/// `s` in double quotes, escaping '"', '\\', newline, tab and other control characters.
std::string quote_string(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
          out += fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
        } else {
          out += c;
        }
    }
  }
  out += '"';
  return out;
}

/// Makes a shortest round-trip float text re-parse as a float: "1" -> "1.0".
std::string ensure_float_form(std::string s) {
  if (s.find_first_of(".en") == std::string::npos) s += ".0";  // 'n' covers inf and nan
  return s;
}

std::string format_double(double v) { return ensure_float_form(fmt::format("{}", v)); }
std::string format_float(float v) { return ensure_float_form(fmt::format("{}", v)); }

/// One element of a dense literal in the text form of its storage type T.
template <class T>
std::string format_element(T v) {
  if constexpr (std::is_same_v<T, bool>) {
    return v ? "true" : "false";
  } else if constexpr (std::is_same_v<T, f16> || std::is_same_v<T, bf16> || std::is_same_v<T, float>) {
    return format_float(static_cast<float>(v));
  } else if constexpr (std::is_same_v<T, double>) {
    return format_double(v);
  } else if constexpr (std::is_signed_v<T>) {
    return fmt::format("{}", static_cast<int64_t>(v));
  } else {
    return fmt::format("{}", static_cast<uint64_t>(v));
  }
}

/// Appends the elements of `shape` starting at dimension `dim` as nested lists; `elem(flat)`
/// prints one element.
template <class F>
void print_nested(std::string& out, const Shape& shape, size_t dim, int64_t& flat, F& elem) {
  if (dim == shape.size()) {
    out += elem(flat++);
    return;
  }
  out += '[';
  for (int64_t i = 0; i < shape[dim]; ++i) {
    if (i > 0) out += ", ";
    print_nested(out, shape, dim + 1, flat, elem);
  }
  out += ']';
}

/// "dense<[[1.0, 2.0], [3.0, 4.0]]> : f32[2,2]".
std::string format_dense(const Array& a) {
  std::string out = "dense<";
  dispatch_dtype(a.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const auto* bytes = static_cast<const unsigned char*>(a.raw_data());
    auto elem = [&](int64_t i) {
      T v;
      std::memcpy(&v, bytes + i * static_cast<int64_t>(sizeof(T)), sizeof(T));
      return format_element(v);
    };
    int64_t flat = 0;
    print_nested(out, a.shape(), 0, flat, elem);
  });
  out += "> : ";
  out += TensorType{a.shape(), a.dtype()}.to_string();
  return out;
}

std::string format_attribute(const Attribute& attr) {
  return std::visit(
      [](const auto& v) -> std::string {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, int64_t>) {
          return fmt::format("{}", v);
        } else if constexpr (std::is_same_v<T, double>) {
          return format_double(v);
        } else if constexpr (std::is_same_v<T, bool>) {
          return v ? "true" : "false";
        } else if constexpr (std::is_same_v<T, std::string>) {
          return quote_string(v);
        } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
          return fmt::format("[{}]", fmt::join(v, ", "));
        } else {
          return format_dense(v);
        }
      },
      attr);
}

/// Canonical names: parameters first, then node results, numbered densely.
std::unordered_map<ValueId, int64_t> canonical_numbering(const Graph& g) {
  std::unordered_map<ValueId, int64_t> number;
  for (ValueId p : g.parameters()) number.emplace(p, static_cast<int64_t>(number.size()));
  for (const Node& n : g.nodes()) {
    for (ValueId v : n.outputs) number.emplace(v, static_cast<int64_t>(number.size()));
  }
  return number;
}

std::string format_node(const Graph& g, const Node& node, const std::unordered_map<ValueId, int64_t>& number) {
  std::vector<std::string> results, operands, types, attrs;
  for (ValueId v : node.outputs) {
    results.push_back(fmt::format("%{}", number.at(v)));
    types.push_back(g.type(v).to_string());
  }
  for (ValueId v : node.inputs) operands.push_back(fmt::format("%{}", number.at(v)));
  for (const auto& [name, value] : node.attrs.entries()) {
    attrs.push_back(fmt::format("{} = {}", name, format_attribute(value)));
  }
  std::string attr_text = attrs.empty() ? "" : fmt::format(" {{{}}}", fmt::join(attrs, ", "));
  return fmt::format("  {} = {}({}){} : {}\n", fmt::join(results, ", "), node.op, fmt::join(operands, ", "), attr_text,
                     fmt::join(types, ", "));
}

// ------------------------------------------------------------------------------------------
// Parsing
// ------------------------------------------------------------------------------------------

/// Value of hexadecimal digit `c`, or -1.
int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/// A number as written: sign, digits and whether it has float form ('.', exponent, inf, nan).
struct NumberToken {
  size_t offset = 0;
  bool negative = false;
  std::string_view magnitude;  ///< without the sign
  bool is_float = false;
};

/// One element of a dense literal before its dtype is known: a number, a bool or a list.
struct Nested {
  size_t offset = 0;
  enum Kind { kNumber, kBool, kList } kind = kNumber;
  NumberToken number;
  bool boolean = false;
  std::vector<Nested> items;
};

/// Deepest list nesting accepted in a dense literal (bounds the parser's recursion).
constexpr int kMaxNesting = 256;

/// A name defined in the text and where.
struct Definition {
  ValueId id;
  size_t offset;
};

/// Recursive-descent parser of one function in the text form. Offsets into the text are kept
/// for error messages and turned into "line L, column C" (1-based) only when reporting.
/// Every method that reads a token skips whitespace and `//` comments before it.
class Parser {
 public:
  Parser(std::string_view text, const OpRegistry* registry) : text_(text), registry_(registry) {}

  Graph parse();

 private:
  // Low-level scanning.
  void skip_space();
  char peek();
  bool consume(char c);
  void expect(char c, std::string_view context);
  void expect_arrow();
  std::string_view word(std::string_view what);
  std::string_view peek_word();
  std::string quoted_string();

  // Errors.
  std::pair<int64_t, int64_t> line_column(size_t offset) const;
  std::string found_at(size_t offset) const;
  [[noreturn]] void fail(size_t offset, const std::string& message) const;
  [[noreturn]] void fail_expected(std::string_view expected);

  // Grammar.
  TensorType type();
  std::vector<TensorType> type_list();
  std::vector<TensorType> signature_results();
  std::pair<std::string, size_t> value_name();
  ValueId use();
  std::vector<ValueId> uses(char close);
  void check_undefined(const std::string& name, size_t offset) const;
  void define(const std::string& name, size_t offset, ValueId id);
  void parameters(Graph& g);
  std::vector<std::pair<std::string, size_t>> result_names();
  void statement(Graph& g);
  void return_statement(Graph& g, const std::vector<TensorType>& declared);
  Attributes attribute_dict();
  Attribute attribute_value();
  std::vector<int64_t> int_list();
  NumberToken number();
  int64_t to_i64(const NumberToken& t);
  double to_double(const NumberToken& t);
  Nested nested(int depth);
  Array dense();
  void flatten(const Nested& n, const TensorType& t, size_t dim, std::vector<const Nested*>& out);
  template <class T>
  T element(const Nested& n, DType dtype);

  std::string_view text_;
  const OpRegistry* registry_;
  size_t pos_ = 0;
  std::map<std::string, Definition> names_;
};

void Parser::skip_space() {
  while (pos_ < text_.size()) {
    char c = text_[pos_];
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      ++pos_;
    } else if (c == '/' && pos_ + 1 < text_.size() && text_[pos_ + 1] == '/') {
      while (pos_ < text_.size() && text_[pos_] != '\n') ++pos_;
    } else {
      break;
    }
  }
}

char Parser::peek() {
  skip_space();
  return pos_ < text_.size() ? text_[pos_] : '\0';
}

bool Parser::consume(char c) {
  if (peek() != c || pos_ >= text_.size()) return false;
  ++pos_;
  return true;
}

void Parser::expect(char c, std::string_view context) {
  if (!consume(c)) fail_expected(fmt::format("'{}' {}", c, context));
}

void Parser::expect_arrow() {
  skip_space();
  if (text_.substr(pos_, 2) != "->") fail_expected("'->' and the result types");
  pos_ += 2;
}

std::string_view Parser::peek_word() {
  skip_space();
  size_t end = pos_;
  while (end < text_.size() && is_word_char(text_[end])) ++end;
  return text_.substr(pos_, end - pos_);
}

std::string_view Parser::word(std::string_view what) {
  std::string_view w = peek_word();
  if (w.empty()) fail_expected(what);
  pos_ += w.size();
  return w;
}

std::pair<int64_t, int64_t> Parser::line_column(size_t offset) const {
  int64_t line = 1, column = 1;
  for (size_t i = 0; i < offset && i < text_.size(); ++i) {
    if (text_[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return {line, column};
}

std::string Parser::found_at(size_t offset) const {
  if (offset >= text_.size()) return "end of input";
  size_t end = offset;
  if (text_[end] == '%' || text_[end] == '@') ++end;
  while (end < text_.size() && is_word_char(text_[end])) ++end;
  if (end == offset || (end == offset + 1 && !is_word_char(text_[offset]))) end = offset + 1;
  std::string shown;  // printable ASCII as is, other bytes as \xHH (NULs and binary input)
  for (char c : text_.substr(offset, end - offset)) {
    const auto u = static_cast<unsigned char>(c);
    shown += (u >= 0x20 && u < 0x7f) ? std::string(1, c) : fmt::format("\\x{:02x}", u);
  }
  return fmt::format("'{}'", shown);
}

void Parser::fail(size_t offset, const std::string& message) const {
  auto [line, column] = line_column(offset);
  throw Error(ErrorCode::kParseError, fmt::format("line {}, column {}: {}", line, column, message),
              "see the text form in docs/ir.md");
}

void Parser::fail_expected(std::string_view expected) {
  skip_space();
  fail(pos_, fmt::format("expected {} but found {}", expected, found_at(pos_)));
}

std::string Parser::quoted_string() {
  const size_t start = pos_;
  expect('"', "to start a string");
  std::string out;
  while (pos_ < text_.size() && text_[pos_] != '"' && text_[pos_] != '\n') {
    char c = text_[pos_++];
    if (c != '\\') {
      out += c;
      continue;
    }
    char e = pos_ < text_.size() ? text_[pos_++] : '\0';
    if (e == '"' || e == '\\') {
      out += e;
    } else if (e == 'n') {
      out += '\n';
    } else if (e == 't') {
      out += '\t';
    } else if (e == 'x' && pos_ + 2 <= text_.size() && hex_digit(text_[pos_]) >= 0 && hex_digit(text_[pos_ + 1]) >= 0) {
      out += static_cast<char>(hex_digit(text_[pos_]) * 16 + hex_digit(text_[pos_ + 1]));
      pos_ += 2;
    } else {
      fail(pos_ - 2, "bad escape in string (use \\\", \\\\, \\n, \\t or \\xHH)");
    }
  }
  if (pos_ >= text_.size() || text_[pos_] != '"') fail(start, "unterminated string");
  ++pos_;
  return out;
}

TensorType Parser::type() {
  skip_space();
  const size_t start = pos_;
  std::string_view name = word("a type such as f32[2,3]");
  TensorType t;
  try {
    t.dtype = parse_dtype(name);
  } catch (const Error&) {
    fail(start, fmt::format("unknown dtype '{}' (expected one of bool, i8, u8, i32, u32, i64, u64, "
                            "f16, bf16, f32, f64)",
                            name));
  }
  expect('[', fmt::format("after dtype '{}' (a type is written like f32[2,3]; a scalar is f32[])", name));
  if (consume(']')) return t;
  do {
    NumberToken n = number();
    if (n.is_float || n.negative) fail(n.offset, "a dimension size must be an integer >= 0");
    t.shape.push_back(to_i64(n));
  } while (consume(','));
  expect(']', "to close the dimension list");
  int64_t bytes = dtype_size(t.dtype);
  for (int64_t d : t.shape) {
    if (__builtin_mul_overflow(bytes, d, &bytes)) {
      fail(start, fmt::format("type {} is too large (over 2^63 bytes)", t.to_string()));
    }
  }
  return t;
}

std::vector<TensorType> Parser::type_list() {
  std::vector<TensorType> types{type()};
  while (consume(',')) types.push_back(type());
  return types;
}

std::vector<TensorType> Parser::signature_results() {
  expect_arrow();
  if (!consume('(')) return {type()};
  if (consume(')')) return {};
  std::vector<TensorType> types = type_list();
  expect(')', "to close the result types");
  return types;
}

std::pair<std::string, size_t> Parser::value_name() {
  skip_space();
  const size_t start = pos_;
  expect('%', "(a value name such as %0 or %x)");
  size_t end = pos_;
  while (end < text_.size() && is_word_char(text_[end])) ++end;
  if (end == pos_) fail(start, "expected a value name after '%' (such as %0 or %x)");
  std::string name(text_.substr(pos_, end - pos_));
  pos_ = end;
  return {name, start};
}

ValueId Parser::use() {
  auto [name, offset] = value_name();
  auto it = names_.find(name);
  if (it == names_.end()) fail(offset, fmt::format("unknown value %{} (not defined above)", name));
  return it->second.id;
}

std::vector<ValueId> Parser::uses(char close) {
  std::vector<ValueId> ids;
  if (peek() == close) return ids;
  do {
    ids.push_back(use());
  } while (consume(','));
  return ids;
}

void Parser::check_undefined(const std::string& name, size_t offset) const {
  auto it = names_.find(name);
  if (it == names_.end()) return;
  auto [line, column] = line_column(it->second.offset);
  fail(offset, fmt::format("duplicate definition of %{} (first defined at line {}, column {})", name, line, column));
}

void Parser::define(const std::string& name, size_t offset, ValueId id) {
  check_undefined(name, offset);
  names_.emplace(name, Definition{id, offset});
}

void Parser::parameters(Graph& g) {
  expect('(', "to start the parameter list");
  if (consume(')')) return;
  do {
    auto [name, offset] = value_name();
    expect(':', fmt::format("after parameter %{}", name));
    TensorType t = type();
    check_undefined(name, offset);
    define(name, offset, g.add_parameter(std::move(t)));
  } while (consume(','));
  expect(')', "to close the parameter list");
}

std::vector<std::pair<std::string, size_t>> Parser::result_names() {
  std::vector<std::pair<std::string, size_t>> results{value_name()};
  while (consume(',')) results.push_back(value_name());
  for (size_t i = 0; i < results.size(); ++i) {
    auto [name, offset] = results[i];
    check_undefined(name, offset);
    for (size_t j = 0; j < i; ++j) {
      if (results[j].first == name) fail(offset, fmt::format("%{} is defined twice here", name));
    }
  }
  return results;
}

void Parser::statement(Graph& g) {
  skip_space();
  const size_t start = pos_;
  std::vector<std::pair<std::string, size_t>> results = result_names();
  expect('=', "after the result names");
  std::string op(word("an op name"));
  expect('(', fmt::format("to start the operands of {}", op));
  std::vector<ValueId> inputs = uses(')');
  expect(')', fmt::format("to close the operands of {}", op));
  Attributes attrs = peek() == '{' ? attribute_dict() : Attributes{};
  expect(':', fmt::format("and the result types of {}", op));
  skip_space();
  const size_t types_offset = pos_;
  std::vector<TensorType> types = type_list();
  if (types.size() != results.size()) {
    fail(types_offset, fmt::format("{} declares {} result types for {} results", op, types.size(), results.size()));
  }
  std::vector<ValueId> outs;
  try {
    outs = g.add_node_with_types(op, inputs, std::move(attrs), types);
  } catch (const Error& e) {
    auto [line, column] = line_column(start);
    throw e.with_context(fmt::format("line {}, column {}", line, column));
  }
  for (size_t i = 0; i < results.size(); ++i) define(results[i].first, results[i].second, outs[i]);
}

void Parser::return_statement(Graph& g, const std::vector<TensorType>& declared) {
  skip_space();
  const size_t start = pos_;
  std::vector<ValueId> outs = peek() == '%' ? uses('}') : std::vector<ValueId>{};
  if (outs.size() != declared.size()) {
    fail(start,
         fmt::format("return has {} values but the signature declares {} result types", outs.size(), declared.size()));
  }
  for (size_t i = 0; i < outs.size(); ++i) {
    if (!(g.type(outs[i]) == declared[i])) {
      fail(start, fmt::format("returned value {} has type {} but the signature declares {}", i,
                              g.type(outs[i]).to_string(), declared[i].to_string()));
    }
  }
  g.set_outputs(std::move(outs));
}

Attributes Parser::attribute_dict() {
  expect('{', "to start the attributes");
  Attributes attrs;
  if (consume('}')) return attrs;
  do {
    skip_space();
    const size_t offset = pos_;
    std::string name(word("an attribute name"));
    if (attrs.has(name)) fail(offset, fmt::format("duplicate attribute '{}'", name));
    expect('=', fmt::format("after attribute name '{}'", name));
    attrs.set(name, attribute_value());
  } while (consume(','));
  expect('}', "or ',' in the attributes");
  return attrs;
}

Attribute Parser::attribute_value() {
  const char c = peek();
  if (c == '"') return quoted_string();
  if (c == '[') return int_list();
  std::string_view w = peek_word();
  if (w == "true" || w == "false") {
    pos_ += w.size();
    return w == "true";
  }
  if (w == "dense") return dense();
  if (c == '-' || c == '+' || (c >= '0' && c <= '9') || w == "inf" || w == "nan") {
    NumberToken n = number();
    if (n.is_float) return to_double(n);
    return to_i64(n);
  }
  fail_expected(
      "an attribute value (integer, float, true/false, \"string\", [integers] or "
      "dense<...> : type)");
}

std::vector<int64_t> Parser::int_list() {
  skip_space();
  const size_t start = pos_;
  expect('[', "to start a list");
  std::vector<int64_t> out;
  if (consume(']')) return out;
  do {
    NumberToken n = number();
    if (n.is_float) fail(n.offset, "integer lists hold integers only");
    out.push_back(to_i64(n));
  } while (consume(','));
  if (!consume(']')) {
    auto [line, column] = line_column(start);
    fail_expected(fmt::format("',' or ']' (unterminated list opened at line {}, column {})", line, column));
  }
  return out;
}

NumberToken Parser::number() {
  skip_space();
  NumberToken t;
  t.offset = pos_;
  if (pos_ < text_.size() && (text_[pos_] == '-' || text_[pos_] == '+')) {
    t.negative = text_[pos_] == '-';
    ++pos_;
  }
  const size_t start = pos_;
  auto digits = [&] {
    size_t from = pos_;
    while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') ++pos_;
    return pos_ > from;
  };
  if (text_.substr(pos_, 3) == "inf" || text_.substr(pos_, 3) == "nan") {
    pos_ += 3;
    t.is_float = true;
  } else {
    if (!digits()) fail_expected("a number");
    if (pos_ < text_.size() && text_[pos_] == '.') {
      ++pos_;
      t.is_float = true;
      digits();
    }
    if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
      ++pos_;
      t.is_float = true;
      if (pos_ < text_.size() && (text_[pos_] == '-' || text_[pos_] == '+')) ++pos_;
      if (!digits()) fail(t.offset, "expected digits in the exponent of a number");
    }
  }
  if (pos_ < text_.size() && is_word_char(text_[pos_])) fail(t.offset, "malformed number");
  t.magnitude = text_.substr(start, pos_ - start);
  return t;
}

int64_t Parser::to_i64(const NumberToken& t) {
  uint64_t m = 0;
  auto r = std::from_chars(t.magnitude.data(), t.magnitude.data() + t.magnitude.size(), m);
  const uint64_t limit = static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) + t.negative;
  if (r.ec != std::errc() || m > limit) {
    fail(t.offset, fmt::format("integer {}{} does not fit in 64 bits", t.negative ? "-" : "", t.magnitude));
  }
  return t.negative ? static_cast<int64_t>(0 - m) : static_cast<int64_t>(m);
}

/// Parses `t` as F (float or double), keeping the sign of zeros and NaNs.
template <class F>
std::optional<F> parse_float(const NumberToken& t) {
  F v;
  if (t.magnitude == "inf") {
    v = std::numeric_limits<F>::infinity();
  } else if (t.magnitude == "nan") {
    v = std::numeric_limits<F>::quiet_NaN();
  } else {
    auto r = std::from_chars(t.magnitude.data(), t.magnitude.data() + t.magnitude.size(), v);
    if (r.ec == std::errc::result_out_of_range) {
      // Underflow rounds to zero or a subnormal (as strtod and NumPy do); overflow is an error.
      long double wide = 0;
      auto w = std::from_chars(t.magnitude.data(), t.magnitude.data() + t.magnitude.size(), wide);
      if (w.ec != std::errc() || !(wide < 1)) return std::nullopt;
      v = static_cast<F>(wide);
    } else if (r.ec != std::errc() || std::isinf(v)) {
      return std::nullopt;
    }
  }
  return t.negative ? -v : v;
}

double Parser::to_double(const NumberToken& t) {
  std::optional<double> v = parse_float<double>(t);
  if (!v) fail(t.offset, fmt::format("float {} is out of range for f64", t.magnitude));
  return *v;
}

Nested Parser::nested(int depth) {
  Nested n;
  const char c = peek();
  n.offset = pos_;
  if (depth > kMaxNesting) {
    fail(n.offset, fmt::format("dense literal nested deeper than {} levels", kMaxNesting));
  }
  if (c == '[') {
    n.kind = Nested::kList;
    ++pos_;
    if (consume(']')) return n;
    do {
      n.items.push_back(nested(depth + 1));
    } while (consume(','));
    if (!consume(']')) {
      auto [line, column] = line_column(n.offset);
      fail_expected(fmt::format("',' or ']' (unterminated list opened at line {}, column {})", line, column));
    }
    return n;
  }
  std::string_view w = peek_word();
  if (w == "true" || w == "false") {
    n.kind = Nested::kBool;
    n.boolean = w == "true";
    pos_ += w.size();
    return n;
  }
  if (c == '-' || c == '+' || (c >= '0' && c <= '9') || w == "inf" || w == "nan") {
    n.number = number();
    return n;
  }
  fail_expected("a number, true/false or '[' in a dense literal");
}

void Parser::flatten(const Nested& n, const TensorType& t, size_t dim, std::vector<const Nested*>& out) {
  if (dim == t.shape.size()) {
    if (n.kind == Nested::kList) {
      fail(n.offset, fmt::format("expected an element of {} but found a list (too deeply nested)", t.to_string()));
    }
    out.push_back(&n);
    return;
  }
  if (n.kind != Nested::kList) {
    fail(n.offset,
         fmt::format("expected a list of {} elements for dimension {} of {}", t.shape[dim], dim, t.to_string()));
  }
  if (static_cast<int64_t>(n.items.size()) != t.shape[dim]) {
    fail(n.offset, fmt::format("list has {} elements but dimension {} of {} has size {}", n.items.size(), dim,
                               t.to_string(), t.shape[dim]));
  }
  for (const Nested& item : n.items) flatten(item, t, dim + 1, out);
}

template <class T>
T Parser::element(const Nested& n, DType dtype) {
  const std::string_view name = dtype_name(dtype);
  if constexpr (std::is_same_v<T, bool>) {
    if (n.kind != Nested::kBool) fail(n.offset, "expected true or false for a bool element");
    return n.boolean;
  } else {
    if (n.kind != Nested::kNumber) fail(n.offset, fmt::format("expected a number for {}", name));
    const NumberToken& t = n.number;
    if constexpr (std::is_integral_v<T>) {
      if (t.is_float) fail(t.offset, fmt::format("expected an integer for {}", name));
      uint64_t m = 0;
      auto r = std::from_chars(t.magnitude.data(), t.magnitude.data() + t.magnitude.size(), m);
      const uint64_t max = static_cast<uint64_t>(std::numeric_limits<T>::max());
      const uint64_t limit = t.negative ? (std::is_signed_v<T> ? max + 1 : 0) : max;
      if (r.ec != std::errc() || m > limit) {
        fail(t.offset, fmt::format("{}{} is out of range for {}", t.negative ? "-" : "", t.magnitude, name));
      }
      return static_cast<T>(t.negative ? 0 - m : m);
    } else {
      using F = std::conditional_t<std::is_same_v<T, double>, double, float>;
      std::optional<F> v = parse_float<F>(t);
      T out = v ? T(*v) : T();
      if (!v || (std::isinf(static_cast<F>(out)) && !std::isinf(*v))) {
        fail(t.offset, fmt::format("{}{} is out of range for {}", t.negative ? "-" : "", t.magnitude, name));
      }
      return out;
    }
  }
}

Array Parser::dense() {
  word("'dense'");
  expect('<', "after 'dense'");
  Nested root = nested(0);
  expect('>', "to close the dense literal");
  expect(':', "and the type of the dense literal");
  skip_space();
  const size_t type_offset = pos_;
  TensorType t = type();
  // Only a splat can declare more elements than the text holds: its size is capped, so a short
  // text cannot make the parser allocate the machine's memory.
  int64_t bytes = dtype_size(t.dtype);
  for (int64_t d : t.shape) bytes *= d;  // type() refused products over 2^63
  if (bytes > kMaxTextConstantBytes) {
    fail(type_offset, fmt::format("the dense literal of type {} holds {} bytes, over the limit of {} bytes (1 GiB) "
                                  "for a constant in IR text",
                                  t.to_string(), bytes, kMaxTextConstantBytes));
  }
  // A single element for a non-scalar type is a splat (every element equal).
  const bool splat = root.kind != Nested::kList && !t.shape.empty();
  std::vector<const Nested*> elements;
  if (splat) {
    elements.push_back(&root);
  } else {
    flatten(root, t, 0, elements);
  }
  Array a;
  dispatch_dtype(t.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    std::vector<T> values;
    for (const Nested* e : elements) values.push_back(element<T>(*e, t.dtype));
    a = Array::empty(t.shape, t.dtype);
    auto* bytes = static_cast<unsigned char*>(a.raw_data());
    for (int64_t i = 0; i < a.size(); ++i) {
      const T v = values[splat ? 0 : static_cast<size_t>(i)];
      std::memcpy(bytes + i * static_cast<int64_t>(sizeof(T)), &v, sizeof(T));
    }
  });
  return a;
}

Graph Parser::parse() {
  skip_space();
  if (peek_word() != "func") fail_expected("'func'");
  pos_ += 4;
  expect('@', "before the function name");
  std::string name = peek() == '"' ? quoted_string() : std::string(word("a function name"));
  Graph g(std::move(name), registry_);
  parameters(g);
  std::vector<TensorType> declared = signature_results();
  expect('{', "to start the function body");
  while (true) {
    if (peek() == '%') {
      statement(g);
      continue;
    }
    if (peek_word() != "return") fail_expected("a statement (%name = op(...)) or 'return'");
    pos_ += 6;
    return_statement(g, declared);
    break;
  }
  expect('}', "to close the function body");
  skip_space();
  if (pos_ != text_.size()) fail_expected("end of input after the function");
  return g;
}

}  // namespace

std::string print_graph(const Graph& graph) {
  const auto number = canonical_numbering(graph);
  std::vector<std::string> params, results, outs;
  for (ValueId p : graph.parameters()) {
    params.push_back(fmt::format("%{}: {}", number.at(p), graph.type(p).to_string()));
  }
  for (ValueId v : graph.outputs()) {
    results.push_back(graph.type(v).to_string());
    outs.push_back(fmt::format("%{}", number.at(v)));
  }
  const std::string name = is_bare_word(graph.name()) ? graph.name() : quote_string(graph.name());
  std::string out = fmt::format("func @{}({}) -> ({}) {{\n", name, fmt::join(params, ", "), fmt::join(results, ", "));
  for (const Node& node : graph.nodes()) out += format_node(graph, node, number);
  out += outs.empty() ? "  return\n}\n" : fmt::format("  return {}\n}}\n", fmt::join(outs, ", "));
  return out;
}

Graph parse_graph(std::string_view text, const OpRegistry* registry) { return Parser(text, registry).parse(); }

}  // namespace ingot::ir
