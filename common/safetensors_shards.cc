#include "common/safetensors_shards.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>

#include <nlohmann/json.hpp>

namespace tencache {
namespace {

namespace fs = std::filesystem;

constexpr const char* kIndexName = "model.safetensors.index.json";
constexpr const char* kSingleName = "model.safetensors";

uint64_t EntryBytes(const SafetensorsWriter::Entry& e) {
  uint64_t numel = 1;
  for (int64_t d : e.shape) numel *= uint64_t(d);
  return numel * uint64_t(StDTypeBytes(e.dtype));
}

std::string ShardName(size_t i, size_t n) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "model-%05zu-of-%05zu.safetensors", i + 1, n);
  return buf;
}

// Writes `text` to `path` under a temporary name, fsynced, then renamed.
Status WriteFileAtomically(const fs::path& path, const std::string& text) {
  const fs::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    out.flush();
    if (!out) return Status::IoError(tmp.string() + ": cannot write");
  }
  if (FILE* f = std::fopen(tmp.c_str(), "rb")) {
    ::fsync(fileno(f));
    std::fclose(f);
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) return Status::IoError(path.string() + ": rename: " + ec.message());
  return Status::Ok();
}

}  // namespace

StatusOr<ShardedSafetensorsWriter> ShardedSafetensorsWriter::Begin(const std::string& dir,
                                                                   std::vector<SafetensorsWriter::Entry> entries,
                                                                   const std::map<std::string, std::string>& metadata,
                                                                   uint64_t max_shard_bytes) {
  if (max_shard_bytes == 0) return Status::InvalidArgument(dir + ": a shard must hold at least one byte");
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Status::IoError(dir + ": cannot create: " + ec.message());
  // Cut in the given order, as transformers does: a new shard when the next
  // tensor would take the current one past the limit.
  std::vector<std::vector<SafetensorsWriter::Entry>> groups;
  uint64_t in_group = 0;
  ShardedSafetensorsWriter w;
  for (SafetensorsWriter::Entry& e : entries) {
    const uint64_t bytes = EntryBytes(e);
    if (groups.empty() || (in_group > 0 && in_group + bytes > max_shard_bytes)) {
      groups.emplace_back();
      in_group = 0;
    }
    in_group += bytes;
    w.total_bytes_ += bytes;
    if (!w.shard_of_.emplace(e.name, groups.size() - 1).second) {
      return Status::InvalidArgument(dir + ": tensor name '" + e.name + "' is repeated");
    }
    groups.back().push_back(std::move(e));
  }
  if (groups.empty()) groups.emplace_back();
  w.dir_ = dir;
  for (size_t i = 0; i < groups.size(); ++i) {
    w.files_.push_back(groups.size() == 1 ? kSingleName : ShardName(i, groups.size()));
    TC_ASSIGN_OR_RETURN(SafetensorsWriter s,
                        SafetensorsWriter::Begin((fs::path(dir) / w.files_.back()).string(), std::move(groups[i]), metadata));
    w.shards_.push_back(std::make_unique<SafetensorsWriter>(std::move(s)));
  }
  return w;
}

ShardedSafetensorsWriter::ShardedSafetensorsWriter(ShardedSafetensorsWriter&&) noexcept = default;
ShardedSafetensorsWriter& ShardedSafetensorsWriter::operator=(ShardedSafetensorsWriter&&) noexcept = default;
ShardedSafetensorsWriter::~ShardedSafetensorsWriter() = default;

Status ShardedSafetensorsWriter::Write(const std::string& name, const void* data, uint64_t bytes) {
  auto it = shard_of_.find(name);
  if (it == shard_of_.end()) return Status::InvalidArgument(dir_ + ": tensor '" + name + "' is not in the checkpoint");
  TC_RETURN_IF_ERROR(shards_[it->second]->Write(name, data, bytes));
  written_.insert(name);
  return Status::Ok();
}

Status ShardedSafetensorsWriter::Finish() {
  for (const auto& [name, shard] : shard_of_) {  // before any shard is renamed into place
    if (!written_.count(name)) return Status::FailedPrecondition(dir_ + ": tensor '" + name + "' not written");
  }
  const fs::path dir(dir_);
  std::error_code ec;
  for (size_t i = 0; i < shards_.size(); ++i) {
    if (Status st = shards_[i]->Finish(); !st.ok()) {
      for (size_t j = 0; j < i; ++j) fs::remove(dir / files_[j], ec);  // no half checkpoint stays behind
      return st;
    }
  }
  if (files_.size() > 1) {
    nlohmann::ordered_json index;
    index["metadata"] = {{"total_size", total_bytes_}};
    nlohmann::ordered_json map = nlohmann::ordered_json::object();
    for (const auto& [name, shard] : shard_of_) map[name] = files_[shard];
    index["weight_map"] = map;
    TC_RETURN_IF_ERROR(WriteFileAtomically(dir / kIndexName, index.dump(2) + "\n"));
  } else {
    fs::remove(dir / kIndexName, ec);  // an earlier sharded checkpoint's: a reader would prefer it
  }
  // Shards of an earlier checkpoint of another count (or its single file).
  static const std::regex kShard(R"(model-\d{5}-of-\d{5}\.safetensors)");
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    const bool ours = std::find(files_.begin(), files_.end(), name) != files_.end();
    if (!ours && (std::regex_match(name, kShard) || name == kSingleName)) fs::remove(e.path(), ec);
  }
  return Status::Ok();
}

}  // namespace tencache
