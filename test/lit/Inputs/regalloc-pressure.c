#include <stdio.h>
/* Enough live values to make the register allocator work. */
__attribute__((noinline)) static long mix(const long *a, int n) {
  long s0 = 1, s1 = 2, s2 = 3, s3 = 4, s4 = 5, s5 = 6, s6 = 7, s7 = 8;
  long s8 = 9, s9 = 10, s10 = 11, s11 = 12, s12 = 13, s13 = 14;
  for (int i = 0; i < n; ++i) {
    long v = a[i];
    s0 += v * 3; s1 ^= v + s0; s2 += s1 >> 1; s3 -= s2 * 5; s4 += s3 ^ v;
    s5 += s4 * s0; s6 ^= s5 + 7; s7 += s6 >> 2; s8 -= s7 + v; s9 += s8 * 11;
    s10 ^= s9 - s1; s11 += s10 * s2; s12 -= s11 ^ s3; s13 += s12 + s4;
  }
  return s0 + s1 + s2 + s3 + s4 + s5 + s6 + s7 + s8 + s9 + s10 + s11 + s12 + s13;
}
int main(void) {
  long a[64];
  for (int i = 0; i < 64; ++i) a[i] = (i * 37) % 101 - 50;
  printf("mix=%ld\n", mix(a, 64));
  return 0;
}
