// ShardedSafetensorsWriter: a checkpoint folder as transformers'
// save_pretrained writes it. Tensors, in the order given, are cut into shards
// of at most `max_shard_bytes` of data each (a tensor larger than that gets a
// shard of its own), named model-00001-of-0000N.safetensors, beside
// model.safetensors.index.json ({"metadata": {"total_size"}, "weight_map":
// {tensor: file}}); when everything fits one shard, a single model.safetensors
// and no index. Each file is written under a temporary name and renamed by
// Finish, the index last, and files of an earlier checkpoint of another
// layout in the folder are removed then: a reader never sees a mix.
// Thread-compatible.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "common/safetensors.h"

namespace tencache {

// transformers' default max_shard_size ("5GB").
constexpr uint64_t kDefaultMaxShardBytes = 5'000'000'000ull;

class ShardedSafetensorsWriter {
 public:
  // REQUIRES: max_shard_bytes > 0. InvalidArgument on a duplicate or empty
  // name; IoError when `dir` or a shard's temporary file cannot be created.
  static StatusOr<ShardedSafetensorsWriter> Begin(const std::string& dir, std::vector<SafetensorsWriter::Entry> entries,
                                                  const std::map<std::string, std::string>& metadata,
                                                  uint64_t max_shard_bytes);
  ShardedSafetensorsWriter(ShardedSafetensorsWriter&&) noexcept;
  ShardedSafetensorsWriter& operator=(ShardedSafetensorsWriter&&) noexcept;
  ~ShardedSafetensorsWriter();  // unfinished shards are removed

  // Tensor `name`'s bytes, in any order (SafetensorsWriter::Write's contract).
  Status Write(const std::string& name, const void* data, uint64_t bytes);
  // Every tensor written: each shard finished (fsync, rename), the index
  // written and renamed, stale files of another layout removed.
  // FailedPrecondition naming a tensor not written (nothing renamed then).
  Status Finish();
  // The files Finish leaves, in shard order (names within the folder).
  const std::vector<std::string>& files() const { return files_; }

 private:
  ShardedSafetensorsWriter() = default;
  std::string dir_;
  std::vector<std::string> files_;
  std::vector<std::unique_ptr<SafetensorsWriter>> shards_;
  std::map<std::string, size_t> shard_of_;  // tensor name -> index into shards_
  std::set<std::string> written_;
  uint64_t total_bytes_ = 0;
};

}  // namespace tencache
