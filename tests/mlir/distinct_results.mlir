// RUN: ingot-opt %s --mlir-pipeline='func.func(ingot-distinct-results)' | FileCheck %s
// RUN: ingot-opt %s --mlir-pipeline='func.func(ingot-distinct-results{guard-argument-copies=true})' | FileCheck %s --check-prefix=GUARD

// Every returned memref becomes a distinct allocation: a value returned twice gets a fresh copy
// for its second use, a returned argument a copy (guarded by "is the out-param another buffer?"
// with guard-argument-copies, the CPU pipeline's form).

// CHECK-LABEL: func.func @twice
// CHECK:         %[[X:.*]] = memref.alloc() : memref<4xf32>
// CHECK:         %[[Y:.*]] = memref.alloc() {alignment = 64 : i64} : memref<4xf32>
// CHECK-NEXT:    memref.copy %[[X]], %[[Y]]
// CHECK-NEXT:    return %[[X]], %[[Y]]
func.func @twice(%a: memref<4xf32>) -> (memref<4xf32>, memref<4xf32>) {
  %x = memref.alloc() : memref<4xf32>
  memref.copy %a, %x : memref<4xf32> to memref<4xf32>
  return %x, %x : memref<4xf32>, memref<4xf32>
}

// CHECK-LABEL: func.func @argument
// CHECK-SAME:    (%[[A:.*]]: memref<4xf32>)
// CHECK:         %[[C:.*]] = memref.alloc() {alignment = 64 : i64} : memref<4xf32>
// CHECK-NEXT:    memref.copy %[[A]], %[[C]]
// CHECK-NEXT:    return %[[C]]
// GUARD-LABEL: func.func @argument
// GUARD:         %[[C:.*]] = memref.alloc() {alignment = 64 : i64} : memref<4xf32>
// GUARD:         %[[DIFFER:.*]] = arith.cmpi ne
// GUARD-NEXT:    scf.if %[[DIFFER]] {
// GUARD-NEXT:      memref.copy
// GUARD:         return %[[C]]
func.func @argument(%a: memref<4xf32>) -> memref<4xf32> {
  return %a : memref<4xf32>
}
