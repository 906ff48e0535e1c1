// The trainer's checkpoints (worker/checkpoint.h): every rank writes its shards
// straight from the cache's host slots and reads them back straight into them
// (a shard on NVMe is brought to the host once, by the cache); the ranks agree
// on success before anything is committed or trained. A checkpoint of another
// world size is resharded as it is read (LoadResharded).
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "cachemgr/crc32c.h"
#include "worker/checkpoint.h"
#include "worker/trainer.h"

namespace tencache {
namespace {

namespace fs = std::filesystem;

// Every rank learns whether all succeeded; the first failing rank's message
// where it is this rank's own, else which rank failed.
Status Agree(Communicator* comm, const Status& mine, const std::string& what) {
  std::vector<double> failed(size_t(comm->size()), 0.0);
  failed[size_t(comm->rank())] = mine.ok() ? 0.0 : 1.0;
  Status s = comm->AllReduceSum(failed.data(), failed.size());
  if (!s.ok()) return s;
  if (!mine.ok()) return mine;
  for (int r = 0; r < comm->size(); ++r) {
    if (failed[size_t(r)] > 0) return Status::Unavailable(what + ": rank " + std::to_string(r) + " failed (see its log)");
  }
  return Status::Ok();
}

Status WriteAll(int fd, const void* data, size_t bytes, uint64_t offset, const std::string& path) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::pwrite(fd, p, bytes, off_t(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      return Status::IoError("writing " + path + " at offset " + std::to_string(offset) + ": " +
                             (n < 0 ? std::strerror(errno) : "no progress"));
    }
    p += n, bytes -= size_t(n), offset += uint64_t(n);
  }
  return Status::Ok();
}

Status ReadAll(int fd, void* data, size_t bytes, uint64_t offset, const std::string& path) {
  char* p = static_cast<char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::pread(fd, p, bytes, off_t(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      return Status::IoError("reading " + path + " at offset " + std::to_string(offset) + ": " +
                             (n < 0 ? std::strerror(errno) : "the file ends early (truncated)"));
    }
    p += n, bytes -= size_t(n), offset += uint64_t(n);
  }
  return Status::Ok();
}

// Bytes of one rank's checkpoint file under `layout`: every block's `kinds`, back to back.
uint64_t RankFileBytes(const ShardLayout& layout, const std::vector<ShardKind>& kinds) {
  uint64_t bytes = 0;
  for (int b = 0; b < int(layout.num_blocks()); ++b) {
    for (ShardKind kind : kinds) bytes += layout.Bytes(b, kind);
  }
  return bytes;
}

// The rank file at `path` holds `expected` bytes (this job's shards over
// `ranks` ranks), as the manifest says (`listed`).
Status CheckRankFileSize(const std::string& path, uint64_t listed, uint64_t expected, int ranks) {
  std::error_code ec;
  const uint64_t size = fs::file_size(path, ec);
  if (ec) return Status::NotFound(path + ": " + ec.message());
  if (size == expected && listed == expected) return Status::Ok();
  return Status::InvalidArgument(path + ": holds " + std::to_string(size) + " bytes (the manifest says " +
                                 std::to_string(listed) + "); this job's shards over " + std::to_string(ranks) +
                                 " rank(s) are " + std::to_string(expected) + " bytes: truncated, or another model");
}

Status ChecksumMismatch(const std::string& path, uint64_t offset, int block, ShardKind kind, uint64_t bytes) {
  return Status::Corruption(path + ": checksum mismatch at offset " + std::to_string(offset) + " (block " +
                            std::to_string(block) + ", " + ShardKindName(kind) + ", " + std::to_string(bytes) +
                            " bytes): the checkpoint is damaged; remove its folder to resume from an older one");
}

}  // namespace

std::vector<ShardKind> Trainer::CheckpointKinds() const {
  return {layout_.MasterKind(), ShardKind::kAdamM, ShardKind::kAdamV};
}

Status Trainer::WriteRankFile(const std::string& path, RankFileInfo* info) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return Status::IoError("creating " + path + ": " + std::strerror(errno));
  Status s;
  uint64_t offset = 0;
  for (int b = 0; b < model_.num_blocks() && s.ok(); ++b) {
    for (ShardKind kind : CheckpointKinds()) {  // a shard's pieces one after the other: one checksum
      uint32_t crc = 0;
      for (int i = 0; i < layout_.Pieces(b, kind) && s.ok(); ++i) {
        StatusOr<ShardRef> p = store_->Acquire(b, kind, i, Tier::kHost, AccessMode::kRead);
        if (!p.ok()) {
          s = p.status();
          break;
        }
        const size_t bytes = p->count() * layout_.ElementBytes(kind);
        s = WriteAll(fd, p->data(), bytes, offset, path);
        crc = Crc32c(crc, p->data(), bytes);
        offset += bytes;
      }
      if (!s.ok()) break;
      info->shard_crc.push_back(crc);
    }
  }
  if (s.ok() && ::fsync(fd) != 0) s = Status::IoError("fsync " + path + ": " + std::strerror(errno));
  ::close(fd);
  info->bytes = offset;
  return s;
}

Status Trainer::SaveCheckpoint() {
  const Status usable = failed_.ok() ? Status::Ok()
                                     : Status::FailedPrecondition("no checkpoint after a failed step (its shards "
                                                                  "may be half updated): " + failed_.message());
  TC_RETURN_IF_ERROR(Agree(comm_, usable, "checkpoint at step " + std::to_string(step_)));
  const std::string& dir = job_.train.checkpoint_dir;
  const std::string key = job_.Where("train.checkpoint_dir");
  const std::string folder = CheckpointFolder(dir, step_), tmp = folder + ".tmp";
  Status made;
  if (comm_->rank() == 0) {
    made = CheckNotSymlink(dir, key);
    std::error_code ec;
    if (made.ok()) fs::create_directories(dir, ec);
    if (made.ok() && !ec) fs::remove_all(tmp, ec);  // a failed attempt's leftovers
    if (made.ok() && !ec) fs::create_directory(tmp, ec);
    if (made.ok() && !ec) fs::permissions(tmp, fs::perms::owner_all, ec);
    if (made.ok() && ec) made = Status::IoError(key + ": creating '" + tmp + "': " + ec.message());
  }
  TC_RETURN_IF_ERROR(Agree(comm_, made, "checkpoint " + folder));
  RankFileInfo mine;
  Status wrote = split_->Flush();
  if (wrote.ok()) wrote = WriteRankFile(tmp + "/" + RankFileName(comm_->rank()), &mine);
  store_->EndStep();  // not a training step
  // Sizes and checksums to rank 0: the same number of shards on every rank.
  const size_t shards = size_t(model_.num_blocks()) * CheckpointKinds().size();
  std::vector<double> row(shards + 1, 0.0), all(row.size() * size_t(ranks_));
  row[0] = double(mine.bytes);
  for (size_t i = 0; i < mine.shard_crc.size() && i < shards; ++i) row[i + 1] = double(mine.shard_crc[i]);
  Status agreed = Agree(comm_, wrote, "checkpoint " + folder);
  if (agreed.ok()) agreed = comm_->AllGather(row.data(), all.data(), row.size() * sizeof(double));
  Status committed;
  if (comm_->rank() == 0) {
    if (agreed.ok()) {
      CheckpointManifest m;
      m.step = step_;
      m.world_size = ranks_;
      m.identity = CheckpointIdentity(job_);
      m.optimizer_steps = optimizer_steps_;
      m.loss_scale = deferred_->loss_scale();
      m.good_steps = deferred_->good_steps();
      m.skipped_steps = deferred_->skipped_steps();
      for (int r = 0; r < ranks_; ++r) {
        const double* f = &all[size_t(r) * row.size()];
        RankFileInfo info;
        info.bytes = uint64_t(f[0]);
        for (size_t i = 0; i < shards; ++i) info.shard_crc.push_back(uint32_t(f[i + 1]));
        m.ranks.push_back(std::move(info));
      }
      committed = WriteManifest(tmp, m);
      if (committed.ok()) committed = CommitCheckpoint(dir, step_, job_.train.keep_checkpoints);
    }
    if (!agreed.ok() || !committed.ok()) {
      std::error_code ec;
      fs::remove_all(tmp, ec);  // the previous checkpoint stays the newest complete one
    }
  }
  TC_RETURN_IF_ERROR(agreed);
  return Agree(comm_, committed, "checkpoint " + folder);
}

Status Trainer::LoadRankFile(const std::string& path, const RankFileInfo& info) {
  TC_RETURN_IF_ERROR(CheckRankFileSize(path, info.bytes, RankFileBytes(layout_, CheckpointKinds()), ranks_));
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::IoError("opening " + path + ": " + std::strerror(errno));
  Status s;
  uint64_t offset = 0;
  size_t i = 0;
  for (int b = 0; b < model_.num_blocks() && s.ok(); ++b) {
    for (ShardKind kind : CheckpointKinds()) {
      const size_t bytes = layout_.Bytes(b, kind);
      // Mixed precision: the 16-bit parameter, rounded from the master again as its pieces arrive.
      const bool rounds = layout_.mixed && kind == layout_.MasterKind();
      StatusOr<ShardRef> param = rounds ? store_->Acquire(b, ShardKind::kParam, 0, Tier::kHost, AccessMode::kOverwrite)
                                        : StatusOr<ShardRef>(ShardRef());
      if (!param.ok()) {
        s = param.status();
        break;
      }
      uint32_t crc = 0;
      uint64_t at = offset;
      for (int j = 0; j < layout_.Pieces(b, kind) && s.ok(); ++j) {
        StatusOr<ShardRef> p = store_->Acquire(b, kind, j, Tier::kHost, AccessMode::kOverwrite);
        if (!p.ok()) {
          s = p.status();
          break;
        }
        const size_t piece = p->count() * layout_.ElementBytes(kind);
        s = ReadAll(fd, p->data(), piece, at, path);
        crc = Crc32c(crc, p->data(), piece);
        at += piece;
        if (s.ok() && rounds) WriteComputeCopy(*param, layout_.PieceBegin(b, kind, j), p->count(), p->f32(), &lanes_);
      }
      if (s.ok() && (i >= info.shard_crc.size() || crc != info.shard_crc[i])) {
        s = ChecksumMismatch(path, offset, b, kind, bytes);
      }
      if (!s.ok()) break;
      offset += bytes;
      ++i;
    }
  }
  ::close(fd);
  return s;
}

Status Trainer::LoadResharded(const std::string& folder, const CheckpointManifest& m) {
  const int old_ranks = m.world_size;
  if (old_ranks < 1 || int(m.ranks.size()) != old_ranks) {
    return Status::InvalidArgument(folder + "/manifest.json: world_size " + std::to_string(old_ranks) + " but " +
                                   std::to_string(m.ranks.size()) + " rank file(s) listed");
  }
  std::vector<uint64_t> numel;
  for (int b = 0; b < model_.num_blocks(); ++b) numel.push_back(uint64_t(model_.layout(b).numel));
  const ShardLayout old = MakeShardLayout(numel, job_.model.layers, job_.dtype, old_ranks);
  const std::vector<ShardKind> kinds = CheckpointKinds();
  // Where each (block, kind) record begins in an old rank's file: the same in every one.
  std::vector<uint64_t> record_at;
  uint64_t at = 0;
  for (int b = 0; b < model_.num_blocks(); ++b) {
    for (ShardKind kind : kinds) {
      if (old.ElementBytes(kind) != sizeof(float)) return Status::Internal("a checkpoint state that is not fp32");
      record_at.push_back(at);
      at += old.Bytes(b, kind);
    }
  }
  std::vector<std::string> paths;
  std::vector<int> fds;
  Status s;
  for (int r = 0; r < old_ranks && s.ok(); ++r) {
    paths.push_back(folder + "/" + RankFileName(r));
    s = CheckRankFileSize(paths.back(), m.ranks[size_t(r)].bytes, at, old_ranks);
    if (s.ok()) {
      fds.push_back(::open(paths.back().c_str(), O_RDONLY | O_CLOEXEC));
      if (fds.back() < 0) s = Status::IoError("opening " + paths.back() + ": " + std::strerror(errno));
    }
  }
  std::vector<float> shard, mine;
  size_t record = 0;
  for (int b = 0; b < model_.num_blocks() && s.ok(); ++b) {
    const size_t had = old.counts[size_t(b)], has = layout_.counts[size_t(b)];
    const size_t lo = size_t(comm_->rank()) * has, hi = std::min(lo + has, size_t(numel[size_t(b)]));
    for (size_t k = 0; k < kinds.size() && s.ok(); ++k, ++record) {
      const ShardKind kind = kinds[k];
      mine.assign(has, 0.0f);  // the padding past the block's elements stays zero
      for (size_t r = lo / had; lo < hi && r < size_t(old_ranks) && r * had < hi && s.ok(); ++r) {
        shard.resize(had);
        s = ReadAll(fds[r], shard.data(), had * sizeof(float), record_at[record], paths[r]);
        if (s.ok() && Crc32c(0, shard.data(), had * sizeof(float)) != m.ranks[r].shard_crc[record]) {
          s = ChecksumMismatch(paths[r], record_at[record], b, kind, had * sizeof(float));
        }
        const size_t from = std::max(lo, r * had), to = std::min(hi, (r + 1) * had);
        if (s.ok()) std::memcpy(mine.data() + (from - lo), shard.data() + (from - r * had), (to - from) * sizeof(float));
      }
      if (!s.ok()) break;
      // Into this rank's pieces; mixed precision: the 16-bit parameter rounded from the master as it goes.
      const bool rounds = layout_.mixed && kind == layout_.MasterKind();
      StatusOr<ShardRef> param = rounds ? store_->Acquire(b, ShardKind::kParam, 0, Tier::kHost, AccessMode::kOverwrite)
                                        : StatusOr<ShardRef>(ShardRef());
      s = param.status();
      for (int j = 0; j < layout_.Pieces(b, kind) && s.ok(); ++j) {
        StatusOr<ShardRef> p = store_->Acquire(b, kind, j, Tier::kHost, AccessMode::kOverwrite);
        s = p.status();
        if (!s.ok()) break;
        const size_t begin = layout_.PieceBegin(b, kind, j);
        std::memcpy(p->data(), mine.data() + begin, p->count() * sizeof(float));
        if (rounds) WriteComputeCopy(*param, begin, p->count(), p->f32(), &lanes_);
      }
    }
  }
  for (int fd : fds) ::close(fd);
  return s;
}

Status Trainer::Resume() {
  const std::string& dir = job_.train.checkpoint_dir;
  const std::string key = job_.Where("train.checkpoint_dir");
  if (step_ != 0) return Status::FailedPrecondition("resume: the trainer has already run steps");
  Status found = CheckNotSymlink(dir, key);
  const std::vector<int64_t> steps = CompleteCheckpoints(dir);
  if (found.ok() && steps.empty()) {
    found = Status::NotFound(key + ": no complete checkpoint in '" + dir + "' to resume from (set "
                             "train.checkpoint_every to write them)");
  }
  TC_RETURN_IF_ERROR(Agree(comm_, found, "resume"));
  double seen[2] = {double(steps.front()), double(steps.front()) * double(steps.front())};
  TC_RETURN_IF_ERROR(comm_->AllReduceSum(seen, 2));
  if (seen[0] * seen[0] != seen[1] * double(ranks_)) {  // every rank's step the same
    return Status::FailedPrecondition(key + ": the ranks see different newest checkpoints in '" + dir +
                                      "'; it must be one folder that every rank sees (a shared volume)");
  }
  const std::string folder = CheckpointFolder(dir, steps.front());
  StatusOr<CheckpointManifest> m = ReadManifest(folder);
  Status loaded = m.status();
  if (loaded.ok() && m->identity != CheckpointIdentity(job_)) {
    loaded = Status::InvalidArgument(folder + ": written by another job (" + m->identity + "); this job is " +
                                     CheckpointIdentity(job_));
  }
  if (loaded.ok()) {
    loaded = m->world_size == ranks_
                 ? LoadRankFile(folder + "/" + RankFileName(comm_->rank()), m->ranks[size_t(comm_->rank())])
                 : LoadResharded(folder, *m);
  }
  store_->EndStep();  // not a training step
  TC_RETURN_IF_ERROR(Agree(comm_, loaded, "resume from " + folder));
  step_ = m->step;
  optimizer_steps_ = m->optimizer_steps;
  deferred_->Restore(m->loss_scale, m->good_steps, m->skipped_steps);
  log_("resumed from " + folder + ": the next step is " + std::to_string(step_) +
       (m->world_size == ranks_ ? std::string()
                                : " (written by " + std::to_string(m->world_size) + " rank(s), resharded onto " +
                                      std::to_string(ranks_) + ")"));
  return Status::Ok();
}

}  // namespace tencache
