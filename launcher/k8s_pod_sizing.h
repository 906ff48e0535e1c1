// K8sPodSizing: what a worker pod of a planned job asks of its node, and how
// long Kubernetes lets it stop.
//   - CPU and memory that fit the node's allocatable: the instance's capacity
//     less the kubelet's reserve (GKE's published kube-reserved formula, the
//     largest of the three clouds') and an allowance for a GPU node's
//     DaemonSets; the memory limit is that allocatable, the request what the
//     node's ranks need; no CPU limit (docs/kubernetes.md, "Pod sizing").
//   - terminationGracePeriodSeconds from the plan: the step in flight plus the
//     checkpoint SIGTERM makes the node's ranks write, at the checkpoint
//     volume's bandwidth, doubled, plus 30 s; and whether that outlasts the
//     provider's spot interruption notice.
// Pure functions of the plan and the catalog; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/job_spec.h"
#include "launcher/catalog.h"
#include "launcher/preemption.h"
#include "launcher/resource_model.h"

namespace tencache {

// Per GPU node, beside the kubelet's reserve: the NVIDIA and fabric device
// plugins, the CNI, kube-proxy, CSI and monitoring agents.
constexpr int64_t kDaemonSetMilliCpu = 1000;
constexpr uint64_t kDaemonSetMemory = 2ull << 30;
// A node's memory capacity (MemTotal) is below the instance's nominal RAM
// (firmware, kernel): taken as this fraction of it.
constexpr double kNodeMemoryCapacityFraction = 0.95;

struct NodeReserve {
  int64_t milli_cpu = 0;  // kube-reserved CPU
  uint64_t memory = 0;    // kube-reserved memory plus the 100 MiB hard-eviction threshold
};
// GKE's kube-reserved for a node of `vcpus` and `memory_bytes` capacity:
// CPU 6 % of the first core, 1 % of the second, 0.5 % of the next two, 0.25 %
// above four; memory 25 % of the first 4 GiB, 20 % of the next 4, 10 % of the
// next 8, 6 % of the next 112, 2 % above 128 GiB, plus 100 MiB for eviction.
NodeReserve KubeReserved(int vcpus, uint64_t memory_bytes);

struct WorkerResources {
  int64_t milli_cpu = 0;         // request (no limit)
  uint64_t memory_request = 0;   // the node's ranks' need, at most memory_limit
  uint64_t memory_limit = 0;     // what the node can give a pod: allocatable less the DaemonSets
  uint64_t memory_wanted = 0;    // ranks x (host budget + 2 GiB) + /dev/shm
  std::string comment;           // the arithmetic, for the rendered pod
  std::string warning;           // non-empty: the ranks need more than fits
};
// REQUIRES: ranks_per_node >= 1.
WorkerResources SizeWorker(const InstanceSpec& instance, int ranks_per_node, uint64_t host_budget, uint64_t shm_bytes);

struct GracePeriod {
  int64_t seconds = 30;
  uint64_t checkpoint_bytes_per_node = 0;  // fp32 masters and AdamW moments of the node's ranks
  double write_s = 0;                      // at the checkpoint volume's bandwidth
  std::string comment;                     // the arithmetic, for the rendered pod
  std::string warning;                     // non-empty: it outlasts the spot notice (cluster.use_spot)
};
// StopSeconds of the planned step and the node's checkpoint (TimeCheckpoint
// at cluster.checkpoint_write_gbps, the pods' checkpoint volume). REQUIRES:
// chosen.feasible; job resolved (ranks_per_node set).
GracePeriod TerminationGrace(const JobSpec& job, const Candidate& chosen);

// Kubernetes quantity of bytes in whole Gi (from 1 GiB) or Mi, rounded up or down.
std::string QuantityUp(uint64_t bytes);
std::string QuantityDown(uint64_t bytes);

}  // namespace tencache
