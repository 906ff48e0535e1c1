// Safetensors files (Hugging Face's format): an 8-byte little-endian header
// length N, N bytes of JSON naming each tensor's dtype, shape and byte range
// [begin, end) in the data that follows, then the data. The header is
// untrusted input: ParseSafetensorsHeader checks its size, its JSON, every
// dtype, shape and range (inside the data, consistent with dtype x shape,
// contiguous and without overlap or gap, as the reference implementation
// requires) and names, and names the offending tensor in its error
// (InvalidArgument). A checkpoint is one file, or a folder holding
// model.safetensors or model.safetensors.index.json and its shards; tensors are
// read one at a time with pread, so a checkpoint never has to fit in memory.
// Writing follows the reference writer: tensors sorted by name (one dtype),
// compact JSON with "__metadata__" first, the header padded with spaces to a
// multiple of 8, written under a temporary name, fsynced and renamed.
// Reader and writer are thread-compatible; ReadF32 on one reader may run on
// several threads at once.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace tencache {

enum class StDType { kF32, kF16, kBF16 };
const char* StDTypeName(StDType d);  // "F32", "F16", "BF16"
int StDTypeBytes(StDType d);

struct StTensor {
  std::string name;
  StDType dtype = StDType::kF32;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  // byte range in the data section
  int file = 0;                 // index into SafetensorsReader::files()
  uint64_t numel() const;
};

// The largest header accepted (the reference implementation's limit).
constexpr uint64_t kMaxSafetensorsHeader = 100ull << 20;

// Parses the JSON header of a file whose data section holds `data_bytes`
// bytes. `where` (the file) starts every error. Tensors in data order.
StatusOr<std::vector<StTensor>> ParseSafetensorsHeader(std::string_view json, uint64_t data_bytes,
                                                       const std::string& where,
                                                       std::map<std::string, std::string>* metadata = nullptr);

class SafetensorsReader {
 public:
  // A .safetensors file, or a folder with model.safetensors.index.json (its
  // weight_map names each tensor's shard) or a single model.safetensors.
  // NotFound / IoError / InvalidArgument naming the file.
  static StatusOr<SafetensorsReader> Open(const std::string& path);
  SafetensorsReader(SafetensorsReader&&) noexcept;
  SafetensorsReader& operator=(SafetensorsReader&&) noexcept;
  ~SafetensorsReader();

  const std::vector<std::string>& files() const { return files_; }
  const std::vector<StTensor>& tensors() const { return tensors_; }
  // nullptr when absent.
  const StTensor* Find(const std::string& name) const;
  // The tensor converted to fp32 into out[t.numel()]. IoError naming the file
  // and offset on a short read.
  Status ReadF32(const StTensor& t, float* out) const;

 private:
  SafetensorsReader() = default;
  Status AddFile(const std::string& path, const std::vector<std::string>* only);
  std::vector<std::string> files_;
  std::vector<int> fds_;
  std::vector<uint64_t> data_start_;  // per file: 8 + header bytes
  std::vector<StTensor> tensors_;
  std::map<std::string, size_t> by_name_;
};

// Writes one file: Begin with every tensor's name, dtype and shape, then Write
// each tensor's bytes (in any order), then Finish.
class SafetensorsWriter {
 public:
  struct Entry {
    std::string name;
    StDType dtype = StDType::kF32;
    std::vector<int64_t> shape;
  };
  // InvalidArgument on a duplicate or empty name; IoError when `path`'s
  // temporary file cannot be created.
  static StatusOr<SafetensorsWriter> Begin(const std::string& path, std::vector<Entry> entries,
                                           const std::map<std::string, std::string>& metadata);
  SafetensorsWriter(SafetensorsWriter&&) noexcept;
  ~SafetensorsWriter();  // an unfinished file is removed
  // Tensor `name`'s bytes (numel x its dtype's size). InvalidArgument for an
  // unknown name, a wrong size or a second write.
  Status Write(const std::string& name, const void* data, uint64_t bytes);
  // Every entry written: fsync, rename to the path, fsync the folder.
  Status Finish();

 private:
  SafetensorsWriter() = default;
  std::string path_, tmp_;
  int fd_ = -1;
  uint64_t data_start_ = 0;
  struct Slot {
    uint64_t offset = 0, bytes = 0;
    bool written = false;
  };
  std::map<std::string, Slot> slots_;
};

// fp32 <-> the stored dtype (bf16 and fp16 round to nearest even).
void ConvertToF32(StDType from, const void* in, uint64_t n, float* out);
void ConvertFromF32(StDType to, const float* in, uint64_t n, void* out);

}  // namespace tencache
