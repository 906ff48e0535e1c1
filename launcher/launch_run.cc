#include "launcher/launch_run.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <optional>
#include <set>
#include <sstream>

#include "common/byte_size.h"
#include "common/job_spec.h"
#include "common/report_lines.h"
#include "common/checkpoint_dir.h"
#include "common/text_file.h"
#include "common/token_corpus.h"
#include "launcher/disk_check.h"
#include "launcher/exit_code.h"
#include "launcher/gnuplot.h"  // FindOnPath
#include "launcher/launch_k8s.h"
#include "launcher/local_machine.h"
#include "launcher/local_runner.h"
#include "launcher/planner.h"
#include "launcher/resolved_job.h"
#include "launcher/run_pipeline.h"

namespace tencache {

namespace {

namespace fs = std::filesystem;

constexpr uint64_t kDiskProbeBytes = 256ull << 20;

std::string DefaultWorker() {
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  for (const fs::path& p : {self.parent_path() / "tencache-worker", self.parent_path() / ".." / "worker" / "tencache-worker"}) {
    if (fs::exists(p, ec)) return fs::weakly_canonical(p, ec).string();
  }
  return "tencache-worker";  // on PATH
}

std::string Stamp() {
  char buf[32];
  std::time_t t = std::time(nullptr);
  std::strftime(buf, sizeof buf, "%Y%m%d-%H%M%S", std::localtime(&t));
  return buf;
}

std::string Shell(const std::vector<std::string>& argv) {
  std::string s;
  for (const std::string& a : argv) {
    const bool plain = a.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,@") ==
                       std::string::npos;
    s += (s.empty() ? "" : " ") + (plain && !a.empty() ? a : "'" + a + "'");
  }
  return s;
}

std::vector<std::pair<std::string, std::string>> RootEnv(bool as_root) {
  if (!as_root) return {};
  return {{"OMPI_ALLOW_RUN_AS_ROOT", "1"}, {"OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"}};
}

// The micro-batch the probe measures: the job's, or the planner's likely choice
// on this machine (the largest that divides global_batch / ranks).
int ProbeMicroBatch(const JobSpec& job, int ranks) {
  if (job.train.micro_batch > 0) return job.train.micro_batch;
  return job.train.global_batch % ranks == 0 ? job.train.global_batch / ranks : 1;
}

// Speeds nobody measured, for a dry run on a machine never probed (said so).
LocalProbes NominalProbes() {
  LocalProbes p;
  p.disk = {1.0, 1.0, 0, "not measured (dry run): nominal 1 GB/s"};
  p.compute.dtype = "nominal";
  p.compute.embed_s = 1e-3;
  p.compute.layer_s = 1e-2;
  p.compute.head_s = 1e-2;
  p.compute.matmul_tflops = p.compute.matmul_fp32_tflops = 0.05;
  p.compute.adamw_params_per_s = 1e8;
  p.compute.copy_gbps = 5;
  p.compute.checksum_gbps = 5;
  p.compute.allgather_gbps = p.compute.reduce_scatter_gbps = 1;
  p.compute.collective_latency_s = 5e-5;
  p.compute.reference_step_s = 0;
  return p;
}

struct Probing {
  const LaunchOptions* opt;
  const JobSpec* job;
  const MachineFacts* facts;
  int ranks;
  int micro_batch;
  std::string cache_file;
};

// cluster.target hosts: mpirun starts the ranks on those machines.
void UseHosts(const JobSpec& job, MpirunSpec* spec) {
  if (job.cluster.target != Target::kHosts) return;
  spec->hosts = job.cluster.hosts.list;
  spec->rsh_agent = job.cluster.hosts.rsh_agent;
  spec->network_interface = job.cluster.hosts.network_interface;
  spec->oversubscribe = false;  // each host runs its slots
}

// cluster.target hosts: the first host other than this one that does not
// answer `AGENT HOST true` within `timeout_s`, with what the agent said; ""
// when every host answers (or the target is not hosts).
std::string FirstUnreachableHost(const JobSpec& job, const std::string& this_host, double timeout_s,
                                 std::string* why) {
  if (job.cluster.target != Target::kHosts) return "";
  std::vector<std::string> agent;
  std::istringstream words(job.cluster.hosts.rsh_agent);
  for (std::string w; words >> w;) agent.push_back(w);
  for (const HostSlots& h : job.cluster.hosts.list) {
    if (h.host == this_host || h.host == "localhost") continue;
    std::vector<std::string> argv = agent;
    argv.insert(argv.end(), {h.host, "true"});
    std::string err;
    StatusOr<std::string> r = CaptureOutput(argv, {}, timeout_s, &err);
    if (!r.ok()) {
      *why = r.status().message();
      return h.host;
    }
  }
  return "";
}

// Before anything starts: an unreachable host is named (Unavailable) rather
// than left to Open MPI's generic daemon-start failure.
Status CheckHostsReachable(const JobSpec& job, const std::string& this_host) {
  std::string why;
  const std::string host = FirstUnreachableHost(job, this_host, 30, &why);
  if (host.empty()) return Status::Ok();
  return Status::Unavailable(job.Where("cluster.hosts") + ": cannot reach host '" + host + "' through '" +
                             job.cluster.hosts.rsh_agent + "' (cluster.rsh_agent): " + why);
}

StatusOr<LocalProbes> MeasureProbes(const Probing& p, bool as_root) {
  LocalProbes probes;
  std::printf("Probing this machine (%s): NVMe tier at %s, the model's compute under mpirun -n %d ...\n",
              p.facts->hostname.c_str(), p.job->cache.nvme_path.c_str(), p.ranks);
  std::fflush(stdout);
  probes.conditions = p.facts->Conditions();  // the load just before the probes start
  probes.conditions.at = std::time(nullptr);
  probes.conditions.load1 = ReadLoadAverage();
  TC_ASSIGN_OR_RETURN(probes.disk, ProbeDisk(p.job->cache.nvme_path, kDiskProbeBytes));
  MpirunSpec spec;
  spec.mpirun = p.opt->mpirun;
  spec.worker = p.opt->worker.empty() ? DefaultWorker() : p.opt->worker;
  spec.job = p.opt->job_path;
  spec.ranks = p.ranks;
  spec.as_root = as_root;
  UseHosts(*p.job, &spec);
  for (const std::string& o : p.opt->overrides) spec.worker_args.insert(spec.worker_args.end(), {"--set", o});
  spec.worker_args.insert(spec.worker_args.end(),
                          {"--set", "train.micro_batch=" + std::to_string(p.micro_batch), "--probe"});
  std::vector<std::string> argv = MpirunCommand(spec);
  // A large model's probe computes for minutes on a small machine; a hung one still ends.
  TC_ASSIGN_OR_RETURN(std::string out, CaptureOutput(argv, RootEnv(as_root), 1800));
  const std::string tag = std::string("<stdout>:") + kReportProbePrefix;
  const size_t at = out.find(tag);
  if (at == std::string::npos) return Status::Internal("the compute probe printed no result: " + Shell(argv));
  const size_t start = at + tag.size();
  nlohmann::json j = nlohmann::json::parse(out.substr(start, out.find('\n', start) - start), nullptr, false);
  if (j.is_discarded()) return Status::Internal("the compute probe printed an unreadable result");
  TC_ASSIGN_OR_RETURN(probes.compute, ProbeResult::FromJson(j));
  TC_RETURN_IF_ERROR(WriteProbeCache(p.cache_file, ProbeCacheKey(*p.job, *p.facts, p.ranks), probes));
  return probes;
}

// Ranks stopped by a kill or a signal cannot remove their swap folder (on
// every host, the one rank 0's PID names): once every rank is gone, remove it
// here if ranks ran here (and cache.nvme_path, once empty, when the run made
// it: `made_nvme_path`), and say on which other hosts one may remain.
void RemoveLeftSwapFolder(const JobSpec& job, const RunOutcome& o, const std::string& this_host, bool made_nvme_path) {
  auto pid = o.rank_pids.find(0);
  if (pid == o.rank_pids.end()) return;  // rank 0 never started: nothing was made
  const std::string folder = SwapFolder(job, pid->second);
  bool here = false;
  std::set<std::string> elsewhere;
  for (const auto& [rank, host] : o.rank_hosts) {
    if (host.empty() || host == this_host) here = true;
    else elsewhere.insert(host);
  }
  std::error_code ec;
  if (here && fs::symlink_status(folder, ec).type() == fs::file_type::directory && fs::remove_all(folder, ec) > 0 && !ec) {
    std::printf("Removed the swap folder the stopped ranks left: %s\n", folder.c_str());
  }
  if (here && made_nvme_path) fs::remove(job.cache.nvme_path, ec);  // only if empty
  for (const std::string& host : elsewhere) {
    std::printf("On %s, the stopped ranks may have left %s: remove it there.\n", host.c_str(), folder.c_str());
  }
}

nlohmann::ordered_json MachineJson(const MachineFacts& f, const LocalProbes& p, int ranks, int micro_batch) {
  return {{"facts", f.ToJson()},
          {"ranks", ranks},
          {"probe_micro_batch", micro_batch},
          {"probes", p.ToJson()}};
}

// How long the ranks may take to stop after a signal: the step in progress
// and a checkpoint (train.checkpoint_on_stop) at the disk's measured write
// speed, each with half again as margin, and 30 s.
double StopGraceSeconds(const JobSpec& job, const Candidate& plan, double write_gbps) {
  double s = 30 + 1.5 * plan.step.step_s;
  if (job.train.checkpoint_on_stop && write_gbps > 0) {
    s += 1.5 * double(CheckpointBytes(job, std::max(1, job.ranks()))) / (write_gbps * 1e9);
  }
  return s;
}

Status CheckLocalJob(const JobSpec& job) {
  if (job.cluster.target == Target::kHosts) return Status::Ok();  // cluster.hosts fixed the nodes
  if (job.cluster.nodes > 1) {
    return Status::InvalidArgument(job.Where("cluster.nodes") + ": " + std::to_string(job.cluster.nodes) +
                                   ": cluster.target local runs on this one machine; set cluster.nodes to 1 or auto");
  }
  return Status::Ok();
}

// What a run leaves in its folder that a later run would replace.
const char* const kRunResults[] = {"metrics.jsonl", "report.json", "report.md", "run.json", "weights", "checkpoints"};

// A run folder a user already has is never replaced unasked: --out naming a
// file, or a folder that holds an earlier run's results, is refused unless this
// run resumes that folder or --overwrite says to replace them (removed here,
// with the logs and pictures, before the run writes anything; not in a dry run).
Status CheckRunFolder(const fs::path& out, const LaunchOptions& opt) {
  std::error_code ec;
  const fs::file_status st = fs::status(out, ec);
  if (fs::exists(st) && !fs::is_directory(st)) {
    return Status::InvalidArgument("--out " + out.string() + ": not a folder (a file of that name exists); name a folder");
  }
  if (!fs::is_directory(st)) return Status::Ok();
  std::string found;
  for (const char* name : kRunResults) {
    if (fs::exists(out / name, ec)) found += std::string(found.empty() ? "" : ", ") + name;
  }
  if (found.empty()) return Status::Ok();
  const bool resumes_here =
      opt.resume && (opt.resume_from.empty() || fs::equivalent(fs::path(opt.resume_from), out, ec));
  if (resumes_here) return Status::Ok();
  if (!opt.overwrite) {
    return Status::InvalidArgument("--out " + out.string() + ": holds an earlier run (" + found +
                                   "); continue it with --resume " + out.string() +
                                   " --out NEW_FOLDER, name another --out, or pass --overwrite to replace it");
  }
  if (opt.dry_run) return Status::Ok();
  for (const fs::directory_entry& e : fs::directory_iterator(out, ec)) {
    const std::string name = e.path().filename().string();
    const bool result = std::find(std::begin(kRunResults), std::end(kRunResults), name) != std::end(kRunResults);
    if (result || name == "logs" || e.path().extension() == ".png") {
      std::error_code rm;
      fs::remove_all(e.path(), rm);
      if (rm) return Status::IoError("--overwrite: cannot remove " + e.path().string() + ": " + rm.message());
    }
  }
  return Status::Ok();
}

// `program` (a path, or a name looked up on PATH) is an executable file.
Status CheckProgram(const std::string& flag, const std::string& program) {
  if (program.find('/') == std::string::npos) {
    if (!FindOnPath(program).empty()) return Status::Ok();
    return Status::InvalidArgument(flag + " " + program + ": no such program on PATH");
  }
  std::error_code ec;
  if (!fs::is_regular_file(program, ec) || ::access(program.c_str(), X_OK) != 0) {
    return Status::InvalidArgument(flag + " " + program + ": not an executable file");
  }
  return Status::Ok();
}

// cluster.target local and hosts: the ranks under Open MPI, started from this
// machine, which is measured (or, for hosts the catalog describes, looked up)
// and planned as the candidate.
class MpirunRunner : public Runner {
 public:
  MpirunRunner(const LaunchOptions& opt, JobSpec job) : opt_(opt), job_(std::move(job)) {}

  StatusOr<PlannedRun> Plan() override;
  StatusOr<RunFiles> Prepare(const PlannedRun& run, const ResolvedJob& resolved) override;
  std::string DryRun(const PlannedRun& run, const RunFiles& files) override;
  Status Start(const PlannedRun& run) override;
  StatusOr<RunOutcome> Follow(const PlannedRun& run) override;
  StatusOr<RestartPlan> PrepareRestart(PlannedRun* run, ResolvedJob* resolved, const RunOutcome& failed) override;
  Candidate Predicted(const PlannedRun& run, const ResolvedJob& resolved) override;
  void RunFields(const PlannedRun& run, const RunOutcome& outcome, nlohmann::ordered_json* run_json) override;
  void ExplainEnd(const PlannedRun& run, const RunOutcome& outcome) override;

 private:
  // The checks of the flags before anything is probed, started or written; sets
  // train.checkpoint_dir's default (the run folder's, or --resume's).
  Status CheckBeforeProbing(const fs::path& out);
  // This machine as the candidate: measured, read from the probe cache, or
  // (hosts with cluster.instance_type) the catalog's entry.
  Status MakeCandidate(const fs::path& out, nlohmann::ordered_json* machine);
  // cluster.target hosts, before a restart: the hosts that no longer answer
  // are left out and the job is planned again for the rest, from the first
  // plan's probes (the ranks reshard the checkpoint onto the new world size,
  // docs/worker.md "Elastic resume"); `run`, `resolved` and the run folder's
  // files are remade. "" when every host answers; else what changed.
  // FailedPrecondition when what is left cannot run the job.
  StatusOr<std::string> DropLostHosts(PlannedRun* run, ResolvedJob* resolved);

  const LaunchOptions& opt_;
  JobSpec job_;
  const bool as_root_ = getuid() == 0;
  bool hosts_ = false;
  int nodes_ = 1;
  Catalog catalog_;
  MachineFacts facts_;
  LocalCandidate local_;  // the plan's local candidate points into it
  std::optional<LocalProbes> probes_;  // what MakeCandidate measured or read (none: the catalog's hosts)
  int probe_micro_batch_ = 1;          // the micro-batch they were measured at
  // Set by Prepare.
  ResolvedJob resolved_;
  MpirunSpec spec_;
  std::vector<std::string> argv_;
  std::string resolved_text_;
};

Status MpirunRunner::CheckBeforeProbing(const fs::path& out) {
  // Checkpoints: where the job says, else in the run folder (or, resuming a
  // run folder, in that one's).
  if (!opt_.resume_from.empty() && !fs::is_directory(opt_.resume_from)) {
    return Status::NotFound("--resume " + opt_.resume_from + ": no such run folder");
  }
  if (job_.locations.count("train.checkpoint_dir") == 0) {
    job_.train.checkpoint_dir =
        fs::absolute((opt_.resume_from.empty() ? out : fs::path(opt_.resume_from)) / "checkpoints").string();
  } else if (!opt_.resume_from.empty()) {
    return Status::InvalidArgument(job_.Where("train.checkpoint_dir") + ": set by the job, so --resume takes no "
                                   "run folder (" + opt_.resume_from + "); use --resume alone");
  }
  if (opt_.resume && CompleteCheckpoints(job_.train.checkpoint_dir).empty()) {
    const std::string whose =
        !opt_.resume_from.empty() ? "the run " + opt_.resume_from + " wrote none (it stopped before its first, "
                                                                    "or with train.checkpoint_on_stop false)"
        : job_.locations.count("train.checkpoint_dir") != 0 ? "train.checkpoint_dir holds none"
                                                            : "--resume without a folder continues --out's own run, "
                                                              "and it has none: name the run folder, --resume RUN_DIR";
    return Status::InvalidArgument("--resume: no complete checkpoint (a step-N folder) in " +
                                   job_.train.checkpoint_dir + ": " + whose + "; or start afresh without --resume");
  }
  TC_RETURN_IF_ERROR(CheckRunFolder(out, opt_));
  return CheckProgram("--mpirun", opt_.mpirun);
}

Status MpirunRunner::MakeCandidate(const fs::path& out, nlohmann::ordered_json* machine) {
  const int ranks = hosts_ ? job_.ranks() : LocalRanks(job_, facts_);
  if (hosts_ && !job_.cluster.hosts.instance_type.empty()) {  // the catalog describes the hosts
    TC_ASSIGN_OR_RETURN(local_, MakeCatalogHostsCandidate(job_, catalog_));
    *machine = {{"facts", facts_.ToJson()}, {"ranks", ranks}, {"instance_type", job_.cluster.hosts.instance_type}};
    return Status::Ok();
  }
  JobSpec probed = job_;
  probed.train.micro_batch = ProbeMicroBatch(job_, ranks);
  Probing probing{&opt_, &probed, &facts_, ranks, probed.train.micro_batch,
                  (out.parent_path() / ".probe-cache.json").string()};
  StatusOr<LocalProbes> probes = ReadProbeCache(probing.cache_file, ProbeCacheKey(probed, facts_, ranks));
  // A cached probe stands only while this machine is as it was (load, CPU, build).
  const std::string stale = !probes.ok()    ? ""
                            : opt_.reprobe ? "--reprobe asks for it"
                                           : ReprobeReason(probes->conditions, facts_.Conditions());
  if (opt_.dry_run && probes.ok() && !stale.empty()) {
    probes->reprobe_reason = "a run would measure again: " + stale;
  } else if (!probes.ok() || !stale.empty()) {
    if (opt_.dry_run) {
      probes = NominalProbes();
    } else {
      if (!stale.empty()) std::printf("Probing this machine again: %s.\n", stale.c_str());
      std::error_code ec;
      fs::create_directories(out, ec);
      probes = MeasureProbes(probing, as_root_);
      if (!probes.ok()) return probes.status().WithContext("probing this machine");
      probes->reprobe_reason = stale;
    }
  }
  local_ = MakeLocalCandidate(probed, facts_, *probes, ranks, nodes_);
  probes_ = *probes;
  probe_micro_batch_ = probed.train.micro_batch;
  *machine = MachineJson(facts_, *probes, ranks, probing.micro_batch);
  return Status::Ok();
}

StatusOr<PlannedRun> MpirunRunner::Plan() {
  TC_RETURN_IF_ERROR(CheckLocalJob(job_));
  // The data, read whole here before anything is probed or started: a rank
  // would refuse it only after the probe.
  TC_RETURN_IF_ERROR(CheckJobDataFitsModel(job_, UINT64_MAX));
  TC_ASSIGN_OR_RETURN(catalog_, Catalog::Load(CatalogPathFor(opt_.catalog, job_.cluster.catalog)));
  PlannedRun run;
  const fs::path out = !opt_.out.empty() ? fs::path(opt_.out) : fs::path("runs") / (job_.name + "-" + Stamp());
  run.out = out.string();
  TC_RETURN_IF_ERROR(CheckBeforeProbing(out));
  facts_ = ReadMachineFacts(job_.cache.nvme_path);
  facts_.build = WorkerBuild(opt_.worker.empty() ? DefaultWorker() : opt_.worker);
  hosts_ = job_.cluster.target == Target::kHosts;
  if (hosts_) facts_.links = ReadLinks(job_.cluster.hosts.network_interface);
  nodes_ = hosts_ ? job_.cluster.nodes : 1;
  if (hosts_ && !opt_.dry_run) TC_RETURN_IF_ERROR(CheckHostsReachable(job_, facts_.hostname));
  TC_RETURN_IF_ERROR(MakeCandidate(out, &run.machine));
  TC_ASSIGN_OR_RETURN(run.plan, PlanJob(job_, catalog_, ModelAssumptions(), &local_));
  run.job = job_;
  run.catalog = &catalog_;
  run.local = true;
  run.notes = local_.notes;
  return run;
}

StatusOr<RunFiles> MpirunRunner::Prepare(const PlannedRun& run, const ResolvedJob& resolved) {
  resolved_ = resolved;
  const fs::path out(run.out);
  resolved_text_ = RenderResolvedJob(resolved, {
      "tencache-launch: the job as this run executes it (every auto resolved by the plan).",
      "Source: " + opt_.job_path + "; run on: " +
          (hosts_ ? std::to_string(nodes_) + " host(s) (cluster.hosts), launched from " + facts_.hostname
                  : "this machine (" + facts_.hostname + ")") +
          ", " + std::to_string(resolved.job.ranks()) + " rank(s).",
      "Workers read this file and nothing else."});
  if (StatusOr<JobSpec> back = ParseJobText(resolved_text_, (out / "job.resolved.yaml").string()); !back.ok()) {
    return Status::Internal("the resolved job does not read back: " + back.status().message());
  }
  // Refused before anything is written: a disk that fills mid-run leaves a
  // half-written checkpoint or a failed NVMe write behind.
  const std::vector<DiskDemand> disk =
      RunDiskDemands(resolved.job, NvmeFileBytes(resolved.job, resolved.job.ranks()),
                     std::max(1, resolved.job.ranks() / nodes_), out.string(),
                     int(CompleteCheckpoints(resolved.job.train.checkpoint_dir).size()));
  if (Status s = CheckDiskSpace(disk); !s.ok()) return s.WithContext(opt_.job_path);
  MpirunSpec spec;
  spec.mpirun = opt_.mpirun;
  spec.worker = opt_.worker.empty() ? DefaultWorker() : opt_.worker;
  spec.job = fs::absolute(out / "job.resolved.yaml").string();
  spec.ranks = resolved.job.ranks();
  spec.as_root = as_root_;
  spec.worker_args = {"--sample", "0", "--save-weights", fs::absolute(out / "weights").string()};
  if (opt_.resume) spec.worker_args.push_back("--resume");
  UseHosts(resolved.job, &spec);
  spec_ = spec;
  argv_ = MpirunCommand(spec);
  return RunFiles{{"job.resolved.yaml", resolved_text_},
                  {"plan.txt", RenderPlanTable(run.plan, false)},
                  {"plan.json", PlanToJson(run.plan, false).dump(2) + "\n"},
                  {"machine.json", run.machine.dump(2) + "\n"}};
}

std::string MpirunRunner::DryRun(const PlannedRun& run, const RunFiles&) {
  return "Dry run: nothing started.\n\n--- " + run.out + "/job.resolved.yaml ---\n" + resolved_text_ +
         "\n--- command ---\n" + (as_root_ ? "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 " : "") +
         Shell(argv_) + "\n";
}

Status MpirunRunner::Start(const PlannedRun& run) {
  // mpirun starts in Follow: RunLocal follows it from its first line.
  if (as_root_) std::printf("Running as root: mpirun gets --allow-run-as-root (Open MPI refuses root otherwise).\n");
  std::printf("Run folder: %s\nCommand: %s\n", run.out.c_str(), Shell(argv_).c_str());
  std::fflush(stdout);
  return Status::Ok();
}

StatusOr<RunOutcome> MpirunRunner::Follow(const PlannedRun& run) {
  const fs::path out(run.out);
  RunOptions o;
  o.argv = argv_;
  o.env = RootEnv(as_root_);
  o.log_dir = (out / "logs").string();
  o.metrics_path = (out / "metrics.jsonl").string();
  o.total_steps = resolved_.job.train.steps;
  o.progress_in_place = isatty(1);
  o.progress_every_s = opt_.progress_every_s;
  o.stop_grace_s = StopGraceSeconds(resolved_.job, run.candidate(), local_.instance.nvme.write_gbps_per_disk);
  std::error_code ec;
  const bool made_nvme_path = !fs::exists(resolved_.job.cache.nvme_path, ec) && !ec;  // the ranks make it
  TC_ASSIGN_OR_RETURN(RunOutcome outcome, RunLocal(o));
  if (outcome.exit_code != 0 && hosts_ && outcome.failed_host.empty()) {
    // Open MPI does not always say which node went away: ask each host again.
    std::string why;
    outcome.failed_host = FirstUnreachableHost(resolved_.job, facts_.hostname, 10, &why);
    if (!outcome.failed_host.empty()) outcome.failure += "; " + outcome.failed_host + " no longer answers (" + why + ")";
  }
  if (outcome.exit_code != 0) RemoveLeftSwapFolder(resolved_.job, outcome, facts_.hostname, made_nvme_path);
  return outcome;
}

// The newest complete checkpoint's step (0: none).
int64_t CheckpointStep(const JobSpec& job);

StatusOr<std::string> MpirunRunner::DropLostHosts(PlannedRun* run, ResolvedJob* resolved) {
  std::vector<HostSlots>& hosts = job_.cluster.hosts.list;
  std::string lost;
  for (std::string why, host; !(host = FirstUnreachableHost(job_, facts_.hostname, 10, &why)).empty();) {
    std::replace(why.begin(), why.end(), '\n', ' ');  // one line: it becomes a comment of job.resolved.yaml
    while (!why.empty() && why.back() == ' ') why.pop_back();
    lost += (lost.empty() ? "" : ", ") + host + " (" + why + ")";
    hosts.erase(std::remove_if(hosts.begin(), hosts.end(), [&](const HostSlots& h) { return h.host == host; }),
                hosts.end());
  }
  if (lost.empty()) return std::string();
  if (hosts.empty()) return Status::FailedPrecondition("no host of cluster.hosts answers: " + lost);
  job_.cluster.hosts.hostfile.clear();  // the resolved job lists the hosts left
  job_.cluster.nodes = nodes_ = int(hosts.size());
  const std::string left = "without " + lost + ": " + std::to_string(nodes_) + " host(s), " +
                           std::to_string(job_.ranks()) + " rank(s)";
  if (job_.train.global_batch % job_.ranks() != 0) {
    return Status::FailedPrecondition("planned " + left + ", but train.global_batch " +
                                      std::to_string(job_.train.global_batch) + " is not a multiple of " +
                                      std::to_string(job_.ranks()) + " ranks");
  }
  if (!job_.cluster.hosts.instance_type.empty()) {
    TC_ASSIGN_OR_RETURN(local_, MakeCatalogHostsCandidate(job_, catalog_));
  } else {
    JobSpec probed = job_;
    probed.train.micro_batch = probe_micro_batch_;
    local_ = MakeLocalCandidate(probed, facts_, *probes_, job_.ranks(), nodes_);
  }
  // The new plan is made aside: where it fails, the run ends with what it ran on.
  PlannedRun next = *run;
  StatusOr<PlanResult> plan = PlanJob(job_, catalog_, ModelAssumptions(), &local_);
  if (!plan.ok()) return Status::FailedPrecondition("planned " + left + ": " + plan.status().message());
  next.plan = std::move(*plan);
  next.job = job_;
  next.notes = local_.notes;
  next.machine["ranks"] = job_.ranks();
  if (!next.candidate().feasible) {
    return Status::FailedPrecondition("planned " + left + ", which cannot run the job: " + next.candidate().reason);
  }
  StatusOr<ResolvedJob> again = ResolveJob(job_, next.candidate());
  if (!again.ok()) return Status::FailedPrecondition("planned " + left + ": " + again.status().message());
  again->why["cluster.hosts"] = "planned again for the restart, " + left;
  again->why["cluster.nodes"] = "planned again: the hosts that answer";
  const ResolvedJob before = resolved_;
  StatusOr<RunFiles> files = Prepare(next, *again);  // the hosts left in the argv, job.resolved.yaml
  if (!files.ok()) {
    resolved_ = before;  // Prepare took the new job before its disk check refused it
    return Status::FailedPrecondition("planned " + left + ": " + files.status().message());
  }
  const RunFolder folder(next.out);
  for (const auto& [name, text] : *files) TC_RETURN_IF_ERROR(folder.Write(name, text));
  *run = std::move(next);
  *resolved = std::move(*again);
  return left;
}

StatusOr<RestartPlan> MpirunRunner::PrepareRestart(PlannedRun* run, ResolvedJob* resolved, const RunOutcome&) {
  RestartPlan next;
  if (hosts_) {
    TC_ASSIGN_OR_RETURN(next.replanned, DropLostHosts(run, resolved));
  }
  next.step = CheckpointStep(resolved_.job);
  MpirunSpec spec = spec_;
  std::vector<std::string>& args = spec.worker_args;
  args.erase(std::remove(args.begin(), args.end(), "--resume"), args.end());
  if (next.step > 0) args.push_back("--resume");
  argv_ = MpirunCommand(spec);
  return next;
}

Candidate MpirunRunner::Predicted(const PlannedRun&, const ResolvedJob& resolved) {
  return EvaluateCandidate(resolved.job, local_.instance, local_.gpu, local_.nodes, local_.assumptions);
}

// The newest complete checkpoint: a stop writes one after the last step whose
// metrics line arrived, so the two agree unless a line was lost.
int64_t CheckpointStep(const JobSpec& job) {
  const std::vector<int64_t> checkpoints = CompleteCheckpoints(job.train.checkpoint_dir);
  return checkpoints.empty() ? 0 : checkpoints.front();
}

void MpirunRunner::RunFields(const PlannedRun&, const RunOutcome& outcome, nlohmann::ordered_json* run_json) {
  (*run_json)["mpirun_exit_code"] = outcome.exit_code;
  (*run_json)["checkpoint_step"] = CheckpointStep(resolved_.job);
  (*run_json)["command"] = argv_;
}

void MpirunRunner::ExplainEnd(const PlannedRun& run, const RunOutcome& o) {
  const int64_t checkpoint_step = CheckpointStep(resolved_.job);
  if (o.first_step >= 0 && checkpoint_step > o.steps_done) {
    std::fprintf(stderr, "tencache-launch: the checkpoint is at step %lld but metrics.jsonl holds %d step(s): rank 0's "
                         "last metrics line(s) did not arrive (logs/rank-0.out)\n",
                 (long long)checkpoint_step, o.steps_done);
  }
  if (o.interrupted) {
    std::fprintf(stderr, "tencache-launch: interrupted after %d step(s); every rank stopped in %.1f s. Run folder: %s\n",
                 o.steps_done, o.stop_seconds, run.out.c_str());
    if (checkpoint_step > 0) {
      std::fprintf(stderr, "tencache-launch: resume from its checkpoint at step %lld: tencache-launch %s --resume %s\n",
                   (long long)checkpoint_step, opt_.job_path.c_str(), run.out.c_str());
    } else {
      std::fprintf(stderr, "tencache-launch: this run wrote no checkpoint, so it cannot be resumed (%s)\n",
                   resolved_.job.train.checkpoint_on_stop ? "it stopped before its first step ended"
                                                          : "train.checkpoint_on_stop is false");
    }
    return;
  }
  if (o.exit_code == 0) return;
  const std::string who = WhoFailed(o);
  std::fprintf(stderr, "tencache-launch: %s failed%s%s after %d step(s); the other ranks were stopped.\n", who.c_str(),
               o.failure.empty() ? "" : ": ", o.failure.c_str(), o.steps_done);
  if (!o.last_stderr.empty()) {
    std::fprintf(stderr, "Last stderr lines of %s (%s/logs/rank-%d.err):\n", who.c_str(), run.out.c_str(),
                 o.failed_rank);
    for (const std::string& l : o.last_stderr) std::fprintf(stderr, "  %s\n", l.c_str());
  }
}

}  // namespace

std::unique_ptr<Runner> MakeMpirunRunner(const LaunchOptions& options, JobSpec job) {
  return std::make_unique<MpirunRunner>(options, std::move(job));
}

int LaunchRun(const LaunchOptions& opt) {
  // The job keys --max-restarts and --target set (the k8s runner adds --steps' itself).
  std::vector<std::string> flags;
  if (opt.max_restarts >= 0) flags.push_back("cluster.max_restarts=" + std::to_string(opt.max_restarts));
  if (!opt.target.empty()) flags.push_back("cluster.target=" + opt.target);
  std::vector<std::string> overrides = opt.overrides;
  if (opt.steps >= 0) overrides.push_back("train.steps=" + std::to_string(opt.steps));
  overrides.insert(overrides.end(), flags.begin(), flags.end());
  StatusOr<JobSpec> job = LoadJobFile(opt.job_path, overrides);
  if (!job.ok()) return FailCommand(job.status());
  if (job->cluster.target == Target::kK8s) {
    LaunchOptions k8s = opt;
    k8s.overrides.insert(k8s.overrides.end(), flags.begin(), flags.end());
    return RunPipeline(*MakeMpiJobRunner(k8s), opt.job_path, opt.dry_run);
  }
  return RunPipeline(*MakeMpirunRunner(opt, std::move(*job)), opt.job_path, opt.dry_run);
}

}  // namespace tencache
