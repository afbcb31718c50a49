// RUN: ingot-opt %s --mlir-pipeline='func.func(ingot-early-dealloc)' | FileCheck %s

// The deallocation pipeline frees buffers at the end of their block; the pass frees each one right
// after its last use (here: %t after the copy into %b, before the unrelated work on %c).

// CHECK-LABEL: func.func @step
// CHECK:         %[[T:.*]] = memref.alloc() : memref<64xf32>
// CHECK-NEXT:    memref.copy %{{.*}}, %[[T]]
// CHECK-NEXT:    memref.copy %[[T]], %{{.*}}
// CHECK-NEXT:    memref.dealloc %[[T]]
// CHECK:         %[[U:.*]] = memref.alloc() : memref<64xf32>
// CHECK-NEXT:    memref.copy %{{.*}}, %[[U]]
// CHECK-NEXT:    memref.dealloc %[[U]]
// CHECK-NEXT:    return
func.func @step(%a: memref<64xf32>, %b: memref<64xf32>, %c: memref<64xf32>) {
  %t = memref.alloc() : memref<64xf32>
  memref.copy %a, %t : memref<64xf32> to memref<64xf32>
  memref.copy %t, %b : memref<64xf32> to memref<64xf32>
  %u = memref.alloc() : memref<64xf32>
  memref.copy %c, %u : memref<64xf32> to memref<64xf32>
  memref.dealloc %t : memref<64xf32>
  memref.dealloc %u : memref<64xf32>
  return
}

// A buffer read through a view is live until the view's last use.
// CHECK-LABEL: func.func @view
// CHECK:         %[[T:.*]] = memref.alloc() : memref<8x8xf32>
// CHECK:         %[[S:.*]] = memref.subview %[[T]]
// CHECK-NEXT:    memref.copy %[[S]], %{{.*}}
// CHECK-NEXT:    memref.dealloc %[[T]]
func.func @view(%a: memref<8x8xf32>, %b: memref<4x8xf32, strided<[8, 1]>>) {
  %t = memref.alloc() : memref<8x8xf32>
  memref.copy %a, %t : memref<8x8xf32> to memref<8x8xf32>
  %s = memref.subview %t[0, 0] [4, 8] [1, 1] : memref<8x8xf32> to memref<4x8xf32, strided<[8, 1]>>
  memref.copy %s, %b : memref<4x8xf32, strided<[8, 1]>> to memref<4x8xf32, strided<[8, 1]>>
  %c0 = arith.constant 0 : index
  memref.dealloc %t : memref<8x8xf32>
  return
}
