// RUN: ingot-opt %s --mlir-pipeline='ingot-drop-argument-results' | FileCheck %s

// The entry's result that is its own argument %b is dropped and recorded in
// ingot.result_arguments (-1: a result the function still returns); private functions, whose
// callers upstream's drop-equivalent-buffer-results rewrites, are left alone.

// CHECK-LABEL: func.func @entry
// CHECK-SAME:    (%[[A:.*]]: memref<4xf32>, %[[B:.*]]: memref<4xf32>) -> memref<4xf32>
// CHECK-SAME:    ingot.result_arguments = array<i64: -1, 1>
// CHECK:         return %{{.*}} : memref<4xf32>
func.func @entry(%a: memref<4xf32>, %b: memref<4xf32>) -> (memref<4xf32>, memref<4xf32>) {
  %c = memref.alloc() : memref<4xf32>
  memref.copy %a, %c : memref<4xf32> to memref<4xf32>
  return %c, %b : memref<4xf32>, memref<4xf32>
}

// CHECK-LABEL: func.func private @helper
// CHECK-SAME:    -> memref<4xf32>
// CHECK-NOT:     ingot.result_arguments
// CHECK:         return %{{.*}} : memref<4xf32>
func.func private @helper(%a: memref<4xf32>) -> memref<4xf32> {
  return %a : memref<4xf32>
}
