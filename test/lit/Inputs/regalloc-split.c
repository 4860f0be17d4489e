#include <stdio.h>
/* Values live across a hot loop and used in it, under register pressure: spilled whole,
   each costs a reload per use in the loop; split around the loop's block, a copy in and
   a copy out. */
__attribute__((noinline)) static long hot(const long *a, int n, long k0, long k1,
                                          long k2, long k3) {
  long s0 = 1, s1 = 2, s2 = 3, s3 = 4, s4 = 5, s5 = 6, s6 = 7, s7 = 8, s8 = 9;
  long s9 = 10;
  for (int i = 0; i < n; ++i) {
    long v = a[i];
    s0 += v * k0; s1 ^= v + s0 + k1; s2 += s1 >> 1; s3 -= s2 * k2; s4 += s3 ^ v;
    s5 += s4 * s0 + k3; s6 ^= s5 + k0; s7 += s6 >> 2; s8 -= s7 + v * k1;
    s9 += s8 * k2; s0 ^= s9 + k3;
  }
  printf("k=%ld,%ld,%ld,%ld\n", k0, k1, k2, k3);
  return s0 + s1 + s2 + s3 + s4 + s5 + s6 + s7 + s8 + s9 + k0 * k1 * k2 * k3;
}
int main(int argc, char **argv) {
  (void)argv;
  long a[64];
  for (int i = 0; i < 64; ++i) a[i] = (i * 37) % 101 - 50;
  printf("hot=%ld\n", hot(a, 64, argc + 2, argc + 3, argc + 4, argc + 5));
  return 0;
}
