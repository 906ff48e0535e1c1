// Byte sizes as users write them ("20GiB", "1.5 TB", "512MiB", "4096") and as we
// print them. Binary units (KiB, MiB, GiB, TiB, PiB) are powers of 1024; decimal
// units (KB, MB, GB, TB, PB) powers of 1000, as storage vendors use them. Pure functions;
// thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace tencache {

constexpr uint64_t kKiB = 1024ull;
constexpr uint64_t kMiB = 1024ull * kKiB;
constexpr uint64_t kGiB = 1024ull * kMiB;
constexpr uint64_t kTiB = 1024ull * kGiB;
constexpr uint64_t kPiB = 1024ull * kTiB;

// Parses a non-negative size. Accepts an optional fraction and exponent
// ("1.5GiB", "1e9"), optional spaces before the unit, units B, K/KB/KiB, M/MB/MiB,
// G/GB/GiB, T/TB/TiB, P/PB/PiB (case-insensitive; bare K/M/G/T/P mean the binary
// unit), so that whatever FormatBytes prints can be typed back.
// Returns InvalidArgument with the text and the expected form on failure.
StatusOr<uint64_t> ParseByteSize(std::string_view text);

// "1.50 GiB", "512 MiB", "0 B": three significant digits, binary units.
std::string FormatBytes(uint64_t bytes);
std::string FormatBytes(double bytes);

}  // namespace tencache
