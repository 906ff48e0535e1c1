// One field of Linux's /proc/meminfo ("MemTotal:       16318664 kB"), in
// bytes: the one reader of that file, shared by the launcher's memory limits
// and the worker's probe. Thread-compatible.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

namespace tencache {

// The bytes `field` (e.g. "MemTotal", "MemAvailable") states in the meminfo
// file at `path`; nullopt when the file cannot be read, has no such line, or
// the line is not "FIELD: DIGITS kB" (or overflows 64 bits in bytes).
std::optional<uint64_t> MeminfoBytes(const std::string& field,
                                     const std::filesystem::path& path = "/proc/meminfo");

// Decimal digits only: no sign, no space, no overflow; nullopt otherwise.
std::optional<uint64_t> ParseDecimal(const std::string& s);

}  // namespace tencache
