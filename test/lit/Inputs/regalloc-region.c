#include <stdio.h>
/* Values live across a hot loop and used in it, and across a call on a rare path of the
   loop: no caller-saved register holds them across the call, and there are too few
   callee-saved ones. Spilled whole, each costs a reload per use in the loop; split
   around the region where a caller-saved register is free (all but the rare path), it
   stays in that register in the loop and is stored and reloaded around the call. */
__attribute__((noinline)) long rare(long x) { return x * 3 + 1; }
__attribute__((noinline)) static long hot(const long *a, int n, long k0, long k1,
                                          long k2, long k3, long k4, long k5) {
  long s0 = 1, s1 = 2, s2 = 3, s3 = 4, s4 = 5, s5 = 6;
  for (int i = 0; i < n; ++i) {
    long v = a[i];
    if (__builtin_expect(v == 49, 0))
      s5 += rare(v + s0);
    s0 += v * k0; s1 ^= v + s0 + k1; s2 += s1 >> 1; s3 -= s2 * k2;
    s4 += s3 ^ (v * k3); s5 += s4 * s0 + k4; s0 ^= s5 + k5;
  }
  printf("k=%ld,%ld,%ld,%ld,%ld,%ld\n", k0, k1, k2, k3, k4, k5);
  return s0 + s1 + s2 + s3 + s4 + s5 + k0 * k1 * k2 * k3 * k4 * k5;
}
int main(int argc, char **argv) {
  (void)argv;
  long a[64];
  for (int i = 0; i < 64; ++i) a[i] = (i * 37) % 101 - 50;
  printf("hot=%ld\n", hot(a, 64, argc + 2, argc + 3, argc + 4, argc + 5, argc + 6, argc + 7));
  return 0;
}
