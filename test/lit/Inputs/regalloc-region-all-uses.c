#include <stdio.h>
/* k is read only in the second loop, but lives from the entry across the first, whose
   call clobbers the caller-saved registers and whose values living across the call (a,
   i, c0 to c5) take the callee-saved ones: no register is free for k's whole live range.
   A register free wherever k is read (a caller-saved one, free everywhere but across the
   call) gives a region with all of k's uses; outside it k is only carried, from copy to
   copy, across the first loop. */
__attribute__((noinline)) long step(long x) { return x * 5 + 3; }
__attribute__((noinline)) static long twoloops(const long *a, int n, long k) {
  long c0 = a[0], c1 = a[1], c2 = a[2], c3 = a[3], c4 = a[4], c5 = a[5];
  for (int i = 0; i < n; ++i) {
    long v = step(a[i]);
    c0 += v; c1 ^= v + c0; c2 += c1; c3 -= c2; c4 += c3 ^ v; c5 += c4;
  }
  long s = 0;
  for (int i = 0; i < n; ++i)
    s += a[i] * k + (s >> 3);
  return s + c0 + c1 + c2 + c3 + c4 + c5;
}
int main(int argc, char **argv) {
  (void)argv;
  long a[64];
  for (int i = 0; i < 64; ++i) a[i] = (i * 37) % 101 - 50;
  printf("twoloops=%ld\n", twoloops(a, 64, argc + 6));
  return 0;
}
