// JobSpec: a job.yaml parsed once into typed, validated structs.
//
// Everything downstream (planner, worker, runners) reads these structs, never the
// YAML. Parsing applies `--set KEY=VALUE` overrides to the YAML tree before
// validation, so an override is checked exactly like the file. Every error is an
// InvalidArgument / NotFound naming the file (or "--set KEY"), the dotted key,
// the line, and the expected form; an unknown key suggests the closest known one.
// common/job_keys.h is the schema: every key's form, default, meaning (docs/job-yaml.md's
// tables are generated from it), and how it is read and written. Value type; thread-safe to read.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/model_shape.h"
#include "common/status.h"

namespace tencache {

enum class LrSchedule { kConstant, kCosine, kLinear };
const char* LrScheduleName(LrSchedule s);  // "constant", "cosine", "linear"
// train.optimizer_overlap: where each block's AdamW update runs (docs/worker.md,
// "The optimizer lane"). kAuto: on the optimizer lane where the compute leaves
// it a core (OptimizerLaneOn).
enum class OptimizerOverlap { kAuto, kOn, kOff };
const char* OptimizerOverlapName(OptimizerOverlap o);  // "auto", "on", "off"

constexpr int kCheckpointEveryAuto = -1;

struct TrainSpec {
  std::string data;               // text (byte-level tokens), .bin/.u16 (uint16) or .u32 (uint32 tokens)
  uint64_t tokens_per_epoch = 0;  // 0: derive from the data file
  int micro_batch = 1;            // sequences per rank per forward/backward; 0: auto (the planner picks)
  int global_batch = 1;           // sequences per optimizer step, all ranks together
  int steps = 1000;
  double lr = 3.0e-4;              // the peak learning rate
  LrSchedule lr_schedule = LrSchedule::kConstant;
  int warmup_steps = 0;            // linear warm-up to lr over this many steps
  double min_lr = 0.0;             // where cosine and linear end (at train.steps)
  double beta1 = 0.9, beta2 = 0.999, eps = 1.0e-8;  // AdamW
  double weight_decay = 0.0;       // AdamW's decoupled decay, not on norms and biases
  double grad_clip = 0.0;          // the global L2 norm gradients are clipped to; 0: no clipping
  // model.dtype fp16: dynamic loss scaling as torch's GradScaler does it.
  double initial_loss_scale = 65536.0;
  int loss_scale_window = 2000;    // steps without overflow before the scale doubles
  // Validation: every eval_every steps (0: never), the mean loss over up to
  // eval_sequences windows of eval_data, or of the last eval_split of
  // train.data's windows (held out from training) when eval_data is "".
  int eval_every = 0;
  std::string eval_data;
  double eval_split = 0.05;
  int eval_sequences = 64;
  uint64_t seed = 1;
  // Compute threads of each rank (torch's and OpenBLAS's); 0: the rank's share
  // of its machine's cores (worker/compute_device.h ComputeThreadsPerRank).
  int compute_threads = 0;
  OptimizerOverlap optimizer_overlap = OptimizerOverlap::kAuto;
  // Steps between checkpoints; 0: only at a stop (checkpoint_on_stop);
  // kCheckpointEveryAuto: the planner's choice (launcher/preemption.h), which
  // the resolved job carries as a number.
  int checkpoint_every = 0;
  bool checkpoint_on_stop = true; // a stop asked by a signal writes a checkpoint after its step
  std::string checkpoint_dir = "ckpt/";  // relative to the job file's folder
  int keep_checkpoints = 2;       // the newest complete checkpoints kept
};

// Storage to assume on instances with no local NVMe (e.g. an EBS or PD volume).
struct VolumeSpec {
  uint64_t size = 0;          // bytes per node; 0: none
  double read_gbps = 1.0;     // GB/s
  double write_gbps = 1.0;    // GB/s
};

enum class Target { kLocal, kK8s, kHosts };
const char* TargetName(Target t);  // "local", "k8s", "hosts"

// cluster.target hosts: the machines, each with its slots (ranks on it).
struct HostSlots {
  std::string host;  // a name or address mpirun's launch agent can reach
  int slots = 1;
};
struct HostsSpec {
  std::vector<HostSlots> list;        // from cluster.hosts or cluster.hostfile, in rank order
  std::string hostfile;               // the file they came from, if any (absolute)
  std::string rsh_agent = "ssh";      // how mpirun starts its daemons there (Open MPI plm_rsh_agent)
  std::string network_interface;      // the interface MPI's TCP traffic uses; "": Open MPI chooses
  std::string instance_type;          // cluster.instance_type: the catalog entry every host is; "": probed
};

// Where a Kubernetes worker keeps its NVMe tier: a claim on local PersistentVolumes
// through a StorageClass (the default), a generic ephemeral volume from any
// StorageClass, or a directory of the node.
enum class NvmeVolume { kLocalPv, kEphemeral, kHostPath };
const char* NvmeVolumeName(NvmeVolume v);

enum class GangScheduler { kNone, kKueue, kVolcano, kSchedulerPlugins };
const char* GangSchedulerName(GangScheduler g);  // "none", "kueue", "volcano", "scheduler-plugins"

struct KubernetesSpec {
  std::string image;                                // the worker image (k8s/Dockerfile); required to render
  std::string namespace_ = "tencache";
  NvmeVolume nvme_volume = NvmeVolume::kLocalPv;
  std::string nvme_storage_class = "tencache-local-nvme";  // local-pv and ephemeral ("" with ephemeral: the cluster's default)
  std::string nvme_host_path = "/mnt/nvme/tencache";      // host-path
  std::string checkpoint_claim;                     // a ReadWriteMany PVC for train.checkpoint_dir; "": an emptyDir
  std::string data_claim;                           // a PVC holding train.data, mounted read-only at its folder
  // Gang scheduling of the MPIJob: Kueue admits it whole from `queue` (a
  // LocalQueue); Volcano or scheduler-plugins place its pods as one PodGroup
  // (`queue`: Volcano's queue). kKueue is the default when `queue` is set.
  GangScheduler gang_scheduler = GangScheduler::kNone;
  std::string queue;
  std::string priority_class;                       // a PriorityClass for the pods and the PodGroup; "": none
  double checkpoint_write_gbps = 1.0;               // GB/s per node into the checkpoint volume (the grace period)
};
enum class Objective { kCost, kTime };

struct ClusterSpec {
  Target target = Target::kLocal;
  int nodes = 0;           // 0: auto (the planner tries 1..max_nodes)
  int ranks_per_node = 0;  // 0: auto (one per GPU; without a GPU, as many as the cores and batch allow)
  int max_nodes = 1;
  std::vector<std::string> instance_types;  // empty: the whole catalog
  Objective objective = Objective::kCost;
  bool use_spot = false;
  double max_price_per_hour = 0;  // USD for all nodes together; 0: no cap
  // Managed recovery (local and hosts targets): a failed run is started again
  // from its newest complete checkpoint up to max_restarts times, the k-th
  // restart after restart_backoff_s x 2^(k-1) seconds.
  int max_restarts = 0;
  double restart_backoff_s = 10;
  // Spot pricing (launcher/preemption.h): the share of nodes preempted in a
  // month, where the catalog gives none (0: the catalog's), and the seconds a
  // preempted job takes to run again beyond the backoff and the checkpoint read.
  double spot_interruption_rate = 0;
  double spot_restart_s = 300;
  VolumeSpec volume;
  std::string catalog;            // directory or file; "" : the built-in catalog
  KubernetesSpec k8s;             // cluster.target k8s
  HostsSpec hosts;                // cluster.target hosts
};

enum class CachePolicy { kTencache, kZeroInfinity, kTenCacheWindow, kLru, kNone };
const char* CachePolicyName(CachePolicy policy);

struct CacheSpec {
  CachePolicy policy = CachePolicy::kTencache;
  std::optional<uint64_t> device_budget;  // nullopt: auto
  std::optional<uint64_t> host_budget;
  std::optional<uint64_t> nvme_budget;
  std::string nvme_path = "/tmp/tencache-nvme";
  bool prefetch = true;  // false: the plan still steers eviction, fetches wait for use
};

struct JobSpec {
  std::string source;  // the file it came from
  std::string name;
  ModelShape model;
  DType dtype = DType::kBf16;
  // model.init: a Hugging Face safetensors checkpoint (a file, or a folder with
  // its index) the weights start from (absolute); "": drawn from train.seed.
  std::string init;
  TrainSpec train;
  ClusterSpec cluster;
  CacheSpec cache;
  // Where each key was set: "job.yaml:12:3" or "--set train.steps=20". Keys left
  // at their defaults are absent.
  std::map<std::string, std::string> locations;
  // Each byte size as written ("8GB" for cache.host_budget), so that output can
  // show the parsed value beside it (8GB = 7.45 GiB). Keys left unset are absent.
  std::map<std::string, std::string> size_texts;

  // "<where>: key '<key>'" for error messages about `key` found after parsing
  // (e.g. an instance type the catalog does not know).
  std::string Where(const std::string& key) const;
  // Ranks of the run: nodes x ranks_per_node. REQUIRES: both resolved (non-zero).
  int ranks() const { return cluster.nodes * cluster.ranks_per_node; }
};

// Equal when every field is. For JobSpec: every setting; `source`,
// `locations` and `size_texts` say where the settings came from and are not compared.
bool operator==(const TrainSpec& a, const TrainSpec& b);
bool operator==(const VolumeSpec& a, const VolumeSpec& b);
bool operator==(const HostSlots& a, const HostSlots& b);
bool operator==(const HostsSpec& a, const HostsSpec& b);
bool operator==(const KubernetesSpec& a, const KubernetesSpec& b);
bool operator==(const ClusterSpec& a, const ClusterSpec& b);
bool operator==(const CacheSpec& a, const CacheSpec& b);
bool operator==(const JobSpec& a, const JobSpec& b);
inline bool operator!=(const JobSpec& a, const JobSpec& b) { return !(a == b); }

// Where one rank computes: on a GPU, or on `compute_threads` threads of the
// CPU; `rank_cores` is its share of its machine's cores.
struct RankCompute {
  bool gpu = false;
  int compute_threads = 1;
  int rank_cores = 1;
};
// The cores a rank's compute leaves to the optimizer lane: its whole share on
// a GPU (the CPU only feeds it), else its share less its compute threads (>= 0).
int LaneCores(const RankCompute& r);
// Whether the rank's updates run on the optimizer lane, beside the training
// thread: on: always; off: never; auto: where LaneCores(r) > 0. On a CPU whose
// cores the compute threads take, the lane's AdamW only takes them from the
// compute (docs/benchmarks.md, the scale ladder's rung 3 with and without it).
bool OptimizerLaneOn(const TrainSpec& t, const RankCompute& r);

// The learning rate of optimizer step `step` (0-based) under t's schedule:
// lr x (step + 1) / warmup_steps during the warm-up, then constant, or from lr
// down to min_lr at step train.steps along a half cosine or a line (and
// min_lr after).
double LearningRateAt(const TrainSpec& t, int64_t step);

// Bytes per token of a train.data file: 2 for .bin and .u16 (uint16 token ids),
// 4 for .u32, else 1 (a text corpus, one token per byte).
int DataBytesPerToken(const std::string& path);

// The largest values a job may name (docs/job-yaml.md): far above any published
// model or cluster, they keep a hostile job's planning under a second.
inline constexpr int kMaxModelLayers = 1024;
inline constexpr int kMaxModelWidth = 262144;      // model.hidden; model.ffn_hidden up to 4x
inline constexpr int kMaxModelHeads = 4096;        // model.heads, model.kv_heads
inline constexpr int kMaxModelPositions = 1 << 22; // model.seq_len, model.max_positions
inline constexpr int kMaxModelVocab = 1 << 24;
inline constexpr int kMaxNodes = 4096;             // cluster.max_nodes, cluster.nodes
inline constexpr size_t kMaxJobName = 63;          // a DNS label

// Reads and validates `path`, applying overrides ("cache.device_budget=8MiB").
// A folder, more than 1 MiB (a pipe or device is read no further), more than
// one YAML document, a tab in a line's indentation (where the YAML does not
// parse) and a key with no value are each refused with InvalidArgument naming
// the file (and line); a missing file is NotFound.
StatusOr<JobSpec> LoadJobFile(const std::string& path, const std::vector<std::string>& overrides = {});
// Same, from text; `source` names it in errors.
StatusOr<JobSpec> ParseJobText(const std::string& text, const std::string& source,
                               const std::vector<std::string>& overrides = {});

// The folder under cache.nvme_path that holds one run's swap files (a
// rank-N/ folder per rank inside): "<nvme_path>/<job name>-<rank 0's PID>",
// the name reduced to letters, digits, '-', '_' and '.', at most 64 of them
// ("job" when unnamed). The worker makes it; tencache-launch removes what a
// killed run left there.
std::string SwapFolder(const JobSpec& job, int64_t rank0_pid);

// Every dotted key a job file may contain (for docs and suggestions).
std::vector<std::string> KnownJobKeys();

}  // namespace tencache
