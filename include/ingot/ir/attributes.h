// Op attributes: a sorted name -> value map attached to each IR node.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "ingot/runtime/array.h"

namespace ingot::ir {

/// One attribute value: an integer, a float, a bool, a string, a list of integers, or a dense
/// literal (an Array on the host, used by `constant`).
using Attribute = std::variant<int64_t, double, bool, std::string, std::vector<int64_t>, Array>;

/// Attributes of a node, sorted by name (so printing is canonical).
///
/// Getters throw ingot::Error(kNotFound) naming the attribute when it is missing, and
/// ingot::Error(kInvalidArgument) naming the attribute and both kinds when it has another kind.
class Attributes {
 public:
  Attributes() = default;
  Attributes(std::initializer_list<std::pair<const std::string, Attribute>> init) : map_(init) {}

  bool has(const std::string& name) const { return map_.count(name) != 0; }
  void set(const std::string& name, Attribute value) { map_[name] = std::move(value); }
  void erase(const std::string& name) { map_.erase(name); }

  int64_t get_int(const std::string& name) const;
  double get_float(const std::string& name) const;
  bool get_bool(const std::string& name) const;
  const std::string& get_string(const std::string& name) const;
  const std::vector<int64_t>& get_ints(const std::string& name) const;
  const Array& get_array(const std::string& name) const;

  /// The integer list `name`, or `fallback` when the attribute is absent.
  std::vector<int64_t> get_ints_or(const std::string& name, std::vector<int64_t> fallback) const;
  int64_t get_int_or(const std::string& name, int64_t fallback) const;

  const std::map<std::string, Attribute>& entries() const { return map_; }
  bool empty() const { return map_.empty(); }

  /// Equal names and equal values (arrays compared bitwise).
  bool operator==(const Attributes& other) const;

 private:
  std::map<std::string, Attribute> map_;
};

/// A hash of `attrs` consistent with Attributes::operator== (equal attributes hash alike; floats
/// and arrays by their bits). Stable within a process only (std::hash).
size_t hash_attributes(const Attributes& attrs);

/// "int", "float", "bool", "string", "ints", "array".
const char* attribute_kind_name(const Attribute& a);

}  // namespace ingot::ir
