// Shared input of the mlir-opt tests and docs/mlir.md: an affine nest with
// constant bounds and an scf nest whose outer bound is a function argument.
func.func @nest(%A: memref<16x8xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  affine.for %i = 0 to 16 {
    affine.for %j = 0 to 8 step 2 {
      %v = affine.load %A[%i, %j] : memref<16x8xf32>
      %w = arith.addf %v, %v : f32
      affine.store %w, %A[%i, %j] : memref<16x8xf32>
    }
  }
  scf.for %k = %c0 to %n step %c1 {
    scf.for %l = %c0 to %c4 step %c1 {
      %x = arith.addi %k, %l : index
    }
  }
  return
}

func.func @no_loops(%x: i32) -> i32 {
  return %x : i32
}
