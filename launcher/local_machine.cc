#include "launcher/local_machine.h"

#include <dlfcn.h>
#include <signal.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <thread>

#include "cachemgr/nvme_tier.h"
#include "cachemgr/size_class_pool.h"
#include "common/byte_size.h"
#include "common/clock.h"
#include "launcher/local_runner.h"

namespace tencache {
namespace {

namespace fs = std::filesystem;

// The CUDA driver, where one is installed: device count, first name, memory.
void ReadGpus(MachineFacts* f) {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) return;
  using InitFn = int (*)(unsigned);
  using CountFn = int (*)(int*);
  using GetFn = int (*)(int*, int);
  using NameFn = int (*)(char*, int, int);
  using MemFn = int (*)(size_t*, int);
  auto init = reinterpret_cast<InitFn>(dlsym(lib, "cuInit"));
  auto count = reinterpret_cast<CountFn>(dlsym(lib, "cuDeviceGetCount"));
  auto get = reinterpret_cast<GetFn>(dlsym(lib, "cuDeviceGet"));
  auto name = reinterpret_cast<NameFn>(dlsym(lib, "cuDeviceGetName"));
  auto mem = reinterpret_cast<MemFn>(dlsym(lib, "cuDeviceTotalMem_v2"));
  int n = 0, dev = 0;
  if (init && count && get && name && mem && init(0) == 0 && count(&n) == 0 && n > 0 && get(&dev, 0) == 0) {
    char buf[256] = {0};
    size_t bytes = 0;
    if (name(buf, sizeof buf - 1, dev) == 0) f->gpu_name = buf;
    if (mem(&bytes, dev) == 0) f->gpu_memory_bytes = bytes;
    f->gpus = n;
  }
  dlclose(lib);
}

uint64_t FreeBytesAt(const std::string& path) {
  fs::path p = fs::absolute(path);
  std::error_code ec;
  while (!p.empty() && !fs::exists(p, ec)) p = p.parent_path();
  struct statvfs st;
  if (p.empty() || statvfs(p.c_str(), &st) != 0) return 0;
  return uint64_t(st.f_bavail) * st.f_frsize;
}

// The simulated device's auto budget: every parameter shard of a rank (what
// the worker's device tier holds, in its slots) where they take at most a
// tenth of the rank's share of host memory; otherwise a tenth, and at least
// four of the largest parameter shards (the block that computes, the next one
// arriving, room for the plan to keep two): a device smaller than the model,
// as a GPU would be, whose bytes the host tier does not lose.
uint64_t SimulatedDeviceBytes(const JobSpec& job, const MachineFacts& facts, int ranks) {
  const uint64_t w = DTypeBytes(job.dtype == DType::kBf16 ? DType::kBf16 : DType::kFp32);
  uint64_t all = 0, largest = 0;
  for (uint64_t n : job.model.BlockParamCounts()) {
    const uint64_t slot = SlotBytesFor((n + ranks - 1) / ranks * w);
    all += slot;
    largest = std::max(largest, slot);
  }
  const uint64_t share = facts.memory.usable_bytes() / uint64_t(std::max(1, ranks));
  return std::min(all, std::max(share / 10, 4 * largest));
}

std::string Num(double v, const char* fmt) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

}  // namespace

nlohmann::ordered_json MachineFacts::ToJson() const {
  return {{"hostname", hostname},
          {"cores", cores},
          {"ram_bytes", memory.mem_total.bytes.value_or(0)},
          {"ram_available_bytes", memory.mem_available.bytes.value_or(0)},
          {"memory", memory.ToJson()},
          {"gpus", gpus},
          {"gpu_name", gpu_name},
          {"gpu_memory_bytes", gpu_memory_bytes},
          {"nvme_path", nvme_path},
          {"nvme_free_bytes", nvme_free_bytes},
          {"links", links},
          {"read_at", read_at},
          {"load1", load1},
          {"cpu_model", cpu_model},
          {"build", build}};
}

StatusOr<MachineFacts> MachineFacts::FromJson(const nlohmann::json& j) {
  MachineFacts f;
  try {
    f.hostname = j.at("hostname").get<std::string>();
    f.cores = j.at("cores").get<int>();
    f.gpus = j.at("gpus").get<int>();
    f.gpu_name = j.value("gpu_name", "");
    f.gpu_memory_bytes = j.value("gpu_memory_bytes", uint64_t(0));
    f.nvme_path = j.at("nvme_path").get<std::string>();
    f.nvme_free_bytes = j.at("nvme_free_bytes").get<uint64_t>();
    f.links = j.value("links", "");
    f.read_at = j.value("read_at", int64_t(0));
    f.load1 = j.value("load1", -1.0);
    f.cpu_model = j.value("cpu_model", "");
    f.build = j.value("build", "");
    if (!j.contains("memory")) {
      f.memory.mem_total = {true, j.at("ram_bytes").get<uint64_t>(), "/proc/meminfo MemTotal"};
      if (j.value("ram_available_bytes", uint64_t(0)) > 0) {
        f.memory.mem_available = {true, j["ram_available_bytes"].get<uint64_t>(), "/proc/meminfo MemAvailable"};
      }
      f.memory.pins_host_memory = f.gpus > 0;
      return f;
    }
  } catch (const nlohmann::json::exception& e) {
    return Status::InvalidArgument(std::string("machine facts: ") + e.what());
  }
  StatusOr<MemoryLimits> memory = MemoryLimits::FromJson(j["memory"]);
  if (!memory.ok()) return memory.status().WithContext("machine facts");
  f.memory = *memory;
  return f;
}

std::string ReadLinks(const std::string& interface) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator("/sys/class/net", ec)) {
    const std::string n = e.path().filename().string();
    if (n != "lo" && (interface.empty() || n == interface)) names.push_back(n);
  }
  std::sort(names.begin(), names.end());
  std::string out;
  for (const std::string& n : names) {
    auto read = [&](const char* file) {
      std::ifstream in(fs::path("/sys/class/net") / n / file);
      std::string v;
      std::getline(in, v);
      return v;
    };
    out += (out.empty() ? "" : "; ") + n + " mtu " + read("mtu") + " speed " + read("speed");
    std::string err;
    StatusOr<std::string> q = CaptureOutput({"tc", "qdisc", "show", "dev", n}, {}, 5, &err);
    if (!q.ok()) continue;
    std::istringstream words(*q);
    bool skip_next = false;
    for (std::string w; words >> w;) {
      if (skip_next || w.back() == ':') {
        skip_next = false;
        continue;
      }
      if (w == "refcnt") {
        skip_next = true;
        continue;
      }
      out += " " + w;
    }
  }
  return out;
}

MachineFacts ReadMachineFacts(const std::string& nvme_path) {
  MachineFacts f;
  char host[256] = {0};
  if (gethostname(host, sizeof host - 1) == 0) f.hostname = host;
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  f.cores = online > 0 ? int(online) : std::max(1, int(std::thread::hardware_concurrency()));
  ReadGpus(&f);
  MemoryLimitsOptions memory;
  // The worker's --device auto computes on a GPU wherever one answers (and
  // its build has CUDA), and then page-locks its host tier for the GPU's DMA.
  memory.pins_host_memory = f.gpus > 0;
  f.memory = ReadMemoryLimits(memory);
  f.nvme_path = nvme_path;
  f.nvme_free_bytes = FreeBytesAt(nvme_path);
  f.read_at = std::time(nullptr);
  f.load1 = ReadLoadAverage();
  f.cpu_model = ReadCpuModel();
  return f;
}

namespace {

// A probe's file is named by its launcher's PID (rank-<pid>.tcnvme): removes
// those whose launcher is gone (stopped by a signal mid-probe), leaving those of
// launchers still probing.
void RemoveStaleProbeFiles(const fs::path& probe_dir) {
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(probe_dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("rank-", 0) != 0 || e.path().extension() != ".tcnvme") continue;
    const std::string digits = name.substr(5, name.size() - 5 - 7);
    if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos || digits.size() > 9) continue;
    const pid_t pid = pid_t(std::stol(digits));
    if (pid > 0 && kill(pid, 0) == -1 && errno == ESRCH) fs::remove(e.path(), ec);
  }
}

}  // namespace

StatusOr<DiskProbe> ProbeDisk(const std::string& dir, uint64_t bytes) {
  NvmeTierOptions o;
  o.dir = (fs::path(dir) / ".probe").string();
  o.rank = int(getpid());
  o.checksums = false;  // the raw engine: checksums are memory work the compute probe covers
  std::error_code ec;
  const bool made = !fs::exists(dir, ec);  // then removed again, as the worker does
  fs::create_directories(o.dir, ec);
  if (ec) return Status::IoError("cache.nvme_path '" + dir + "': cannot create " + o.dir + ": " + ec.message());
  RemoveStaleProbeFiles(o.dir);
  TC_ASSIGN_OR_RETURN(std::unique_ptr<NvmeTier> tier, NvmeTier::Open(o));
  bytes = (bytes + kSlotAlignment - 1) / kSlotAlignment * kSlotAlignment;
  DiskProbe p;
  p.bytes = bytes;
  Status st;
  {
    TC_ASSIGN_OR_RETURN(uint64_t base, tier->Reserve(bytes));
    void* buf = std::aligned_alloc(kSlotAlignment, bytes);
    if (buf == nullptr) return Status::ResourceExhausted("disk probe: cannot allocate " + FormatBytes(bytes));
    std::memset(buf, 0x5a, bytes);
    const auto timeout = std::chrono::milliseconds(120000);
    double t0 = MonotonicSeconds();
    st = tier->Write(base, buf, bytes, "disk probe", timeout);
    const double write_s = MonotonicSeconds() - t0;
    t0 = MonotonicSeconds();
    if (st.ok()) st = tier->Read(base, buf, bytes, "disk probe", timeout);
    const double read_s = MonotonicSeconds() - t0;
    std::free(buf);
    p.write_gbps = double(bytes) / write_s / 1e9;
    p.read_gbps = double(bytes) / read_s / 1e9;
    p.engine = tier->Describe();
  }
  const std::string file = tier->file_path();
  tier.reset();
  fs::remove(file, ec);
  fs::remove(fs::path(dir) / ".probe", ec);
  if (made) fs::remove(dir, ec);
  if (!st.ok()) return st.WithContext("disk probe at cache.nvme_path '" + dir + "'");
  return p;
}

std::string ProbeCacheKey(const JobSpec& job, const MachineFacts& facts, int ranks) {
  const ModelShape& m = job.model;
  std::ostringstream k;
  k << facts.hostname << "|" << fs::absolute(job.cache.nvme_path).lexically_normal().string() << "|" << m.name
    << ":" << m.layers << "x" << m.hidden << "x" << m.ffn_hidden << "x" << m.heads << "/" << m.vocab << "@"
    << m.seq_len << "|" << DTypeName(job.dtype) << "|mb" << job.train.micro_batch << "|r" << ranks;
  if (job.train.compute_threads > 0) k << "|t" << job.train.compute_threads;  // the probe computes on them
  if (job.cluster.target == Target::kHosts) {  // probed across those hosts
    k << "|hosts";
    for (const HostSlots& h : job.cluster.hosts.list) k << " " << h.host << ":" << h.slots;
    k << "|" << job.cluster.hosts.rsh_agent << "|" << job.cluster.hosts.network_interface << "|" << facts.links;
  }
  return k.str();
}

nlohmann::ordered_json LocalProbes::ToJson() const {
  return {{"cached", cached},
          {"conditions", conditions.ToJson()},
          {"reprobe_reason", reprobe_reason},
          {"disk", {{"read_gbps", disk.read_gbps}, {"write_gbps", disk.write_gbps}, {"bytes", disk.bytes},
                    {"engine", disk.engine}}},
          {"compute", compute.ToJson()}};
}

StatusOr<LocalProbes> LocalProbes::FromJson(const nlohmann::json& j) {
  LocalProbes p;
  try {
    const nlohmann::json& d = j.at("disk");
    p.disk = {d.at("read_gbps").get<double>(), d.at("write_gbps").get<double>(), d.at("bytes").get<uint64_t>(),
              d.at("engine").get<std::string>()};
    p.cached = j.value("cached", false);
    p.conditions = ProbeConditions::FromJson(j.value("conditions", nlohmann::json::object()));
    p.reprobe_reason = j.value("reprobe_reason", "");
  } catch (const nlohmann::json::exception& e) {
    return Status::InvalidArgument(std::string("probes: ") + e.what());
  }
  TC_ASSIGN_OR_RETURN(p.compute, ProbeResult::FromJson(j.value("compute", nlohmann::json::object())));
  return p;
}

StatusOr<LocalProbes> ReadProbeCache(const std::string& cache_file, const std::string& key) {
  std::ifstream in(cache_file);
  if (!in) return Status::NotFound(cache_file + ": no probe cache");
  nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains(key)) return Status::NotFound(key + ": not cached");
  StatusOr<LocalProbes> p = LocalProbes::FromJson(j[key]);
  if (!p.ok()) return Status::NotFound(key + ": cache entry unreadable: " + p.status().message());
  p->cached = true;
  return p;
}

Status WriteProbeCache(const std::string& cache_file, const std::string& key, const LocalProbes& p) {
  nlohmann::json j = nlohmann::json::object();
  {
    std::ifstream in(cache_file);
    if (in) j = nlohmann::json::parse(in, nullptr, false);
    if (j.is_discarded() || !j.is_object()) j = nlohmann::json::object();
  }
  nlohmann::ordered_json entry = p.ToJson();
  entry["measured_at"] = std::time(nullptr);
  j[key] = entry;
  std::error_code ec;
  fs::create_directories(fs::path(cache_file).parent_path(), ec);
  const std::string tmp = cache_file + ".tmp";
  {
    std::ofstream out(tmp);
    out << j.dump(2) << "\n";
    if (!out) return Status::IoError(tmp + ": cannot write the probe cache");
  }
  fs::rename(tmp, cache_file, ec);
  if (ec) return Status::IoError(cache_file + ": " + ec.message());
  return Status::Ok();
}

int LocalRanks(const JobSpec& job, const MachineFacts& facts) {
  if (job.cluster.ranks_per_node > 0) return job.cluster.ranks_per_node;
  // Ranks follow the cores, not the GPUs, while the worker computes on the CPU.
  const int mb = std::max(1, job.train.micro_batch);
  const int sequences = job.train.global_batch / mb;  // micro-batches per step over all ranks
  for (int r = std::min(facts.cores, sequences); r > 1; --r) {
    if (sequences % r == 0) return r;
  }
  return 1;
}

LocalCandidate MakeLocalCandidate(const JobSpec& job, const MachineFacts& facts, const LocalProbes& probes,
                                  int ranks, int nodes) {
  const ProbeResult& c = probes.compute;
  LocalCandidate l;
  l.nodes = std::max(1, nodes);
  const int per_node = std::max(1, ranks / l.nodes);
  const uint64_t device = job.cache.device_budget.value_or(SimulatedDeviceBytes(job, facts, ranks));
  InstanceSpec& in = l.instance;
  in.provider = "local";
  in.type = "local";
  in.gpu = "simulated";
  in.gpu_count = per_node;  // one simulated device per rank
  in.gpu_memory_gib = double(device) / double(kGiB);
  in.vcpus = facts.cores;
  in.ram_gib = double(facts.memory.usable_bytes()) / double(kGiB);
  in.nvme.disks = 1;
  in.nvme.disk_gb = double(facts.nvme_free_bytes) / 1e9;
  in.nvme.read_gbps_per_disk = probes.disk.read_gbps;
  in.nvme.write_gbps_per_disk = probes.disk.write_gbps;
  in.nvme.note = "measured at " + facts.nvme_path;
  in.price_source = "this machine: not priced";
  in.file = "(this machine)";

  // The probe's compute of one micro-batch, as a rate over the FLOPs the model
  // counts for it: the resource model then charges exactly the probed time.
  const double compute_s = c.embed_s + job.model.layers * c.layer_s + c.head_s;
  const double rate_tflops = MicroStepFlops(job.model, std::max(1, job.train.micro_batch)) / compute_s / 1e12;
  GpuSpec& g = l.gpu;
  g.name = "simulated";
  g.bf16_tflops = g.fp32_tflops = rate_tflops;
  g.memory_gib = in.gpu_memory_gib;
  g.memory_bw_gbps = g.h2d_gbps = c.copy_gbps;
  g.p2p_gbps = ranks > 1 ? c.allgather_gbps : 1e6;
  in.network_gbps = l.nodes > 1 ? c.allgather_gbps * 8 : 0;  // measured across the hosts: Gbit/s
  in.network_latency_us = 0;  // the probe's latency (below) is over the real links already
  g.source = "tencache-worker --probe";

  ModelAssumptions& a = l.assumptions;
  a.compute_efficiency = a.h2d_efficiency = a.collective_efficiency = a.nvme_efficiency = 1.0;
  a.gpu_headroom_fraction = 0;
  a.gpu_reserved_bytes = 0;
  a.block_overhead_s = 0;
  a.cpu_adam_params_per_s_per_vcpu = c.adamw_params_per_s / std::max(1, c.threads);
  // The probe's tiny all-gather took ranks - 1 ring steps.
  a.collective_latency_s = ranks > 1 ? c.collective_latency_s / (ranks - 1) : 0;
  if (ranks > 1 && c.allgather_gbps > 0 && c.reduce_scatter_gbps > 0) {
    a.reduce_scatter_bw_fraction = c.reduce_scatter_gbps / c.allgather_gbps;  // MPI's reduce-scatter is not its all-gather
  }
  a.device_in_host_memory = true;
  a.cpu_compute_threads = std::max(1, c.threads);
  a.collectives_block_compute = true;

  // What the reference step measured beyond what the model itemises (the
  // blocks' compute, collectives, AdamW) is charged to every step here.
  JobSpec reference = job;
  reference.cache.device_budget.reset();
  reference.cache.host_budget.reset();
  reference.cache.nvme_budget.reset();
  reference.train.micro_batch = std::max(1, job.train.micro_batch);
  if (c.reference_layers > 0) reference.model.layers = c.reference_layers;  // the probe's cut model
  const Candidate modelled = EvaluateCandidate(reference, in, g, l.nodes, a);
  std::string collectives_note;
  if (c.reference_step_s > 0 && modelled.feasible) {
    if (c.reference_step_s >= modelled.step.step_s) {
      a.step_overhead_s = c.reference_step_s - modelled.step.step_s;
    } else if (ranks > 1) {
      // The reference ran faster than its lanes add up to: its collectives,
      // probed back to back out of any step, cost less inside one (a rank's wait
      // for a peer overlaps that peer's work). They are charged at the share of
      // the probe's times that the reference leaves them (none where it leaves
      // less than the rest of its lanes).
      ModelAssumptions free = a;
      free.collective_efficiency = std::numeric_limits<double>::infinity();
      free.collective_latency_s = 0;
      const double rest = EvaluateCandidate(reference, in, g, l.nodes, free).step.step_s;
      const double probed = modelled.step.step_s - rest;
      if (probed > 0) {
        const double share = std::clamp((c.reference_step_s - rest) / probed, 0.0, 1.0);
        a.collective_efficiency = share > 0 ? 1.0 / share : std::numeric_limits<double>::infinity();
        a.collective_latency_s *= share;
        collectives_note = "collectives: the reference step took " + Num(c.reference_step_s * 1e3, "%.1f") +
                           " ms where its lanes add up to " + Num(modelled.step.step_s * 1e3, "%.1f") +
                           " ms; its collectives, " + Num(probed * 1e3, "%.1f") + " ms at the probe's back-to-back times, "
                           "are charged at " + Num(share * 100, "%.0f") + " % of them";
      }
    }
  }
  // The run's cache (not the reference's, which has none) copies and
  // checksums on this machine's cores: where the ranks' compute threads take
  // them all, that work is the compute's loss.
  const bool cores_taken = LaneCores(RankComputeOn(in, a)) == 0;
  if (cores_taken) {
    a.cache_copy_cpu_bps = c.copy_gbps * 1e9;
    a.cache_checksum_cpu_bps = c.checksum_gbps * 1e9;
  }

  const std::string when = probes.cached ? " (cached probe)" : "";
  l.notes.push_back(c.dtype == "nominal" ? std::string("nothing probed (a dry run, no cached probe): nominal speeds")
                                         : DescribeProbeConditions(probes.conditions, facts.Conditions()) +
                    (probes.cached ? ": reused from the probe cache" +
                                         (probes.reprobe_reason.empty() ? "" : "; " + probes.reprobe_reason)
                     : !probes.reprobe_reason.empty() ? ": measured again, as " + probes.reprobe_reason
                                                      : ": measured for this launch"));
  l.notes.push_back("this machine: " + std::to_string(facts.cores) + " cores, " +
                    FormatBytes(facts.memory.mem_total.bytes.value_or(0)) +
                    " RAM, " + (facts.gpus > 0 ? std::to_string(facts.gpus) + " x " + facts.gpu_name +
                                                     " (not used: the worker computes on the CPU)"
                                               : std::string("no GPU")) +
                    "; device tier simulated in host memory, " + FormatBytes(device) + " per rank");
  l.notes.push_back("host memory: " + facts.memory.Describe());
  const std::string cut = c.reference_layers > 0 ? ", the model cut to " + std::to_string(c.reference_layers) +
                                                        " layers: the whole one's states exceed half the free memory"
                                                  : std::string();
  l.notes.push_back("reference step measured" + when + " (in memory, cache.policy none" + cut + "): " +
                    Num(c.reference_step_s * 1e3, "%.1f") + " ms, of which " +
                    Num(a.step_overhead_s * 1e3, "%.1f") +
                    " ms outside the blocks' compute, collectives and AdamW (data, loss, framework), charged per step");
  if (!collectives_note.empty()) l.notes.push_back(collectives_note);
  l.notes.push_back("compute measured" + when + ": one micro-batch " + Num(compute_s * 1e3, "%.1f") + " ms (" +
                    Num(rate_tflops * 1e3, "%.1f") + " GFLOP/s effective, matmul alone " +
                    Num(c.matmul_tflops * 1e3, "%.1f") + " GFLOP/s, " + c.dtype + ", " + std::to_string(c.threads) +
                    " thread(s) per rank)");
  if (c.dtype == "bf16" && c.matmul_fp32_tflops > 2 * c.matmul_tflops) {
    l.notes.push_back("warning: this CPU multiplies bf16 matrices " + Num(c.matmul_fp32_tflops / c.matmul_tflops, "%.0f") +
                      "x slower than fp32 (no native bf16 instructions): model.dtype fp32 trains faster here");
  }
  l.notes.push_back("NVMe tier measured" + when + " at " + facts.nvme_path + ": write " +
                    Num(probes.disk.write_gbps, "%.2f") + " GB/s, read " + Num(probes.disk.read_gbps, "%.2f") +
                    " GB/s (" + probes.disk.engine + ")");
  l.notes.push_back(cores_taken ? "the cache's copies and NVMe checksums share the compute's " +
                                       std::to_string(facts.cores) + " cores: charged to the compute lane"
                                 : "the cache's copies and NVMe checksums run on cores the compute leaves free");
  l.notes.push_back("memory measured" + when + ": AdamW " + Num(c.adamw_params_per_s / 1e6, "%.0f") +
                    "M params/s per rank, copy " + Num(c.copy_gbps, "%.1f") + " GB/s, CRC32C " +
                    Num(c.checksum_gbps, "%.1f") + " GB/s" +
                    (ranks > 1 ? ", all-gather " + Num(c.allgather_gbps, "%.3f") + " GB/s, reduce-scatter " +
                                     Num(c.reduce_scatter_gbps, "%.3f") + " GB/s (beyond the latency), latency " +
                                     Num(c.collective_latency_s * 1e6, "%.0f") + " us"
                               : std::string()));
  return l;
}

StatusOr<LocalCandidate> MakeCatalogHostsCandidate(const JobSpec& job, const Catalog& catalog) {
  const HostsSpec& h = job.cluster.hosts;
  StatusOr<const InstanceSpec*> inst = catalog.FindInstance(h.instance_type);
  if (!inst.ok()) return Status::InvalidArgument(job.Where("cluster.instance_type") + ": " + inst.status().message());
  for (const HostSlots& host : h.list) {
    if (host.slots != (*inst)->gpu_count) {
      return Status::InvalidArgument(job.Where("cluster.hosts") + ": host '" + host.host + "' has " +
                                     std::to_string(host.slots) + " slot(s), but cluster.instance_type " +
                                     h.instance_type + " has " + std::to_string((*inst)->gpu_count) +
                                     " GPU(s); expected one slot per GPU");
    }
  }
  LocalCandidate l;
  l.nodes = int(h.list.size());
  l.instance = **inst;
  l.gpu = *catalog.FindGpu((*inst)->gpu);
  l.notes.push_back("each of the " + std::to_string(l.nodes) + " hosts is a " + h.instance_type +
                    " (cluster.instance_type): described by the catalog (" + (*inst)->file + "), not measured");
  return l;
}

}  // namespace tencache
