// Shared helpers for ingot's GoogleTest suites.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "ingot/interp/interpreter.h"
#include "ingot/ir/graph.h"
#include "ingot/ir/op_registry.h"
#include "ingot/runtime/array.h"
#include "ingot/runtime/error.h"

namespace ingot::testing {

/// Builds a one-node graph: parameters with the types of `inputs`, one `op` node with `attrs`,
/// all node results as outputs. Throws whatever Graph::add_node throws.
inline ir::Graph one_op_graph(const std::string& op, const std::vector<Array>& inputs,
                              const ir::Attributes& attrs = {}) {
  ir::Graph g(op);
  std::vector<ir::ValueId> ids;
  for (const Array& a : inputs) ids.push_back(g.add_parameter({a.shape(), a.dtype()}));
  g.set_outputs(g.add_node(op, ids, attrs));
  return g;
}

/// Infers the result types of `op` on operand types (the shape rule through Graph::add_node).
inline std::vector<ir::TensorType> infer(const std::string& op, const std::vector<ir::TensorType>& operands,
                                         const ir::Attributes& attrs = {}) {
  ir::Graph g(op);
  std::vector<ir::ValueId> ids;
  for (const auto& t : operands) ids.push_back(g.add_parameter(t));
  std::vector<ir::TensorType> out;
  for (ir::ValueId v : g.add_node(op, ids, attrs)) out.push_back(g.type(v));
  return out;
}

/// Runs `op` on `inputs` with the reference interpreter and returns all results.
inline std::vector<Array> run_op_all(const std::string& op, const std::vector<Array>& inputs,
                                     const ir::Attributes& attrs = {}) {
  return interp::interpret(one_op_graph(op, inputs, attrs), inputs);
}

/// Runs `op` on `inputs` with the reference interpreter and returns its single result.
inline Array run_op(const std::string& op, const std::vector<Array>& inputs, const ir::Attributes& attrs = {}) {
  std::vector<Array> r = run_op_all(op, inputs, attrs);
  EXPECT_EQ(r.size(), 1u) << op << " returned " << r.size() << " results";
  return r.at(0);
}

/// f32 array from values.
inline Array f32(const std::vector<float>& v, const Shape& shape) { return Array::from_vector<float>(v, shape); }
inline Array f32(const std::vector<float>& v) { return Array::from_vector<float>(v, {static_cast<int64_t>(v.size())}); }
inline Array i32(const std::vector<int32_t>& v, const Shape& shape) { return Array::from_vector<int32_t>(v, shape); }
inline Array i32(const std::vector<int32_t>& v) {
  return Array::from_vector<int32_t>(v, {static_cast<int64_t>(v.size())});
}

/// Expects `fn` to throw ingot::Error with `code` and a what() containing every string in
/// `needles` (use them to check that the message names the op, the argument and the values).
inline void expect_error(const std::function<void()>& fn, ErrorCode code, const std::vector<std::string>& needles) {
  try {
    fn();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << "unexpected code for: " << e.what();
    for (const auto& n : needles) {
      EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << "message lacks '" << n << "': " << e.what();
    }
    return;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "threw a non-ingot exception: " << e.what();
    return;
  }
  ADD_FAILURE() << "did not throw (expected " << error_code_name(code) << ")";
}

/// Elementwise comparison of doubles where NaN equals NaN and signs of zero are ignored.
inline void expect_values(const Array& a, const std::vector<double>& expected, double tolerance = 0.0) {
  std::vector<double> got = a.to_doubles();
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(expected[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << "element " << i << " = " << got[i] << ", expected nan";
    } else if (tolerance == 0.0 || std::isinf(expected[i])) {
      EXPECT_EQ(got[i], expected[i]) << "element " << i;
    } else {
      EXPECT_NEAR(got[i], expected[i], tolerance) << "element " << i;
    }
  }
}

}  // namespace ingot::testing
