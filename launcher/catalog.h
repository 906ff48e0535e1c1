// Catalog: the instance types a job may run on and the GPUs they carry, loaded
// from configs/instances/*.yaml (one file per provider plus gpus.yaml).
//
// Every figure keeps its provenance: prices and local NVMe carry their source,
// and values the facts do not give (NVMe bandwidth, some networks) carry the
// assumption made, which the planner prints. Local NVMe is known, none or
// unknown, never "none" by omission. Each instance type's fabric (what its
// pods need for NCCL over EFA or InfiniBand) comes from a `fabrics:` list.
// Loading validates every entry and names the file and entry on error. Immutable after Load; thread-safe to read.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"

namespace tencache {

struct GpuSpec {
  std::string name;
  double bf16_tflops = 0;     // dense
  double fp32_tflops = 0;
  double memory_gib = 0;
  double memory_bw_gbps = 0;  // GB/s
  double p2p_gbps = 0;        // GPU-to-GPU inside a node, one direction, GB/s
  double h2d_gbps = 0;        // pinned host-to-device, GB/s
  std::string pcie;
  std::string source;
  // Where each figure comes from (`sources:` in gpus.yaml): keyed by a figure's
  // key (bf16_tflops, memory_bw_gbps, ...) or `spec` for every figure not named.
  std::map<std::string, std::string> sources;
  std::string source_of(const std::string& key) const;  // "" when none recorded
};

// Local NVMe (instance storage) of an instance type, in one of three states:
//   known   - `disks` > 0 of `disk_gb` each; the per-disk bandwidth is published
//             or assumed, and `note` says which;
//   none    - the provider lists no instance storage for this type (or none is
//             included in the type and its catalog price; `note` says which);
//   unknown - the catalog does not know. The planner then assumes no usable
//             local NVMe unless the job sets cluster.volume, and says so.
// `disks` > 0 always means known, whatever `state` says (a spec built in code
// may set only the disks); with no disks, `state` tells none from unknown.
struct NvmeSpec {
  enum class State { kUnknown, kNone, kKnown };
  State state = State::kUnknown;
  int disks = 0;
  double disk_gb = 0;              // GB (10^9 bytes) per disk
  double read_gbps_per_disk = 0;   // GB/s
  double write_gbps_per_disk = 0;  // GB/s
  std::string note;                // what was assumed, or why none / unknown
  std::string source;              // where the disk count and size came from
  bool known() const { return disks > 0; }
  bool none() const { return disks == 0 && state == State::kNone; }
  bool unknown() const { return disks == 0 && state != State::kNone; }
  uint64_t capacity_bytes() const { return known() ? static_cast<uint64_t>(disks * disk_gb * 1e9) : 0; }
};

// What an instance type's GPU nodes need so that NCCL crosses nodes over their
// fabric (EFA, InfiniBand) instead of TCP sockets: extended resources each
// worker pod requests (requests = limits), the environment NCCL and its
// network plugin read, and a note on what the nodes and the image need besides.
// Recorded in the catalog's `fabrics:` list; an instance type with no entry, or
// an entry with no resources and no env, has none (`note` then says why).
struct FabricSpec {
  std::string name;  // "aws-efa", "azure-infiniband"; "" when the catalog records none
  std::vector<std::pair<std::string, int>> resources;      // e.g. {"vpc.amazonaws.com/efa", 32}
  std::vector<std::pair<std::string, std::string>> env;   // e.g. {"FI_PROVIDER", "efa"}
  std::string note;    // what else it needs, or why there is none
  std::string source;  // where the resource names, counts and variables came from
  bool none() const { return resources.empty() && env.empty(); }
};

// How often the provider reclaims a spot node of this type: the share of
// nodes interrupted in a month (AWS Spot Advisor's "frequency of
// interruption" bucket, Azure's eviction rate), as the bucket's upper bound.
struct SpotInterruption {
  double monthly = 0;  // 0 < monthly < 1
  std::string bucket;  // as published, e.g. "5-10%"
  std::string source;  // where and when
};

struct InstanceSpec {
  std::string provider;
  std::string type;
  std::string gpu;               // key into the GPU table
  int gpu_count = 0;
  double gpu_memory_gib = 0;     // per GPU, as the provider lists it
  int vcpus = 0;
  double ram_gib = 0;
  NvmeSpec nvme;                 // known, none or unknown (a missing `nvme:` is unknown)
  double network_gbps = 0;       // Gbit/s per node
  std::string network_assumed;   // non-empty: the network figure is an assumption
  // Latency of one collective step between nodes (network_latency_us); unset:
  // kAssumedNetworkLatencyUs, stated as an assumption wherever it is used.
  std::optional<double> network_latency_us;
  double price_on_demand = 0;    // USD per hour per node
  std::optional<double> price_spot;
  std::string price_source;
  std::string spot_source;       // where price_spot comes from ("" : price_source)
  std::optional<SpotInterruption> spot_interruption;  // unknown when absent
  std::string price_recorded;    // date the price was copied into the catalog
  std::string file;              // catalog file it came from
  // Where each fact comes from (`sources:`): keyed by gpu, gpu_count,
  // gpu_memory_gib, vcpus, ram_gib or network_gbps, or `spec` for every fact not
  // named. NVMe and price keep their own `source`.
  std::map<std::string, std::string> sources;
  std::string source_of(const std::string& key) const;  // "" when none recorded
  FabricSpec fabric;             // from the catalog's fabrics: list; none when absent
};

// Between cloud nodes, one ring step of NCCL or Open MPI costs tens of
// microseconds (TCP sockets; less over EFA or InfiniBand): used where an
// instance has no network_latency_us.
constexpr double kAssumedNetworkLatencyUs = 25;

class Catalog {
 public:
  // Loads every *.yaml under `path` (a directory), or one file holding both
  // `gpus:` and `instances:`. Errors name the file and the entry.
  static StatusOr<Catalog> Load(const std::string& path);

  // The path Load was given (for messages about the catalog as a whole).
  const std::string& path() const { return path_; }

  const std::vector<InstanceSpec>& instances() const { return instances_; }
  const std::vector<GpuSpec>& gpus() const { return gpus_; }
  // NotFound with a "did you mean" when absent.
  StatusOr<const InstanceSpec*> FindInstance(const std::string& type) const;
  const GpuSpec* FindGpu(const std::string& name) const;

 private:
  Status LoadFile(const std::string& file);
  // Fabric entries name instance types that may come from a later file: they
  // are attached once every file is read.
  Status AttachFabrics();
  Status CheckReferences() const;

  std::string path_;
  std::vector<InstanceSpec> instances_;
  std::vector<GpuSpec> gpus_;
  struct PendingFabric {
    std::string file;
    int line = 0;
    std::vector<std::string> types;
    FabricSpec fabric;
  };
  std::vector<PendingFabric> fabrics_;  // read by LoadFile, attached by AttachFabrics
};

// The catalog shipped with the source tree (configs/instances).
std::string DefaultCatalogPath();

// The catalog a command uses: `flag` (--catalog), else the job's
// cluster.catalog, else the shipped one.
std::string CatalogPathFor(const std::string& flag, const std::string& job_catalog);

}  // namespace tencache
