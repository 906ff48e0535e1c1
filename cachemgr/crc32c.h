// CRC32C (Castagnoli): the checksum the NVMe tier stores for every extent it
// writes and verifies on every read. Uses the SSE4.2 crc32 instruction (three
// interleaved streams) when the CPU has it, else a slice-by-8 table. Pure
// functions; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tencache {

// Returns the CRC32C of data[0..n) continuing from `crc` (0 for a fresh sum).
uint32_t Crc32c(uint32_t crc, const void* data, size_t n);

// The same, always with the portable table (for tests and machines without SSE4.2).
uint32_t Crc32cPortable(uint32_t crc, const void* data, size_t n);

// "sse4.2" or "table": which implementation Crc32c uses on this CPU.
const char* Crc32cImplementation();

}  // namespace tencache
