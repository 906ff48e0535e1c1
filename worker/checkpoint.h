// Checkpoints of a training run: every rank's shards (fp32 masters and both
// AdamW moments; a bf16/fp16 parameter is rounded again from its master), plus
// what else the next step depends on (the step, AdamW's step count, the fp16
// loss scaler; the data order and initialisation are pure functions of the seed
// and step).
//
// On disk, in train.checkpoint_dir:
//   step-00000012/manifest.json   format, version, step, world size, the job's
//                                 identity, the trainer's counters, and per rank
//                                 file its size and each shard's CRC32C
//   step-00000012/rank-00000.bin  rank 0's shards back to back, block by block
//                                 (master, moment 1, moment 2), 0600
// A checkpoint is written as step-N.tmp/ and renamed to step-N/ only after
// every rank's file is fsynced and the manifest is written and fsynced: a
// folder without ".tmp" is complete. Older complete checkpoints beyond
// train.keep_checkpoints are removed after the rename. The folder must be one
// that every rank sees (one machine, or a shared volume).
// Functions here are pure file work; Trainer::SaveCheckpoint / Resume
// (worker/trainer_checkpoint.cc) do the collectives.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/checkpoint_dir.h"
#include "common/job_spec.h"
#include "common/status.h"

namespace tencache {

// What must match for a checkpoint to continue a job: the model's shape and
// dtype, the seed, the global batch and the data. A canonical text, and its hash.
std::string CheckpointIdentity(const JobSpec& job);

struct RankFileInfo {
  uint64_t bytes = 0;
  std::vector<uint32_t> shard_crc;  // CRC32C of each shard, in file order
};

struct CheckpointManifest {
  int64_t step = 0;             // steps done: the next step to run
  int world_size = 0;
  std::string identity;         // CheckpointIdentity of the job that wrote it
  int64_t optimizer_steps = 0;  // AdamW updates applied (skipped fp16 steps excluded)
  double loss_scale = 1.0;
  int good_steps = 0;
  int64_t skipped_steps = 0;
  std::vector<RankFileInfo> ranks;
  nlohmann::ordered_json ToJson() const;
  // InvalidArgument naming `path` and the field when it is not a manifest.
  static StatusOr<CheckpointManifest> FromJson(const nlohmann::json& j, const std::string& path);
};

// A rank's file name in a checkpoint folder (CheckpointFolder: common/checkpoint_dir.h).
std::string RankFileName(int rank);

// Writes `manifest` to folder/manifest.json (0600, fsynced).
Status WriteManifest(const std::string& folder, const CheckpointManifest& manifest);
StatusOr<CheckpointManifest> ReadManifest(const std::string& folder);

// Renames folder.tmp to folder and fsyncs `dir`; then removes all but the
// newest `keep` complete checkpoints.
Status CommitCheckpoint(const std::string& dir, int64_t step, int keep);

// Refuses a path that is a symlink (checkpoint folders are created by us).
Status CheckNotSymlink(const std::string& path, const std::string& key);

}  // namespace tencache
