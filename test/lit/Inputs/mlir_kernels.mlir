// Kernels of the mlbridge-loop-unroll tests. Every function takes %n: index
// (a dynamic trip count where used) and returns an i64 result, so that a C
// driver can call it after lowering (test/python/support/mlir_lowering.py) and the results
// before and after unrolling can be compared.

// Constant trip counts 64 (a store loop, then a reduction over iter_args):
// sum of i*i for i < 64 = 85344.
func.func @affine_sum_squares(%n: index) -> i64 {
  %A = memref.alloca() : memref<64xi64>
  affine.for %i = 0 to 64 {
    %v = arith.index_cast %i : index to i64
    %sq = arith.muli %v, %v : i64
    affine.store %sq, %A[%i] : memref<64xi64>
  }
  %zero = arith.constant 0 : i64
  %s = affine.for %i = 0 to 64 iter_args(%acc = %zero) -> (i64) {
    %x = affine.load %A[%i] : memref<64xi64>
    %y = arith.addi %acc, %x : i64
    affine.yield %y : i64
  }
  return %s : i64
}

// A dynamic trip count: an order-dependent hash of 0..n-1.
func.func @scf_dynamic_hash(%n: index) -> i64 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %seed = arith.constant 7 : i64
  %m = arith.constant 31 : i64
  %h = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %seed) -> (i64) {
    %v = arith.index_cast %i : index to i64
    %t = arith.muli %acc, %m : i64
    %u = arith.addi %t, %v : i64
    scf.yield %u : i64
  }
  return %h : i64
}

// Constant trip count 10, step 3 from 1 (iterations 1, 4, 7, ... 28):
// neither 4 nor 8 divides it.
func.func @scf_const_trip10(%n: index) -> i64 {
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %c29 = arith.constant 29 : index
  %seed = arith.constant 1 : i64
  %m = arith.constant 5 : i64
  %h = scf.for %i = %c1 to %c29 step %c3 iter_args(%acc = %seed) -> (i64) {
    %v = arith.index_cast %i : index to i64
    %t = arith.muli %acc, %m : i64
    %u = arith.subi %t, %v : i64
    scf.yield %u : i64
  }
  return %h : i64
}

// A nest: the inner affine loop has a dynamic upper bound (n), the
// outer one a constant trip count 6 and a call in its body.
func.func private @weight(%i: index) -> i64 {
  %v = arith.index_cast %i : index to i64
  %c3 = arith.constant 3 : i64
  %w = arith.addi %v, %c3 : i64
  return %w : i64
}
func.func @affine_nest(%n: index) -> i64 {
  %A = memref.alloca() : memref<1xi64>
  %zero = arith.constant 0 : i64
  affine.store %zero, %A[0] : memref<1xi64>
  affine.for %i = 0 to 6 {
    %w = func.call @weight(%i) : (index) -> i64
    affine.for %j = 0 to %n {
      %old = affine.load %A[0] : memref<1xi64>
      %jv = arith.index_cast %j : index to i64
      %p = arith.muli %w, %jv : i64
      %q = arith.muli %old, %w : i64
      %r = arith.addi %q, %p : i64
      affine.store %r, %A[0] : memref<1xi64>
    }
  }
  %res = affine.load %A[0] : memref<1xi64>
  return %res : i64
}
