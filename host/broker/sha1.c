/* sha1: SHA-1 (FIPS 180-4) in hex (see sha1.h). */
#include "sha1.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

static uint32_t rol(uint32_t v, int n) { return (v << n) | (v >> (32 - n)); }

static void sha1_block(uint32_t h[5], const unsigned char *p) {
  uint32_t w[80], a = h[0], b = h[1], c = h[2], d = h[3], e = h[4];
  for (int i = 0; i < 16; i++)
    w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 |
           p[4 * i + 3];
  for (int i = 16; i < 80; i++) w[i] = rol(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
  for (int i = 0; i < 80; i++) {
    uint32_t f, k;
    if (i < 20)
      f = (b & c) | (~b & d), k = 0x5A827999;
    else if (i < 40)
      f = b ^ c ^ d, k = 0x6ED9EBA1;
    else if (i < 60)
      f = (b & c) | (b & d) | (c & d), k = 0x8F1BBCDC;
    else
      f = b ^ c ^ d, k = 0xCA62C1D6;
    uint32_t t = rol(a, 5) + f + e + k + w[i];
    e = d, d = c, c = rol(b, 30), b = a, a = t;
  }
  h[0] += a, h[1] += b, h[2] += c, h[3] += d, h[4] += e;
}

void sha1_hex(const char *s, size_t len, char out[41]) {
  uint32_t h[5] = {0x67452301, 0xEFCDAB89, 0x98BADCFE, 0x10325476, 0xC3D2E1F0};
  unsigned char buf[128];
  size_t i = 0;
  for (; i + 64 <= len; i += 64) sha1_block(h, (const unsigned char *)s + i);
  size_t rest = len - i;
  memset(buf, 0, sizeof buf);
  memcpy(buf, s + i, rest);
  buf[rest] = 0x80;
  size_t total = rest + 9 <= 64 ? 64 : 128;
  uint64_t bits = (uint64_t)len * 8;
  for (int k = 0; k < 8; k++) buf[total - 1 - k] = (unsigned char)(bits >> (8 * k));
  sha1_block(h, buf);
  if (total == 128) sha1_block(h, buf + 64);
  for (int k = 0; k < 5; k++) snprintf(out + 8 * k, 9, "%08x", h[k]);
}
