#include "launcher/k8s_pod_sizing.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "common/byte_size.h"

namespace tencache {
namespace {

constexpr uint64_t kPerRankProcess = 2ull << 30;   // the framework, CUDA and MPI beside the host budget
constexpr uint64_t kEvictionThreshold = 100ull << 20;

// Sum of `fraction` x the part of `value` in each band (upper bounds ascending).
double Banded(double value, const std::vector<std::pair<double, double>>& bands) {
  double reserve = 0, lower = 0;
  for (const auto& [upper, fraction] : bands) {
    if (value <= lower) break;
    reserve += (std::min(value, upper) - lower) * fraction;
    lower = upper;
  }
  return reserve;
}

std::string Gib(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f GiB", double(bytes) / double(kGiB));
  return buf;
}

}  // namespace

std::string QuantityUp(uint64_t bytes) {
  if (bytes >= kGiB) return std::to_string((bytes + kGiB - 1) / kGiB) + "Gi";
  return std::to_string(std::max<uint64_t>(1, (bytes + kMiB - 1) / kMiB)) + "Mi";
}

std::string QuantityDown(uint64_t bytes) {
  if (bytes >= kGiB) return std::to_string(bytes / kGiB) + "Gi";
  return std::to_string(std::max<uint64_t>(1, bytes / kMiB)) + "Mi";
}

NodeReserve KubeReserved(int vcpus, uint64_t memory_bytes) {
  constexpr double kInf = 1e30;
  NodeReserve r;
  r.milli_cpu = int64_t(std::ceil(Banded(vcpus * 1000.0, {{1000, 0.06}, {2000, 0.01}, {4000, 0.005}, {kInf, 0.0025}})));
  const double gib = double(kGiB);
  r.memory = uint64_t(Banded(double(memory_bytes), {{4 * gib, 0.25}, {8 * gib, 0.20}, {16 * gib, 0.10},
                                                    {128 * gib, 0.06}, {kInf, 0.02}})) +
             kEvictionThreshold;
  return r;
}

WorkerResources SizeWorker(const InstanceSpec& inst, int ranks_per_node, uint64_t host_budget, uint64_t shm_bytes) {
  WorkerResources w;
  const uint64_t capacity = uint64_t(inst.ram_gib * kNodeMemoryCapacityFraction * double(kGiB));
  const NodeReserve reserve = KubeReserved(inst.vcpus, capacity);
  const int64_t cpu = int64_t(inst.vcpus) * 1000 - reserve.milli_cpu - kDaemonSetMilliCpu;
  w.milli_cpu = std::max<int64_t>(100, cpu / 100 * 100);  // whole tenths of a core, rounded down
  const uint64_t taken = reserve.memory + kDaemonSetMemory;
  w.memory_limit = capacity > taken + kGiB ? (capacity - taken) / kGiB * kGiB : kGiB;
  w.memory_wanted = uint64_t(ranks_per_node) * (host_budget + kPerRankProcess) + shm_bytes;
  w.memory_request = std::min(w.memory_wanted, w.memory_limit);
  w.comment = "resources: " + inst.type + " has " + std::to_string(inst.vcpus) + " vCPUs and " +
              Gib(uint64_t(inst.ram_gib * double(kGiB))) + " (capacity taken as " +
              std::to_string(int(kNodeMemoryCapacityFraction * 100)) + " %: " + Gib(capacity) +
              "); kube-reserved by GKE's formula " + std::to_string(reserve.milli_cpu) + "m CPU, " +
              Gib(reserve.memory) + " with eviction; DaemonSets " + std::to_string(kDaemonSetMilliCpu) + "m, " +
              Gib(kDaemonSetMemory) + ". CPU request = the rest (no limit: CFS quota would throttle the cache's "
              "copy and I/O threads); memory limit = the rest, request = " + std::to_string(ranks_per_node) +
              " ranks x (host budget " + Gib(host_budget) + " + 2 GiB) + /dev/shm " + Gib(shm_bytes) + " = " +
              Gib(w.memory_wanted);
  if (w.memory_wanted > w.memory_limit) {
    w.warning = "the " + std::to_string(ranks_per_node) + " ranks of a " + inst.type + " node need " +
                Gib(w.memory_wanted) + " of memory (host budgets, 2 GiB per process, /dev/shm) but a pod can have " +
                Gib(w.memory_limit) + " beside kube-reserved and DaemonSets: lower cache.host_budget";
    w.comment += " (capped: " + w.warning + ")";
  }
  return w;
}

GracePeriod TerminationGrace(const JobSpec& job, const Candidate& chosen) {
  GracePeriod g;
  const int per_node = job.cluster.ranks_per_node;
  const double step_s = chosen.step.step_s;
  char buf[512];
  if (job.train.checkpoint_on_stop) {
    const uint64_t per_rank = chosen.states.checkpoint(job.dtype);
    JobSpec pods = job;  // rendered pods write to the checkpoint volume, whatever the job's target
    pods.cluster.target = Target::kK8s;
    const CheckpointTiming ck = TimeCheckpoint(pods, *chosen.instance, per_node, per_rank);
    const double gbps = ck.write_gbps;
    g.checkpoint_bytes_per_node = ck.bytes_per_node;
    g.write_s = ck.write_s;
    g.seconds = StopSeconds(step_s, g.write_s);
    std::snprintf(buf, sizeof(buf),
                  "terminationGracePeriodSeconds: SIGTERM lets the step in flight finish (%.1f s planned) and "
                  "writes a checkpoint: %d ranks x %s (fp32 masters, AdamW moments) = %s per node at %.2f GB/s "
                  "(cluster.checkpoint_write_gbps) = %.1f s; %.0fx (step + write) + %llds = %llds",
                  step_s, per_node, Gib(per_rank).c_str(), Gib(g.checkpoint_bytes_per_node).c_str(), gbps,
                  g.write_s, kStopMarginFactor, (long long)kStopFixedS, (long long)g.seconds);
  } else {
    g.seconds = StopSeconds(step_s, 0);
    std::snprintf(buf, sizeof(buf),
                  "terminationGracePeriodSeconds: train.checkpoint_on_stop is false, so SIGTERM writes no checkpoint; "
                  "the step in flight (%.1f s planned) x %.0f + %llds = %llds",
                  step_s, kStopMarginFactor, (long long)kStopFixedS, (long long)g.seconds);
  }
  g.comment = buf;
  std::string source;
  const int notice = SpotNoticeSeconds(chosen.instance->provider, &source);
  if (job.cluster.use_spot && notice > 0 && g.seconds > notice) {
    g.warning = "terminationGracePeriodSeconds " + std::to_string(g.seconds) + " s exceeds the " +
                chosen.instance->provider + " spot interruption notice (" + std::to_string(notice) + " s, " + source +
                "): a reclaimed node stops before its checkpoint is written; checkpoint more often "
                "(train.checkpoint_every) or run on on-demand nodes";
  }
  return g;
}

}  // namespace tencache
