// Bytes of 64-bit values stored by an unrolled loop (as Lua's string.pack
// does): x86-64 takes the second byte from $ah/$bh/$ch/$dh, so that value needs
// one of four registers in the loop, beside loop counters that could live in
// any.
#include <stdio.h>

__attribute__((noinline)) static void packint(char *buff, unsigned long long n,
                                              int islittle, int size) {
  buff[islittle ? 0 : size - 1] = (char)(n & 0xff);
  for (int i = 1; i < size; i++) {
    n >>= 8;
    buff[islittle ? i : size - 1 - i] = (char)(n & 0xff);
  }
}

int main(void) {
  char buff[64];
  unsigned long long sum = 0;
  for (int k = 0; k < 40; k++) {
    unsigned long long v = 0x0123456789abcdefULL * (unsigned long long)(k + 1);
    packint(buff, v, k & 1, 8 + (k % 9));
    for (int i = 0; i < 8 + (k % 9); i++)
      sum = sum * 131 + (unsigned char)buff[i];
  }
  printf("sum=%llu\n", sum);
  return 0;
}
