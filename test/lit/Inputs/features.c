/* Source of Inputs/features.ll (see there); input of clang/fpass-plugin.test, docs/plugins.md. */
int ext(int);
/* loop-free, tiny: advice "inline" */
int small(int x) { return x * 2 + 1; }
/* two nested loops: advice "speed" */
int sum(int *a, int n) {
  int s = 0;
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j)
      s += a[i] * a[j];
  return s;
}
/* loop-free, large (> 20 instructions): advice "size" */
int big(int *a, int x) {
  int r = ext(x);
  if (x > 3) r += a[0] * 7; else r -= a[1] / 3;
  if (r > 100) r = ext(r) + a[2]; else r = r * a[3] - 5;
  a[8] = r; a[9] = r * 2;
  return r + small(r);
}
