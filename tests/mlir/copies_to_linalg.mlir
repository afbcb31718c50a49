// RUN: ingot-opt %s --target cuda --mlir-pipeline='func.func(ingot-copies-to-linalg)' | FileCheck %s

// Device buffers are never copied by host code: every memref.copy becomes a linalg.copy, which
// the loops stage turns into a kernel.

// CHECK-LABEL: func.func @step
// CHECK-NOT:     memref.copy
// CHECK:         linalg.copy ins(%{{.*}} : memref<4x8xf32>) outs(%{{.*}} : memref<4x8xf32>)
// CHECK:         return
func.func @step(%a: memref<4x8xf32>, %b: memref<4x8xf32>) {
  memref.copy %a, %b : memref<4x8xf32> to memref<4x8xf32>
  return
}
