// RUN: ingot-opt %s --target cuda --mlir-pipeline='func.func(ingot-gpu-prepare-loops{threads=128})' | FileCheck %s
// RUN: not ingot-opt %s --target cuda --mlir-pipeline='func.func(ingot-gpu-prepare-loops{threads=2000})' 2>&1 | FileCheck %s --check-prefix=ERR

// A block size CUDA cannot launch is refused, naming the pass and the value.
// ERR: ingot-gpu-prepare-loops: threads=2000 is not a CUDA block size (1 .. 1024 threads)

// A 2-D elementwise nest is collapsed to one dimension (the row-major linear index: consecutive
// threads touch consecutive elements) and tiled by the block size, 128 threads; the tail is
// guarded by scf.if.

// CHECK-LABEL: func.func @nest
// CHECK:         arith.constant 128 : index
// CHECK:         scf.parallel (%{{[^,]*}}) = (%{{.*}}) to (%{{.*}}) step (%{{.*}}) {
// CHECK-NEXT:      scf.parallel (%{{[^,]*}}) = (%{{.*}}) to (%{{.*}}) step (%{{.*}}) {
// CHECK:             scf.if
// CHECK-NEXT:          arith.remsi %{{.*}}, %{{.*}} : index
// CHECK-NEXT:          arith.divsi
// CHECK-NEXT:          memref.load
// CHECK-NEXT:          arith.addf
func.func @nest(%a: memref<10x30xf32>, %b: memref<10x30xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c10 = arith.constant 10 : index
  %c30 = arith.constant 30 : index
  scf.parallel (%i, %j) = (%c0, %c0) to (%c10, %c30) step (%c1, %c1) {
    %x = memref.load %a[%i, %j] : memref<10x30xf32>
    %y = arith.addf %x, %x : f32
    memref.store %y, %b[%i, %j] : memref<10x30xf32>
    scf.reduce
  }
  return
}
