// RUN: ingot-opt %s --mlir-pipeline='func.func(ingot-approximate-math)' | FileCheck %s

// f32 exp, erf, tanh, log become polynomial arith code (no math op left to become a libm call);
// f64 stays a math op (libm precision); erf keeps the sign of -0 with a copysign.

// CHECK-LABEL: func.func @f32_ops
// CHECK-NOT:     math.exp
// CHECK-NOT:     math.tanh
// CHECK:         math.copysign
// CHECK-NOT:     math.erf
// CHECK-NOT:     math.log
// CHECK:         return
func.func @f32_ops(%x: f32) -> (f32, f32, f32, f32) {
  %e = math.exp %x : f32
  %t = math.tanh %x : f32
  %r = math.erf %x : f32
  %l = math.log %x : f32
  return %e, %t, %r, %l : f32, f32, f32, f32
}

// CHECK-LABEL: func.func @f64_ops
// CHECK:         math.exp %{{.*}} : f64
// CHECK:         math.erf %{{.*}} : f64
func.func @f64_ops(%x: f64) -> (f64, f64) {
  %e = math.exp %x : f64
  %r = math.erf %x : f64
  return %e, %r : f64, f64
}
