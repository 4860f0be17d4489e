/* A sample for `make demo`: three functions whose features lead the built-in
 * policy to three different decisions. */
int ext(int);

/* Loop-free and tiny. */
int small(int x) { return x * 2 + 1; }

/* Two nested loops. */
int sum(int *a, int n) {
  int s = 0;
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j)
      s += a[i] * a[j];
  return s;
}

/* Loop-free and large. */
int big(int *a, int x) {
  int r = ext(x);
  if (x > 3)
    r += a[0] * 7;
  else
    r -= a[1] / 3;
  if (r > 100)
    r = ext(r) + a[2];
  else
    r = r * a[3] - 5;
  a[8] = r;
  a[9] = r * 2;
  return r + small(r);
}
