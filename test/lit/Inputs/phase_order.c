/* Input of the phase-order lit tests (test/lit/opt/phase-order-*.test).
 * IR: clang-22 -O2 -Xclang -disable-llvm-passes -S -emit-llvm phase_order.c
 * (no LLVM passes: the sequences the agent picks do all the work).
 * add() is inlined only by an action with the inliner; the loop of sum4 has a
 * constant trip count and is unrolled only by the full-unroll action. */
static int add(int a, int b) { return a + b; }

int sum4(const int *p) {
  int s = 0;
  for (int i = 0; i < 4; ++i)
    s = add(s, p[i]);
  return s;
}

int scale(int x, int k) {
  int r = 0;
  if (k > 0)
    r = x * k;
  else
    r = x - k;
  return r;
}
