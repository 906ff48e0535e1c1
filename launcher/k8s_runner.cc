#include "launcher/k8s_runner.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "common/human_format.h"
#include "launcher/exit_code.h"
#include "launcher/k8s_objects.h"
#include "launcher/run_follower.h"
#include "launcher/run_folder.h"

namespace tencache {
namespace {

namespace fs = std::filesystem;
using namespace k8s;  // NOLINT: the cluster readers

constexpr double kSuccessGraceS = 10;     // for the launcher's log to end after the job succeeded
constexpr double kFailureGraceS = 3;      // ... after it failed
constexpr int kLastLines = 20;

// ---- following ----

class K8sFollow {
 public:
  K8sFollow(const KubectlOptions& o, const FollowOptions& f)
      : o_(o), f_(f), follower_(MakeFollowerOptions(f)) {}
  StatusOr<RunOutcome> Run();

 private:
  static FollowerOptions MakeFollowerOptions(const FollowOptions& f) {
    FollowerOptions fo;
    fo.log_dir = f.log_dir;
    fo.untagged_log = "";  // launcher.log holds every line
    fo.metrics_path = f.metrics_path;
    fo.total_steps = f.total_steps;
    fo.progress_in_place = f.progress_in_place;
    fo.progress_every_s = f.progress_every_s;
    return fo;
  }
  enum class Verdict { kRunning, kSucceeded, kFailed };
  // One look at the cluster: pods and the MPIJob, their snapshots written to
  // log_dir. A Status only when kubectl cannot be started or a snapshot
  // cannot be written (IoError naming the file).
  StatusOr<Verdict> Poll();
  Verdict Judge(const std::vector<json>& pods, const json& job, double now);
  void PrintChanges(const std::vector<json>& pods, const json& job);
  // `ran`: its container ran, so its log may say why.
  Verdict FailPod(const json& pod, const std::string& what, bool ran = false);
  Verdict Failed(const std::string& failure) {
    failure_ = failure;
    return Verdict::kFailed;
  }
  void StartLogs(const json& pod);
  void PumpLogs();
  void StopLogs();
  bool LogsRunning() const { return logs_.pid > 0; }

  const KubectlOptions& o_;
  const FollowOptions& f_;
  RunFollower follower_;
  std::ofstream launcher_log_;

  // What the last poll saw.
  std::map<std::string, std::string> shown_;  // pod -> its printed phase line
  std::string job_state_shown_;
  std::map<std::string, double> pending_since_;
  std::map<std::string, std::string> pull_errors_;  // pod -> its last ErrImagePull message
  double no_pods_since_ = -1, kubectl_failing_since_ = -1;
  std::string last_kubectl_error_;
  json launcher_pod_;  // the newest launcher pod, or null
  std::string failure_, failed_pod_, failed_container_;
  bool failed_pod_ran_ = false;

  // The launcher's log stream.
  ChildProcess logs_;
  bool logs_out_open_ = false, logs_err_open_ = false;
  std::string logs_partial_, logs_err_partial_, logs_err_text_;
  std::string logs_pod_;        // whose log the lines so far are
  int logs_restarts_ = -1;      // that container's restartCount when they were read
  long long lines_read_ = 0;    // lines of that log delivered
  long long skip_ = 0;          // lines a restarted stream repeats
  bool logs_complete_ = false;  // the pod had finished when its stream ended
  bool logs_complete_pending_ = false;  // the stream now running is of a finished pod
  bool logs_error_shown_ = false;
  std::deque<std::string> log_tail_;
};

StatusOr<RunOutcome> K8sFollow::Run() {
  TC_RETURN_IF_ERROR(follower_.Open());
  launcher_log_.open(fs::path(f_.log_dir) / "launcher.log");
  if (!launcher_log_) return Status::IoError(f_.log_dir + ": cannot write launcher.log");
  SignalScope signals;
  RunOutcome outcome;
  double next_poll = 0, finish_by = 0;
  bool finishing = false;
  Verdict verdict = Verdict::kRunning;
  while (true) {
    const double now = MonotonicSeconds();
    int timeout_ms = finishing ? 100 : int(std::clamp((next_poll - now) * 1000, 0.0, 1000.0));
    std::vector<pollfd> fds;
    if (logs_out_open_) fds.push_back({logs_.out, POLLIN, 0});
    if (logs_err_open_) fds.push_back({logs_.err, POLLIN, 0});
    if (signals.fd() >= 0) fds.push_back({signals.fd(), POLLIN, 0});
    poll(fds.data(), fds.size(), timeout_ms);
    if (signals.Take()) {
      outcome.interrupted = true;
      break;
    }
    PumpLogs();
    if (finishing) {
      if (!LogsRunning() || MonotonicSeconds() >= finish_by) break;
      continue;
    }
    if (MonotonicSeconds() < next_poll) continue;
    StatusOr<Verdict> v = Poll();
    if (!v.ok()) {
      StopLogs();
      return v.status();
    }
    next_poll = MonotonicSeconds() + f_.poll_every_s;
    if (*v == Verdict::kRunning) continue;
    verdict = *v;
    finishing = true;
    finish_by = MonotonicSeconds() + (verdict == Verdict::kSucceeded ? kSuccessGraceS : kFailureGraceS);
    // A launcher that has finished: read its whole log if it was not streamed to its end.
    const std::string phase = Phase(launcher_pod_);
    if (!LogsRunning() && !logs_complete_ && (phase == "Succeeded" || phase == "Failed")) StartLogs(launcher_pod_);
  }
  StopLogs();
  follower_.Progress(true);
  outcome.steps_done = follower_.steps_done();
  outcome.failed_rank = follower_.failed_rank();
  outcome.first_step = follower_.first_step();
  outcome.first_step_s = follower_.first_metrics_s();
  outcome.checkpoint_step = follower_.checkpoint_step();
  if (outcome.interrupted) {
    outcome.exit_code = 130;
    outcome.failure = "stopped following after " + std::to_string(outcome.steps_done) + " step(s); the MPIJob " +
                      f_.job_name + " keeps running on the cluster until deleted (tencache-launch delete " +
                      f_.job_name + ")";
    return outcome;
  }
  if (verdict == Verdict::kSucceeded) return outcome;
  outcome.exit_code = 1;
  outcome.failure = failure_;
  if (follower_.failed()) {
    outcome.failure += "; the launcher's log says rank " + std::to_string(follower_.failed_rank()) + ": " +
                       follower_.failure();
  }
  // The failed pod's last log lines: the launcher's as streamed, a worker's asked for.
  if (!failed_pod_.empty() && failed_pod_ == logs_pod_ && !log_tail_.empty()) {
    outcome.last_stderr.assign(log_tail_.begin(), log_tail_.end());
  } else if (!failed_pod_.empty() && failed_pod_ran_) {
    std::vector<std::string> args = {"logs", failed_pod_};
    if (!failed_container_.empty()) args.insert(args.end(), {"-c", failed_container_});
    args.push_back("--tail=" + std::to_string(kLastLines));
    StatusOr<ProcessResult> r = Kubectl(o_, args);
    if (r.ok() && r->exit_code == 0) outcome.last_stderr = SplitLines(r->out);
  } else if (follower_.failed()) {
    outcome.last_stderr = follower_.LastStderr(follower_.failed_rank());
  } else {
    outcome.last_stderr.assign(log_tail_.begin(), log_tail_.end());  // where the launcher was
  }
  return outcome;
}

StatusOr<K8sFollow::Verdict> K8sFollow::Poll() {
  const double now = MonotonicSeconds();
  const std::string selector = std::string(kJobNameLabel) + "=" + f_.job_name;
  StatusOr<json> pods = GetJson(o_, {"get", "pods", "-l", selector, "-o", "json"}, "kubectl get pods");
  StatusOr<json> job = GetJson(o_, {"get", kMpiJobResource, f_.job_name, "-o", "json"}, "kubectl get mpijob");
  for (const Status* s : {&pods.status(), &job.status()}) {
    if (s->code() == StatusCode::kUnavailable && Contains(s->message(), "cannot start kubectl")) return *s;
  }
  if (job.status().code() == StatusCode::kNotFound) {
    return Failed("the MPIJob " + f_.job_name + " is gone from namespace " +
                  (o_.namespace_.empty() ? "default" : o_.namespace_) + " (deleted?): " + job.status().message());
  }
  if (!pods.ok() || !job.ok()) {
    const std::string err = !pods.ok() ? pods.status().message() : job.status().message();
    if (MpiJobKindMissing(err)) return Failed(err);  // the operator was uninstalled: no retry will help
    if (kubectl_failing_since_ < 0) kubectl_failing_since_ = now;
    if (err != last_kubectl_error_) follower_.Note("kubectl failed (retrying): " + err);
    last_kubectl_error_ = err;
    if (now - kubectl_failing_since_ >= f_.pending_timeout_s) {
      return Failed("kubectl has failed for " + FormatDuration(now - kubectl_failing_since_) + ": " + err);
    }
    return Verdict::kRunning;
  }
  kubectl_failing_since_ = -1;
  last_kubectl_error_.clear();
  // The latest answers, as snapshots beside the logs.
  const RunFolder logs(f_.log_dir);
  TC_RETURN_IF_ERROR(logs.Write("pods.json", pods->dump(2) + "\n"));
  TC_RETURN_IF_ERROR(logs.Write("mpijob.json", job->dump(2) + "\n"));
  std::vector<json> list;
  if (Get(*pods, "items").is_array()) list.assign(Get(*pods, "items").begin(), Get(*pods, "items").end());
  std::sort(list.begin(), list.end(), [](const json& a, const json& b) { return Name(a) < Name(b); });
  launcher_pod_ = json();
  for (const json& p : list) {
    if (Label(p, kJobRoleLabel) != "launcher") continue;
    const std::string created = Text(Get(Get(p, "metadata"), "creationTimestamp"));
    if (launcher_pod_.is_null() || created >= Text(Get(Get(launcher_pod_, "metadata"), "creationTimestamp"))) {
      launcher_pod_ = p;
    }
  }
  PrintChanges(list, *job);
  const Verdict v = Judge(list, *job, now);
  if (v == Verdict::kRunning && !LogsRunning() && !logs_complete_ && !launcher_pod_.is_null()) {
    const std::string phase = Phase(launcher_pod_);
    if (phase == "Running" || phase == "Succeeded" || phase == "Failed") StartLogs(launcher_pod_);
  }
  return v;
}

void K8sFollow::PrintChanges(const std::vector<json>& pods, const json& job) {
  std::set<std::string> seen;
  for (const json& p : pods) {
    const std::string name = Name(p), line = PodDisplay(p);
    seen.insert(name);
    if (shown_[name] != line) follower_.Note("pod " + name + ": " + line);
    shown_[name] = line;
  }
  for (auto it = shown_.begin(); it != shown_.end();) {
    if (seen.count(it->first) == 0) {
      follower_.Note("pod " + it->first + ": deleted");
      it = shown_.erase(it);
    } else {
      ++it;
    }
  }
  std::string reason, message;
  const std::string state = JobState(job, &reason, &message);
  if (state != job_state_shown_) {
    std::string line = "MPIJob " + f_.job_name + ": " + state;
    if ((state == "Failed" || state == "Restarting") && !message.empty()) line += " (" + reason + ": " + message + ")";
    follower_.Note(line);
    job_state_shown_ = state;
  }
}

K8sFollow::Verdict K8sFollow::FailPod(const json& pod, const std::string& what, bool ran) {
  failed_pod_ = Name(pod);
  failed_pod_ran_ = ran;
  return Failed("pod " + failed_pod_ + " " + what);
}

K8sFollow::Verdict K8sFollow::Judge(const std::vector<json>& pods, const json& job, double now) {
  // 1. A failed pod: a worker first (the launcher fails because a worker did).
  for (const char* role : {"worker", "launcher"}) {
    for (const json& p : pods) {
      if (Label(p, kJobRoleLabel) != role || Phase(p) != "Failed") continue;
      const std::string reason = Text(Get(Get(p, "status"), "reason"));
      const std::string message = Trim(Text(Get(Get(p, "status"), "message")));
      for (const json* c : ContainerStatuses(p)) {
        const json& t = Get(Get(*c, "state"), "terminated");
        if (t.is_object() && Text(Get(t, "exitCode")) != "0") {
          failed_container_ = Text(Get(*c, "name"));
          return FailPod(p, "failed: container " + failed_container_ + " " + Terminated(t) +
                                (reason.empty() ? "" : "; pod " + reason + (message.empty() ? "" : ": " + message)),
                         true);
        }
      }
      failed_container_ = MainContainer(p);
      return FailPod(p, "failed" + (reason.empty() ? std::string() : ": " + reason) +
                            (message.empty() ? "" : (reason.empty() ? ": " : " ") + message),
                     true);
    }
  }
  // 2. A container that cannot start: an image that cannot be pulled, or one crashing over and over.
  for (const json& p : pods) {
    for (const json* c : ContainerStatuses(p)) {
      const json& w = Get(Get(*c, "state"), "waiting");
      if (!w.is_object()) continue;
      const std::string reason = Text(Get(w, "reason")), message = Trim(Text(Get(w, "message")));
      const std::string image = ImageOf(p, *c);
      failed_container_ = Text(Get(*c, "name"));
      if (reason == "ErrImagePull") {
        pull_errors_[Name(p)] = message;
      } else if (reason == "ImagePullBackOff" || reason == "InvalidImageName" || reason == "ErrImageNeverPull") {
        const std::string earlier = pull_errors_[Name(p)];
        return FailPod(p, "cannot pull image '" + image + "': " + reason + (message.empty() ? "" : ": " + message) +
                              (earlier.empty() ? "" : " (ErrImagePull: " + earlier + ")") +
                              ". Check cluster.image, that it was pushed, and that the nodes may pull it "
                              "(imagePullSecrets)");
      } else if (reason == "CrashLoopBackOff") {
        const json& last = Get(Get(*c, "lastState"), "terminated");
        return FailPod(p, "keeps crashing: container " + failed_container_ + " " +
                              (last.is_object() ? Terminated(last) : message) + " (CrashLoopBackOff)",
                       true);
      }
    }
  }
  failed_container_.clear();
  // 3. The MPIJob's own verdict.
  std::string reason, message;
  const std::string state = JobState(job, &reason, &message);
  if (state == "Failed") {
    return Failed("the MPIJob " + f_.job_name + " failed" + (reason.empty() ? "" : " (" + reason + ")") +
                  (message.empty() ? "" : ": " + message));
  }
  if (state == "Succeeded" || Phase(launcher_pod_) == "Succeeded") return Verdict::kSucceeded;
  // 4. Pending too long: no pod at all, or a pod that is not scheduled or not started.
  // A suspended MPIJob waits in its queue (Kueue admits it when its quota
  // allows, cluster.queue) for as long as that takes.
  if (pods.empty() && state == "Suspended") {
    no_pods_since_ = -1;
    return Verdict::kRunning;
  }
  if (pods.empty()) {
    if (no_pods_since_ < 0) no_pods_since_ = now;
    if (now - no_pods_since_ >= f_.pending_timeout_s) {
      return Failed(state == "Pending"
                        ? "the MPI Operator has not acted on the MPIJob " + f_.job_name + " for " +
                              FormatDuration(now - no_pods_since_) + " (no status, no pods): is the operator "
                              "running, and does it watch this namespace? (kubectl get pods -A -l app=mpi-operator)"
                        : "the MPIJob " + f_.job_name + " has had no pods for " + FormatDuration(now - no_pods_since_) +
                              " (kubectl describe mpijob " + f_.job_name + " says why)");
    }
    return Verdict::kRunning;
  }
  no_pods_since_ = -1;
  std::set<std::string> pending;
  for (const json& p : pods) {
    if (Phase(p) != "Pending") continue;
    const std::string name = Name(p);
    pending.insert(name);
    auto [it, fresh] = pending_since_.emplace(name, now);
    if (now - it->second < f_.pending_timeout_s) continue;
    const std::string waited = FormatDuration(now - it->second);
    const std::string scheduling = SchedulingProblem(p);
    if (!scheduling.empty()) {
      return FailPod(p, "was not scheduled in " + waited + ": " + scheduling +
                            " (the plan's instance type, GPUs, CPU or memory are not available on this cluster)");
    }
    std::string why;
    for (const json* c : ContainerStatuses(p)) {
      const json& w = Get(Get(*c, "state"), "waiting");
      if (!w.is_object()) continue;
      const std::string image_note = Contains(Text(Get(w, "reason")), "Image") ? " image '" + ImageOf(p, *c) + "'" : "";
      why = "container " + Text(Get(*c, "name")) + image_note + ": " + Text(Get(w, "reason")) +
            (Text(Get(w, "message")).empty() ? "" : ": " + Trim(Text(Get(w, "message"))));
      failed_container_ = Text(Get(*c, "name"));
      break;
    }
    return FailPod(p, "was still Pending after " + waited + (why.empty() ? "" : ": " + why));
  }
  for (auto it = pending_since_.begin(); it != pending_since_.end();) {
    it = pending.count(it->first) ? std::next(it) : pending_since_.erase(it);
  }
  return Verdict::kRunning;
}

void K8sFollow::StartLogs(const json& pod) {
  const std::string name = Name(pod), container = MainContainer(pod);
  const int restarts = RestartCount(pod, container);
  if (name != logs_pod_ || restarts != logs_restarts_) {  // a new log: nothing of it read yet
    logs_pod_ = name;
    logs_restarts_ = restarts;
    lines_read_ = 0;
  }
  skip_ = lines_read_;  // `logs -f` starts from the beginning again
  std::vector<std::string> args = {"logs", "-f", name};
  if (!container.empty()) args.insert(args.end(), {"-c", container});
  StatusOr<ChildProcess> child = SpawnChild(KubectlCommand(o_, args), {});
  if (!child.ok()) {
    follower_.Note("cannot stream the launcher's log: " + child.status().message());
    return;
  }
  logs_ = *child;
  logs_out_open_ = logs_err_open_ = true;
  logs_err_text_.clear();
  // Finished pods' logs are complete once read to their end.
  logs_complete_pending_ = Phase(pod) == "Succeeded" || Phase(pod) == "Failed";
}

void K8sFollow::PumpLogs() {
  if (!LogsRunning()) return;
  if (logs_out_open_) {
    logs_out_open_ = DrainLines(logs_.out, &logs_partial_, [&](const std::string& line) {
      if (skip_ > 0) {
        --skip_;
        return;
      }
      ++lines_read_;
      launcher_log_ << line << "\n" << std::flush;
      log_tail_.push_back(line);
      if (log_tail_.size() > size_t(kLastLines)) log_tail_.pop_front();
      follower_.Line(line, false);
    });
  }
  if (logs_err_open_) {
    logs_err_open_ = DrainLines(logs_.err, &logs_err_partial_, [&](const std::string& line) {
      logs_err_text_ += line + "\n";
    });
  }
  if (logs_out_open_ || logs_err_open_) return;
  close(logs_.out);
  close(logs_.err);
  int status = 0;
  waitpid(logs_.pid, &status, 0);
  logs_.pid = -1;
  const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  if (ok && logs_complete_pending_) logs_complete_ = true;
  if (!ok && !logs_error_shown_ && !Trim(logs_err_text_).empty()) {
    follower_.Note("kubectl logs " + logs_pod_ + ": " + Trim(Tail(logs_err_text_, 500)) + " (retrying)");
    logs_error_shown_ = true;
  }
}

void K8sFollow::StopLogs() {
  if (!LogsRunning()) return;
  kill(-logs_.pid, SIGKILL);
  PumpLogs();  // what was already in the pipes
  if (logs_.pid > 0) {
    close(logs_.out);
    close(logs_.err);
    waitpid(logs_.pid, nullptr, 0);
    logs_.pid = -1;
  }
  logs_out_open_ = logs_err_open_ = false;
}

}  // namespace

std::vector<std::string> KubectlCommand(const KubectlOptions& o, const std::vector<std::string>& args) {
  std::vector<std::string> argv = {o.kubectl};
  if (!o.context.empty()) argv.insert(argv.end(), {"--context", o.context});
  if (!o.namespace_.empty()) argv.insert(argv.end(), {"--namespace", o.namespace_});
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

Status ApplyManifests(const KubectlOptions& o, const std::string& manifest_file) {
  TC_ASSIGN_OR_RETURN(ProcessResult r, Kubectl(o, {"apply", "-f", manifest_file}));
  if (r.exit_code != 0) return KubectlFailure("kubectl apply -f " + manifest_file, r);
  for (const std::string& line : SplitLines(r.out)) {
    if (!Trim(line).empty()) std::printf("  %s\n", line.c_str());
  }
  std::fflush(stdout);
  return Status::Ok();
}

Status DeleteForRestart(const KubectlOptions& o, const std::string& name, double timeout_s) {
  const long long seconds = std::max(1LL, (long long)std::ceil(timeout_s));
  TC_ASSIGN_OR_RETURN(ProcessResult r,
                      Kubectl(o, {"delete", kMpiJobResource, name, "--cascade=foreground", "--wait=true",
                                  "--timeout=" + std::to_string(seconds) + "s"},
                              double(seconds) + kKubectlTimeoutS));
  if (r.exit_code == 0) return Status::Ok();
  if (Contains(r.err, "(NotFound)") && !MpiJobKindMissing(r.err)) return Status::Ok();
  const Status s = KubectlFailure("kubectl delete mpijob " + name + " (before the restart)", r);
  return Status::Unavailable(s.message());
}

StatusOr<RunOutcome> FollowK8sJob(const KubectlOptions& o, const FollowOptions& f) {
  K8sFollow follow(o, f);
  return follow.Run();
}

int K8sStatus(const KubectlOptions& o, const std::string& name) {
  const std::string ns = o.namespace_.empty() ? "the default namespace" : "namespace " + o.namespace_;
  std::vector<json> jobs;
  if (name.empty()) {
    StatusOr<json> list = GetJson(o, {"get", kMpiJobResource, "-l", kTencacheSelector, "-o", "json"}, "kubectl get mpijobs");
    if (!list.ok()) return FailCommand(list.status());
    if (Get(*list, "items").is_array()) jobs.assign(Get(*list, "items").begin(), Get(*list, "items").end());
    if (jobs.empty()) {
      std::printf("No tencache MPIJobs in %s.\n", ns.c_str());
      return 0;
    }
  } else {
    StatusOr<json> job = GetJson(o, {"get", kMpiJobResource, name, "-o", "json"}, "kubectl get mpijob " + name);
    if (job.status().code() == StatusCode::kNotFound) {
      std::fprintf(stderr, "tencache-launch: no MPIJob %s in %s (tencache-launch status lists them)\n", name.c_str(),
                   ns.c_str());
      return kExitFailed;
    }
    if (!job.ok()) return FailCommand(job.status());
    jobs.push_back(*job);
  }
  // Every worker pod of these jobs, for WORKERS READY.
  const std::string selector = name.empty() ? std::string(kTencacheSelector) + "," + kJobRoleLabel + "=worker"
                                            : std::string(kJobNameLabel) + "=" + name;
  StatusOr<json> pods = GetJson(o, {"get", "pods", "-l", selector, "-o", "json"}, "kubectl get pods");
  if (!pods.ok()) return FailCommand(pods.status());
  std::vector<json> pod_list;
  if (Get(*pods, "items").is_array()) pod_list.assign(Get(*pods, "items").begin(), Get(*pods, "items").end());
  std::sort(pod_list.begin(), pod_list.end(), [](const json& a, const json& b) { return Name(a) < Name(b); });
  std::vector<std::vector<std::string>> rows = {{"NAME", "STATE", "AGE", "WORKERS READY", "INSTANCE"}};
  for (const json& job : jobs) {
    const std::string job_name = Name(job);
    const json& worker = Get(Get(Get(job, "spec"), "mpiReplicaSpecs"), "Worker");
    const int replicas = Get(worker, "replicas").is_number() ? Get(worker, "replicas").get<int>() : 0;
    int ready = 0;
    for (const json& p : pod_list) {
      if (Label(p, kJobNameLabel) == job_name && Label(p, kJobRoleLabel) == "worker" && PodReady(p)) ++ready;
    }
    std::string instance = Text(Get(Get(Get(Get(worker, "template"), "spec"), "nodeSelector"), kInstanceTypeLabel));
    rows.push_back({job_name, JobState(job), Age(Text(Get(Get(job, "metadata"), "creationTimestamp"))),
                    std::to_string(ready) + "/" + std::to_string(replicas), instance.empty() ? "-" : instance});
  }
  std::printf("%s", FormatTable(rows).c_str());
  if (!name.empty()) {
    const json& conditions = Get(Get(jobs[0], "status"), "conditions");
    if (conditions.is_array() && !conditions.empty()) {
      std::vector<std::vector<std::string>> c_rows = {{"CONDITION", "STATUS", "AGE", "REASON", "MESSAGE"}};
      for (const json& c : conditions) {
        c_rows.push_back({Text(Get(c, "type")), Text(Get(c, "status")), Age(Text(Get(c, "lastTransitionTime"))),
                          Text(Get(c, "reason")), Trim(Text(Get(c, "message")))});
      }
      std::printf("\n%s", FormatTable(c_rows).c_str());
    }
    std::vector<std::vector<std::string>> p_rows = {{"POD", "ROLE", "PHASE", "READY", "NODE"}};
    for (const json& p : pod_list) {
      const std::string node = Text(Get(Get(p, "spec"), "nodeName"));
      p_rows.push_back({Name(p), Label(p, kJobRoleLabel), PodDisplay(p), PodReady(p) ? "yes" : "no",
                        node.empty() ? "-" : node});
    }
    if (p_rows.size() > 1) std::printf("\n%s", FormatTable(p_rows).c_str());
    else std::printf("\nNo pods (yet, or cleaned up after the job ended).\n");
  }
  std::fflush(stdout);
  return 0;
}

int K8sLogs(const KubectlOptions& o, const std::string& name, bool follow) {
  const std::string selector = std::string(kJobNameLabel) + "=" + name + "," + kJobRoleLabel + "=launcher";
  StatusOr<json> pods = GetJson(o, {"get", "pods", "-l", selector, "-o", "json"}, "kubectl get pods");
  if (!pods.ok()) return FailCommand(pods.status());
  const json* newest = nullptr;
  if (Get(*pods, "items").is_array()) {
    for (const json& p : Get(*pods, "items")) {
      if (newest == nullptr || Text(Get(Get(p, "metadata"), "creationTimestamp")) >=
                                   Text(Get(Get(*newest, "metadata"), "creationTimestamp"))) {
        newest = &p;
      }
    }
  }
  if (newest == nullptr) {
    std::fprintf(stderr, "tencache-launch: the MPIJob %s has no launcher pod (not started: its workers are not all "
                         "ready yet, or cleaned up); tencache-launch status %s says more\n", name.c_str(), name.c_str());
    return kExitFailed;
  }
  std::vector<std::string> args = {"logs"};
  if (follow) args.push_back("-f");
  args.push_back(Name(*newest));
  const std::string container = MainContainer(*newest);
  if (!container.empty()) args.insert(args.end(), {"-c", container});
  // kubectl writes straight to this program's stdout and stderr; Ctrl-C reaches both.
  const std::vector<std::string> argv = KubectlCommand(o, args);
  std::vector<char*> cargv;
  for (const std::string& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = fork();
  if (pid < 0) return FailCommand(Status::IoError("fork failed"));
  if (pid == 0) {
    execvp(cargv[0], cargv.data());
    std::fprintf(stderr, "tencache-launch: cannot start kubectl ('%s'); install kubectl or pass --kubectl PATH\n",
                 cargv[0]);
    _exit(127);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int K8sDelete(const KubectlOptions& o, const std::string& name) {
  const std::string ns = o.namespace_.empty() ? "the default namespace" : "namespace " + o.namespace_;
  StatusOr<ProcessResult> job = Kubectl(o, {"delete", kMpiJobResource, name});
  if (!job.ok()) return FailCommand(job.status());
  bool found = true;
  if (job->exit_code != 0) {
    if (Contains(job->err, "(NotFound)") && !MpiJobKindMissing(job->err)) {
      found = false;
    } else {
      return FailCommand(KubectlFailure("kubectl delete mpijob " + name, *job));
    }
  }
  std::printf("%s", job->out.c_str());
  // The job's ConfigMap (job.resolved.yaml) is not owned by the MPIJob: by its labels.
  const std::string selector = std::string(kTencacheSelector) + "," + kInstanceLabel + "=" + name;
  StatusOr<ProcessResult> maps = Kubectl(o, {"delete", "configmaps", "-l", selector});
  if (!maps.ok()) return FailCommand(maps.status());
  if (maps->exit_code != 0) return FailCommand(KubectlFailure("kubectl delete configmaps -l " + selector, *maps));
  const bool maps_found = Contains(maps->out, "deleted");
  std::printf("%s", maps->out.c_str());
  std::fflush(stdout);
  if (!found && !maps_found) {
    std::fprintf(stderr, "tencache-launch: nothing named %s in %s (tencache-launch status lists the runs)\n",
                 name.c_str(), ns.c_str());
    return kExitFailed;
  }
  if (found) std::printf("Its pods, service, and the operator's ConfigMap and Secret go with it.\n");
  std::fflush(stdout);
  return 0;
}

}  // namespace tencache
