// LocalMachine: the machine tencache-launch runs on, as a plan candidate for
// `cluster.target: local`. Its facts are read from the OS (cores, the host
// memory the process may use (launcher/memory_limits.h), GPUs through the CUDA
// driver when one is present, free space at cache.nvme_path);
// its speeds are measured by two short probes: the NVMe tier's own O_DIRECT
// engine writing and reading a file at cache.nvme_path, and
// `tencache-worker --probe` running the job's model under mpirun with the run's
// rank count. Probe results are cached per machine (hostname, path, model,
// dtype, micro-batch, ranks) in a JSON file beside the run folders, so that a
// second run on the same machine starts at once, each with the conditions it
// ran under (load, cores, CPU, build): the launcher reuses one only while they
// hold (launcher/probe_conditions.h), and the notes say how old it is.
// Thread-compatible; used once per launch.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/job_spec.h"
#include "common/probe_result.h"
#include "launcher/catalog.h"
#include "launcher/memory_limits.h"
#include "launcher/probe_conditions.h"
#include "launcher/resource_model.h"

namespace tencache {

struct MachineFacts {
  std::string hostname;
  int cores = 1;
  // MemTotal, MemAvailable, cgroup and memlock limits; the host tier pins for a GPU when gpus > 0.
  MemoryLimits memory;
  int gpus = 0;                      // CUDA devices (0 where no driver answers)
  std::string gpu_name;
  uint64_t gpu_memory_bytes = 0;     // per GPU
  std::string nvme_path;
  uint64_t nvme_free_bytes = 0;      // at nvme_path (or its nearest existing parent)
  std::string links;                 // ReadLinks, where the launch needs it (cluster.target hosts)
  int64_t read_at = 0;               // Unix seconds: when these facts were read (the launch)
  double load1 = -1;                 // /proc/loadavg's 1-minute load average then; < 0 unreadable
  std::string cpu_model;             // /proc/cpuinfo's first "model name"
  std::string build;                 // WorkerBuild of the worker this launch runs (set by the launcher)
  // This machine now, as a probe taken now would record it.
  ProbeConditions Conditions() const { return {read_at, load1, cores, cpu_model, build}; }
  // As machine.json holds them: "ram_bytes" and "ram_available_bytes" are
  // MemTotal and MemAvailable, "memory" every limit (MemoryLimits::ToJson).
  nlohmann::ordered_json ToJson() const;
  // The facts ToJson wrote; InvalidArgument naming a missing field. A
  // machine.json without "memory" (written before the limits were read) gives
  // MemTotal and MemAvailable alone, from "ram_bytes" and "ram_available_bytes".
  static StatusOr<MachineFacts> FromJson(const nlohmann::json& j);
};

// Never fails: what cannot be read is left at its default and the rest stands.
MachineFacts ReadMachineFacts(const std::string& nvme_path);

// This machine's network links as a probe cache key: for `interface` (or every
// interface but loopback when empty) its name, MTU, speed and queueing
// discipline (`tc qdisc show`, where tc is installed; a tc tbf shaping shows
// here), handles and reference counts left out. Never fails: what cannot be
// read is left out. Links of other hosts are not seen (--reprobe measures again).
std::string ReadLinks(const std::string& interface);

struct DiskProbe {
  double read_gbps = 0, write_gbps = 0;  // GB/s through the NVMe tier (O_DIRECT where the file system allows)
  uint64_t bytes = 0;
  std::string engine;                    // the NVMe tier's Describe()
};
// Writes then reads `bytes` in a scratch file under `dir`, removed afterwards.
StatusOr<DiskProbe> ProbeDisk(const std::string& dir, uint64_t bytes);

// Everything measured about this machine for one job shape.
struct LocalProbes {
  DiskProbe disk;
  ProbeResult compute;
  bool cached = false;  // read from the cache file rather than measured now
  ProbeConditions conditions;  // this machine when the probes ran
  std::string reprobe_reason;  // measured now although cached: why (ReprobeReason, or --reprobe)
  // {"cached", "conditions", "reprobe_reason", "disk": {...}, "compute": {...}}, as the probe cache
  // and machine.json hold it.
  nlohmann::ordered_json ToJson() const;
  // InvalidArgument naming the missing field.
  static StatusOr<LocalProbes> FromJson(const nlohmann::json& j);
};

// The key under which probes are cached: the machine and what the job asks of it.
std::string ProbeCacheKey(const JobSpec& job, const MachineFacts& facts, int ranks);
// Reads `key` from the cache file; NotFound when absent or unreadable.
StatusOr<LocalProbes> ReadProbeCache(const std::string& cache_file, const std::string& key);
Status WriteProbeCache(const std::string& cache_file, const std::string& key, const LocalProbes& probes);

// Ranks for this machine: one per GPU; without one, the most ranks (at most the
// cores) that divide train.global_batch / micro_batch (a micro-batch of auto is
// taken as 1 here). cluster.ranks_per_node, when set, wins.
int LocalRanks(const JobSpec& job, const MachineFacts& facts);

// This machine as an instance type, its GPU (or the simulated device: its
// memory is the device budget, cache.device_budget or, with auto, every
// parameter shard of a rank where they take at most a tenth of the rank's
// share of host memory, else that tenth and at least four of the largest
// shards) and the model assumptions its probes replace. Its
// RAM is facts.memory.usable_bytes(), and a note says which limit bound it.
struct LocalCandidate {
  int nodes = 1;         // cluster.target hosts: the hosts, each one `instance`
  InstanceSpec instance;
  GpuSpec gpu;
  ModelAssumptions assumptions;
  std::vector<std::string> notes;  // what was measured and what assumed, for the plan and the report
};
// `ranks` over `nodes` machines like this one (cluster.target hosts; 1:
// local): the probe ran over all of them, so its collectives are the real
// links' (over the network between hosts).
LocalCandidate MakeLocalCandidate(const JobSpec& job, const MachineFacts& facts, const LocalProbes& probes,
                                  int ranks, int nodes = 1);

// cluster.target hosts with cluster.instance_type: every host is that catalog
// entry and the catalog describes it (nothing is probed; its price gives the
// cost per epoch). InvalidArgument naming cluster.instance_type when the
// catalog lacks it, or cluster.hosts when a host's slots are not the entry's
// GPU count (one rank per GPU).
StatusOr<LocalCandidate> MakeCatalogHostsCandidate(const JobSpec& job, const Catalog& catalog);

}  // namespace tencache
