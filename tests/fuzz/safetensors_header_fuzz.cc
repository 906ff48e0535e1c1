// libFuzzer target: ParseSafetensorsHeader on any bytes. The first 8 bytes
// (little-endian) are the data section's size, the rest the JSON header, as in
// a file. Every input must give tensors that tile the data exactly, or an
// InvalidArgument naming the file (in at most 2 KiB: a long value is never
// echoed whole) — never a crash, a hang, an exception or a sanitizer report.
// Built by TENCACHE_FUZZ=ON (bench/fuzz runs it).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <string_view>

#include "common/safetensors.h"

namespace {

void Fail(const std::string& why) {
  std::fprintf(stderr, "safetensors_header_fuzz: %s\n", why.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 8) return 0;
  uint64_t data_bytes = 0;
  for (int i = 0; i < 8; ++i) data_bytes |= uint64_t(data[i]) << (8 * i);
  const std::string_view json(reinterpret_cast<const char*>(data) + 8, size - 8);
  std::map<std::string, std::string> metadata;
  tencache::StatusOr<std::vector<tencache::StTensor>> tensors =
      tencache::ParseSafetensorsHeader(json, data_bytes, "fuzz.safetensors", &metadata);
  if (!tensors.ok()) {
    if (tensors.status().code() != tencache::StatusCode::kInvalidArgument) Fail("unexpected status code");
    if (tensors.status().message().rfind("fuzz.safetensors: ", 0) != 0) Fail("error does not name the file");
    if (tensors.status().message().size() > 2048) Fail("the message echoes too much");
    return 0;
  }
  // What the reader relies on: in data order, contiguous, covering the data,
  // each range the size of its shape.
  uint64_t expect = 0;
  for (const tencache::StTensor& t : *tensors) {
    if (t.begin != expect || t.end < t.begin) Fail("tensor '" + t.name + "' is not contiguous");
    if (t.end - t.begin != t.numel() * uint64_t(tencache::StDTypeBytes(t.dtype))) Fail("size mismatch: " + t.name);
    if (t.name.empty()) Fail("an empty name");
    expect = t.end;
  }
  if (expect != data_bytes) Fail("the tensors do not cover the data");
  return 0;
}
