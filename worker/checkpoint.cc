#include "worker/checkpoint.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace tencache {
namespace {

namespace fs = std::filesystem;

constexpr char kFormat[] = "tencache-checkpoint";
constexpr int kVersion = 1;

Status Errno(const std::string& what) { return Status::IoError(what + ": " + std::strerror(errno)); }

Status FsyncPath(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Errno("opening " + path + " to fsync");
  const int rc = ::fsync(fd);
  ::close(fd);
  return rc == 0 ? Status::Ok() : Errno("fsync " + path);
}

}  // namespace

std::string CheckpointIdentity(const JobSpec& job) {
  const ModelShape& m = job.model;
  std::ostringstream out;
  out << "model " << m.name << " layers " << m.layers << " hidden " << m.hidden << " heads " << m.heads
      << " kv_heads " << m.kv_heads << " ffn " << m.ffn_hidden << " seq " << m.seq_len << " vocab " << m.vocab
      << " positions " << m.max_positions << " mlp " << int(m.mlp) << " norm " << int(m.norm) << " position "
      << int(m.position) << " bias " << m.bias << " tied " << m.tied_embeddings << " fused " << m.fused_qkv
      << " parallel " << m.parallel_block << " embedding_norm " << m.embedding_norm << " rope " << m.rope_theta
      << " eps " << m.norm_eps << "; dtype " << DTypeName(job.dtype) << "; seed " << job.train.seed
      << "; global_batch " << job.train.global_batch << "; data " << job.train.data;
  return out.str();
}

nlohmann::ordered_json CheckpointManifest::ToJson() const {
  nlohmann::ordered_json j = {{"format", kFormat},
                              {"version", kVersion},
                              {"step", step},
                              {"world_size", world_size},
                              {"identity", identity},
                              {"optimizer_steps", optimizer_steps},
                              {"loss_scale", loss_scale},
                              {"good_steps", good_steps},
                              {"skipped_steps", skipped_steps}};
  nlohmann::ordered_json files = nlohmann::ordered_json::array();
  for (size_t r = 0; r < ranks.size(); ++r) {
    files.push_back({{"name", RankFileName(int(r))}, {"bytes", ranks[r].bytes}, {"shard_crc32c", ranks[r].shard_crc}});
  }
  j["files"] = files;
  return j;
}

StatusOr<CheckpointManifest> CheckpointManifest::FromJson(const nlohmann::json& j, const std::string& path) {
  auto bad = [&](const std::string& what) {
    return Status::InvalidArgument(path + ": not a tencache checkpoint manifest (" + what + ")");
  };
  if (!j.is_object() || j.value("format", "") != kFormat) return bad("format is not '" + std::string(kFormat) + "'");
  if (j.value("version", 0) != kVersion) return bad("version " + std::to_string(j.value("version", 0)) + ", expected 1");
  CheckpointManifest m;
  try {
    m.step = j.at("step").get<int64_t>();
    m.world_size = j.at("world_size").get<int>();
    m.identity = j.at("identity").get<std::string>();
    m.optimizer_steps = j.at("optimizer_steps").get<int64_t>();
    m.loss_scale = j.at("loss_scale").get<double>();
    m.good_steps = j.at("good_steps").get<int>();
    m.skipped_steps = j.at("skipped_steps").get<int64_t>();
    for (const nlohmann::json& f : j.at("files")) {
      RankFileInfo info;
      info.bytes = f.at("bytes").get<uint64_t>();
      info.shard_crc = f.at("shard_crc32c").get<std::vector<uint32_t>>();
      if (f.at("name").get<std::string>() != RankFileName(int(m.ranks.size()))) return bad("files out of order");
      m.ranks.push_back(std::move(info));
    }
  } catch (const nlohmann::json::exception& e) {
    return bad(e.what());
  }
  if (m.step < 0 || m.world_size < 1 || int(m.ranks.size()) != m.world_size) return bad("world size and files disagree");
  return m;
}

std::string RankFileName(int rank) {
  char name[32];
  std::snprintf(name, sizeof name, "rank-%05d.bin", rank);
  return name;
}

Status WriteManifest(const std::string& folder, const CheckpointManifest& manifest) {
  const std::string path = folder + "/manifest.json";
  const std::string text = manifest.ToJson().dump(1) + "\n";
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return Errno("creating " + path);
  const ssize_t n = ::write(fd, text.data(), text.size());
  const bool ok = n == ssize_t(text.size()) && ::fsync(fd) == 0;
  const int saved = errno;
  ::close(fd);
  errno = saved;
  return ok ? Status::Ok() : Errno("writing " + path);
}

StatusOr<CheckpointManifest> ReadManifest(const std::string& folder) {
  const std::string path = folder + "/manifest.json";
  std::ifstream in(path);
  if (!in) return Status::NotFound(path + ": no manifest (an incomplete checkpoint?)");
  nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Status::InvalidArgument(path + ": not valid JSON (a truncated manifest?)");
  return CheckpointManifest::FromJson(j, path);
}

Status CommitCheckpoint(const std::string& dir, int64_t step, int keep) {
  const std::string folder = CheckpointFolder(dir, step);
  TC_RETURN_IF_ERROR(FsyncPath(folder + ".tmp"));
  std::error_code ec;
  fs::remove_all(folder, ec);  // a complete one of the same step (a rerun): replaced
  if (::rename((folder + ".tmp").c_str(), folder.c_str()) != 0) return Errno("renaming " + folder + ".tmp");
  TC_RETURN_IF_ERROR(FsyncPath(dir));
  const std::vector<int64_t> steps = CompleteCheckpoints(dir);
  for (size_t i = size_t(std::max(keep, 1)); i < steps.size(); ++i) fs::remove_all(CheckpointFolder(dir, steps[i]), ec);
  return Status::Ok();
}

Status CheckNotSymlink(const std::string& path, const std::string& key) {
  struct stat st;
  if (::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) {
    return Status::InvalidArgument(key + ": '" + path + "' is a symbolic link; expected a folder (a link could "
                                   "send checkpoints elsewhere)");
  }
  return Status::Ok();
}

}  // namespace tencache
