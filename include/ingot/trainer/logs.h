// Logs: what callbacks receive and fit/evaluate return (Keras's `logs` dict): metric name ->
// value, in insertion order ("loss" first, then the metrics in compile order; validation entries
// prefixed "val_").
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ingot {

/// An ordered map from names to scalar values (doubles). Setting an existing name keeps its
/// position and replaces the value.
class Logs {
 public:
  Logs() = default;
  Logs(std::initializer_list<std::pair<std::string, double>> entries) {
    for (const auto& [k, v] : entries) set(k, v);
  }
  /// Sets `name` to `value` (appended if new).
  void set(const std::string& name, double value) {
    for (auto& e : entries_) {
      if (e.first == name) {
        e.second = value;
        return;
      }
    }
    entries_.emplace_back(name, value);
  }
  /// The value of `name`, or nullopt.
  std::optional<double> get(const std::string& name) const {
    for (const auto& e : entries_) {
      if (e.first == name) return e.second;
    }
    return std::nullopt;
  }
  bool contains(const std::string& name) const { return get(name).has_value(); }
  size_t size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }
  void clear() { entries_.clear(); }
  const std::vector<std::pair<std::string, double>>& entries() const { return entries_; }
  /// The values in order (Keras's evaluate() flat list without return_dict).
  std::vector<double> values() const {
    std::vector<double> v;
    for (const auto& e : entries_) v.push_back(e.second);
    return v;
  }
  auto begin() const { return entries_.begin(); }
  auto end() const { return entries_.end(); }
  bool operator==(const Logs&) const = default;

 private:
  std::vector<std::pair<std::string, double>> entries_;
};

}  // namespace ingot
