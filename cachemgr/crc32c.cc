#include "cachemgr/crc32c.h"

#include <array>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace tencache {
namespace {

constexpr uint32_t kPoly = 0x82F63B78u;  // reflected Castagnoli polynomial

struct Tables {
  uint32_t t[8][256];
  Tables() {
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ kPoly : c >> 1;
      t[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; ++i)
      for (int s = 1; s < 8; ++s) t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xFF];
  }
};

const Tables& GetTables() {
  static const Tables tables;
  return tables;
}

uint32_t TableUpdate(uint32_t crc, const uint8_t* p, size_t n) {
  const Tables& T = GetTables();
  while (n >= 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    v ^= crc;
    crc = T.t[7][v & 0xFF] ^ T.t[6][(v >> 8) & 0xFF] ^ T.t[5][(v >> 16) & 0xFF] ^
          T.t[4][(v >> 24) & 0xFF] ^ T.t[3][(v >> 32) & 0xFF] ^ T.t[2][(v >> 40) & 0xFF] ^
          T.t[1][(v >> 48) & 0xFF] ^ T.t[0][v >> 56];
    p += 8;
    n -= 8;
  }
  while (n--) crc = (crc >> 8) ^ T.t[0][(crc ^ *p++) & 0xFF];
  return crc;
}

#if defined(__x86_64__)
// Multiplication in GF(2) modulo the CRC polynomial, used to shift a stream's
// CRC past the bytes of the streams that follow it.
uint32_t GfMultiply(uint32_t a, uint32_t b) {
  uint32_t product = 0;
  for (int i = 0; i < 32; ++i) {
    if (b & 0x80000000u) product ^= a;
    b <<= 1;
    a = (a & 1) ? (a >> 1) ^ kPoly : a >> 1;
  }
  return product;
}

// x^(8*n) mod P in the reflected representation: the operator that appends n zero bytes.
uint32_t ShiftOperator(size_t n) {
  uint32_t result = 0x80000000u;  // x^0
  uint32_t square = 0x00800000u;  // x^8 (one byte)
  while (n) {
    if (n & 1) result = GfMultiply(result, square);
    square = GfMultiply(square, square);
    n >>= 1;
  }
  return result;
}

constexpr size_t kStripe = 8192;  // bytes per stream per round

__attribute__((target("sse4.2"))) uint32_t HwUpdate(uint32_t crc, const uint8_t* p, size_t n) {
  static const uint32_t shift = ShiftOperator(kStripe);
  uint64_t c0 = crc;
  // Three independent streams hide the instruction's 3-cycle latency.
  while (n >= 3 * kStripe) {
    uint64_t c1 = 0, c2 = 0;
    const uint8_t* p1 = p + kStripe;
    const uint8_t* p2 = p + 2 * kStripe;
    for (size_t i = 0; i < kStripe; i += 8) {
      uint64_t v0, v1, v2;
      std::memcpy(&v0, p + i, 8);
      std::memcpy(&v1, p1 + i, 8);
      std::memcpy(&v2, p2 + i, 8);
      c0 = _mm_crc32_u64(c0, v0);
      c1 = _mm_crc32_u64(c1, v1);
      c2 = _mm_crc32_u64(c2, v2);
    }
    c0 = GfMultiply(static_cast<uint32_t>(c0), shift) ^ c1;
    c0 = GfMultiply(static_cast<uint32_t>(c0), shift) ^ c2;
    p += 3 * kStripe;
    n -= 3 * kStripe;
  }
  while (n >= 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    c0 = _mm_crc32_u64(c0, v);
    p += 8;
    n -= 8;
  }
  uint32_t c = static_cast<uint32_t>(c0);
  while (n--) c = _mm_crc32_u8(c, *p++);
  return c;
}

bool HaveSse42() {
  static const bool have = __builtin_cpu_supports("sse4.2");
  return have;
}
#endif

}  // namespace

uint32_t Crc32cPortable(uint32_t crc, const void* data, size_t n) {
  return ~TableUpdate(~crc, static_cast<const uint8_t*>(data), n);
}

uint32_t Crc32c(uint32_t crc, const void* data, size_t n) {
#if defined(__x86_64__)
  if (HaveSse42()) return ~HwUpdate(~crc, static_cast<const uint8_t*>(data), n);
#endif
  return Crc32cPortable(crc, data, n);
}

const char* Crc32cImplementation() {
#if defined(__x86_64__)
  if (HaveSse42()) return "sse4.2";
#endif
  return "table";
}

}  // namespace tencache
