// RUN: ingot-opt %s --mlir-pipeline='func.func(ingot-parallelize-outer-loops{threads=2 min-work=1000})' | FileCheck %s
// RUN: ingot-opt %s --mlir-pipeline='func.func(ingot-parallelize-outer-loops{threads=1})' | FileCheck %s --check-prefix=SERIAL

// A big nest keeps its leading dim parallel (enough chunks for 2 threads) and its inner dim
// becomes a serial loop; a nest below min-work becomes serial scf.for loops; with one thread
// nothing stays parallel.

// CHECK-LABEL: func.func @big
// CHECK:         scf.parallel (%{{.*}}) =
// CHECK:           scf.for
// CHECK:             arith.addf
// SERIAL-LABEL: func.func @big
// SERIAL-NOT:    scf.parallel
// SERIAL:        scf.for
// SERIAL:          scf.for
func.func @big(%a: memref<256x256xf32>, %b: memref<256x256xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = arith.constant 256 : index
  scf.parallel (%i, %j) = (%c0, %c0) to (%n, %n) step (%c1, %c1) {
    %x = memref.load %a[%i, %j] : memref<256x256xf32>
    %y = arith.addf %x, %x : f32
    memref.store %y, %b[%i, %j] : memref<256x256xf32>
    scf.reduce
  }
  return
}

// CHECK-LABEL: func.func @small
// CHECK-NOT:     scf.parallel
// CHECK:         scf.for
// CHECK:           scf.for
func.func @small(%a: memref<4x4xf32>, %b: memref<4x4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = arith.constant 4 : index
  scf.parallel (%i, %j) = (%c0, %c0) to (%n, %n) step (%c1, %c1) {
    %x = memref.load %a[%i, %j] : memref<4x4xf32>
    memref.store %x, %b[%i, %j] : memref<4x4xf32>
    scf.reduce
  }
  return
}
