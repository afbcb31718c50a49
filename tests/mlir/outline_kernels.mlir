// RUN: ingot-opt %s --mlir-pipeline='ingot-outline-kernels' | FileCheck %s

// Each top-level loop nest of the entry becomes a kernel function marked ingot.kernel and is
// called; the two nests identical up to their buffers share one kernel (compiled once). Static
// buffers are passed as bare pointers (llvm.bareptr), and buffers no other argument of the call
// can overlap (a fresh allocation) are llvm.noalias.
#id = affine_map<(d0) -> (d0)>

// The kernels follow the functions that call them, in order of first use.
// CHECK:       func.func @main(%[[A:.*]]: memref<16xf32>, %[[B:.*]]: memref<16xf32>, %[[C:.*]]: memref<16xf32>, %[[D:.*]]: memref<16xf32>)
// CHECK-NEXT:    call @[[K:ingot_k_[0-9a-f]+]](%[[A]], %[[B]])
// CHECK-NEXT:    call @[[K]](%[[C]], %[[D]])
// CHECK-NEXT:    return
// CHECK:       func.func @fresh
// CHECK:         %[[T:.*]] = memref.alloc
// CHECK-NEXT:    call @[[K2:ingot_k_[0-9a-f]+]](%{{.*}}, %[[T]])
// CHECK:       func.func @[[K]](%{{.*}}: memref<16xf32>, %{{.*}}: memref<16xf32>)
// CHECK-SAME:    attributes {ingot.kernel, llvm.bareptr}
// CHECK-NEXT:    linalg.generic
// CHECK:           math.exp
// CHECK:       func.func @[[K2]](%{{.*}}: memref<16xf32> {llvm.noalias}, %{{.*}}: memref<16xf32> {llvm.noalias})
// CHECK-NEXT:    linalg.generic
// CHECK:           arith.negf
// CHECK-NOT:   func.func

func.func @main(%a: memref<16xf32>, %b: memref<16xf32>, %c: memref<16xf32>, %d: memref<16xf32>) {
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]} ins(%a : memref<16xf32>) outs(%b : memref<16xf32>) {
    ^bb0(%x: f32, %o: f32):
      %y = math.exp %x : f32
      linalg.yield %y : f32
  }
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]} ins(%c : memref<16xf32>) outs(%d : memref<16xf32>) {
    ^bb0(%x: f32, %o: f32):
      %y = math.exp %x : f32
      linalg.yield %y : f32
  }
  return
}

func.func @fresh(%a: memref<16xf32>) -> memref<16xf32> {
  %t = memref.alloc() : memref<16xf32>
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]} ins(%a : memref<16xf32>) outs(%t : memref<16xf32>) {
    ^bb0(%x: f32, %o: f32):
      %y = arith.negf %x : f32
      linalg.yield %y : f32
  }
  return %t : memref<16xf32>
}
