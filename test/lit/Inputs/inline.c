/* Input of the ML inline advisor lit tests (test/lit/opt/inline-*.test).
 * IR: clang-22 -O2 -Xclang -disable-llvm-passes -S -emit-llvm inline.c
 * (without llvm passes, so the inliner has the work; -O0 would add noinline).
 * One-block callees: leaf, never_inl. Several blocks: loopy, forced. */
static int leaf(int x) { return x * 3 + 1; }

static int loopy(const int *a, int n) {
  int s = 0;
  for (int i = 0; i < n; ++i)
    if (a[i] > 3)
      s += a[i];
  return s;
}

__attribute__((always_inline)) static inline int forced(const int *a, int n) {
  int p = 1;
  for (int i = 0; i < n; ++i)
    p *= a[i] | 1;
  return p;
}

__attribute__((noinline)) static int never_inl(int x) { return x ^ 5; }

int entry(const int *a, int n) {
  return leaf(n) + loopy(a, n) + forced(a, n) + never_inl(n) + leaf(a[0]);
}
