#include <cstdio>
#include <stdexcept>
/* Values live into a landing pad from blocks with invokes: a split around such a block
   would copy the value back only after the call that may throw. */
__attribute__((noinline)) long may_throw(long x) {
  if (x == 7)
    throw std::runtime_error("seven");
  return x * 3;
}
__attribute__((noinline)) long caught(long a, long b, long c, long d, long e, long g) {
  long s = 0;
  for (long i = 0; i < 10; ++i) {
    try {
      s += may_throw(i + a);
      s += may_throw(i + b);
    } catch (const std::exception &) {
      s += a * 1000 + b * 100 + c * 10 + d + e + g;
    }
  }
  return s + a + b + c + d + e + g;
}
int main(int argc, char **) {
  printf("caught=%ld\n", caught(argc, argc + 1, argc + 2, argc + 3, argc + 4, argc + 5));
  return 0;
}
