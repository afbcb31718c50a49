#include "ingot/ir/attributes.h"

#include <fmt/format.h>

#include <cstring>
#include <functional>
#include <string_view>

namespace ingot::ir {

namespace {

void hash_combine(size_t& seed, size_t value) { seed ^= value + 0x9e3779b97f4a7c15ULL + (seed << 6) + (seed >> 2); }

size_t hash_bytes(const void* data, size_t size) {
  return std::hash<std::string_view>{}(std::string_view(static_cast<const char*>(data), size));
}

/// Hash of an attribute value consistent with Attributes::operator== (floats and arrays by
/// their bits).
size_t hash_attribute(const Attribute& attr) {
  size_t seed = attr.index();
  std::visit(
      [&](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, Array>) {
          for (int64_t d : v.shape()) hash_combine(seed, std::hash<int64_t>{}(d));
          hash_combine(seed, static_cast<size_t>(v.dtype()));
          hash_combine(seed, hash_bytes(v.raw_data(), static_cast<size_t>(v.nbytes())));
        } else if constexpr (std::is_same_v<T, double>) {
          hash_combine(seed, hash_bytes(&v, sizeof v));
        } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
          for (int64_t x : v) hash_combine(seed, std::hash<int64_t>{}(x));
        } else {
          hash_combine(seed, std::hash<T>{}(v));
        }
      },
      attr);
  return seed;
}

}  // namespace

size_t hash_attributes(const Attributes& attrs) {
  size_t seed = attrs.entries().size();
  for (const auto& [name, value] : attrs.entries()) {
    hash_combine(seed, std::hash<std::string>{}(name));
    hash_combine(seed, hash_attribute(value));
  }
  return seed;
}

const char* attribute_kind_name(const Attribute& a) {
  switch (a.index()) {
    case 0:
      return "int";
    case 1:
      return "float";
    case 2:
      return "bool";
    case 3:
      return "string";
    case 4:
      return "ints";
    case 5:
      return "array";
  }
  return "unknown";
}

namespace {

template <class T>
const T& get_as(const std::map<std::string, Attribute>& map, const std::string& name, const char* kind) {
  auto it = map.find(name);
  if (it == map.end()) {
    throw Error(ErrorCode::kNotFound, fmt::format("missing attribute '{}' ({})", name, kind),
                fmt::format("set attribute '{}'", name));
  }
  if (const T* v = std::get_if<T>(&it->second)) return *v;
  throw Error(ErrorCode::kInvalidArgument,
              fmt::format("attribute '{}' is {} but must be {}", name, attribute_kind_name(it->second), kind));
}

}  // namespace

int64_t Attributes::get_int(const std::string& name) const { return get_as<int64_t>(map_, name, "int"); }
double Attributes::get_float(const std::string& name) const {
  auto it = map_.find(name);
  if (it != map_.end()) {
    if (const int64_t* i = std::get_if<int64_t>(&it->second)) return static_cast<double>(*i);
  }
  return get_as<double>(map_, name, "float");
}
bool Attributes::get_bool(const std::string& name) const { return get_as<bool>(map_, name, "bool"); }
const std::string& Attributes::get_string(const std::string& name) const {
  return get_as<std::string>(map_, name, "string");
}
const std::vector<int64_t>& Attributes::get_ints(const std::string& name) const {
  return get_as<std::vector<int64_t>>(map_, name, "ints");
}
const Array& Attributes::get_array(const std::string& name) const { return get_as<Array>(map_, name, "array"); }
std::vector<int64_t> Attributes::get_ints_or(const std::string& name, std::vector<int64_t> fallback) const {
  return has(name) ? get_ints(name) : fallback;
}
int64_t Attributes::get_int_or(const std::string& name, int64_t fallback) const {
  return has(name) ? get_int(name) : fallback;
}

bool Attributes::operator==(const Attributes& other) const {
  if (map_.size() != other.map_.size()) return false;
  for (auto a = map_.begin(), b = other.map_.begin(); a != map_.end(); ++a, ++b) {
    if (a->first != b->first || a->second.index() != b->second.index()) return false;
    const Attribute& other_value = b->second;
    bool equal = std::visit(
        [&](const auto& x) {
          using T = std::decay_t<decltype(x)>;
          const T& y = std::get<T>(other_value);
          if constexpr (std::is_same_v<T, Array>) {
            return x.bitwise_equal(y);
          } else if constexpr (std::is_same_v<T, double>) {
            return std::memcmp(&x, &y, sizeof(double)) == 0;  // NaN equals itself
          } else {
            return x == y;
          }
        },
        a->second);
    if (!equal) return false;
  }
  return true;
}

}  // namespace ingot::ir
