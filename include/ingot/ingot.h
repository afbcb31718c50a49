// The one header a model author includes: arrays, the tracer and its Tensor API, autodiff
// (vjp, grad, value_and_grad), the graph IR (printing, parsing, passes) and the reference
// interpreter; ingot::version() and the INGOT_VERSION_* macros.
#pragma once

#include "ingot/autodiff/autodiff.h"
#include "ingot/interp/interpreter.h"
#include "ingot/ir/graph.h"
#include "ingot/ir/op_registry.h"
#include "ingot/ir/passes.h"
#include "ingot/ir/text.h"
#include "ingot/runtime/array.h"
#include "ingot/runtime/dtype.h"
#include "ingot/runtime/error.h"
#include "ingot/runtime/shape.h"
#include "ingot/trace/call.h"
#include "ingot/trace/ops.h"
#include "ingot/trace/tensor.h"
#include "ingot/runtime/version.h"
