#include "launcher/local_runner.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "launcher/run_follower.h"

namespace tencache {
namespace {

// A process that still runs (a zombie has stopped: only its exit status is left).
bool Running(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!std::getline(stat, text)) return false;
  const size_t paren = text.rfind(')');
  return paren != std::string::npos && paren + 2 < text.size() && text[paren + 2] != 'Z';
}

}  // namespace

std::vector<std::string> MpirunCommand(const MpirunSpec& s) {
  std::vector<std::string> argv = {s.mpirun};
  if (s.as_root) argv.push_back("--allow-run-as-root");
  if (s.oversubscribe) argv.push_back("--oversubscribe");
  if (!s.hosts.empty()) {
    std::string list;
    for (const HostSlots& h : s.hosts) list += (list.empty() ? "" : ",") + h.host + ":" + std::to_string(h.slots);
    argv.insert(argv.end(), {"--host", list, "--mca", "plm_rsh_agent", s.rsh_agent.empty() ? "ssh" : s.rsh_agent});
    if (!s.network_interface.empty()) {
      argv.insert(argv.end(), {"--mca", "btl_tcp_if_include", s.network_interface, "--mca", "oob_tcp_if_include",
                               s.network_interface});
    }
  }
  argv.insert(argv.end(), {"--tag-output", "-n", std::to_string(s.ranks), s.worker, "--job", s.job, "--report-lines"});
  if (s.steps >= 0) argv.insert(argv.end(), {"--steps", std::to_string(s.steps)});
  argv.insert(argv.end(), s.worker_args.begin(), s.worker_args.end());
  return argv;
}

StatusOr<std::string> CaptureOutput(const std::vector<std::string>& argv,
                                    const std::vector<std::pair<std::string, std::string>>& env, double timeout_s,
                                    std::string* stderr_text) {
  TC_ASSIGN_OR_RETURN(ProcessResult r, RunProcess(argv, env, timeout_s));
  if (stderr_text != nullptr) *stderr_text += r.err;
  const std::string what = "'" + argv[0] + (argv.size() > 1 ? " " + argv[1] + " ...'" : "'");
  if (r.timed_out) return Status::Timeout(what + " ran past " + std::to_string(int(timeout_s)) + " s and was stopped");
  if (r.exit_code != 0) {
    const std::string how = r.signal != 0 ? "signal " + std::to_string(r.signal) : "exit " + std::to_string(r.exit_code);
    return Status::Internal(what + " failed (" + how + "): " + r.err.substr(r.err.size() > 2000 ? r.err.size() - 2000 : 0));
  }
  return r.out;
}

StatusOr<RunOutcome> RunLocal(const RunOptions& o) {
  FollowerOptions fo;
  fo.log_dir = o.log_dir;
  fo.metrics_path = o.metrics_path;
  fo.total_steps = o.total_steps;
  fo.progress_in_place = o.progress_in_place;
  fo.progress_every_s = o.progress_every_s;
  fo.on_metrics = o.on_metrics;
  RunFollower follower(fo);
  TC_RETURN_IF_ERROR(follower.Open());
  SignalScope signals;
  TC_ASSIGN_OR_RETURN(ChildProcess child, SpawnChild(o.argv, o.env));
  RunOutcome outcome;
  std::string out_partial, err_partial;
  bool out_open = true, err_open = true, exited = false;
  int wait_status = 0;
  double stop_started = 0, term_sent = 0;  // when a stop began; when mpirun was sent SIGTERM
  bool killed = false, asked = false;      // asked: the ranks were sent SIGUSR1 (stop after the step)
  int user_signals = 0;
  auto stop = [&](bool by_signal) {
    if (stop_started == 0) stop_started = MonotonicSeconds();
    if (by_signal) outcome.interrupted = true;
  };
  while (!exited || out_open || err_open) {
    std::vector<pollfd> fds;
    if (out_open) fds.push_back({child.out, POLLIN, 0});
    if (err_open) fds.push_back({child.err, POLLIN, 0});
    if (signals.fd() >= 0) fds.push_back({signals.fd(), POLLIN, 0});
    poll(fds.data(), fds.size(), 200);
    if (const int n = signals.Take(); n > 0) {
      user_signals += n;
      stop(true);
    }
    if (out_open) out_open = DrainLines(child.out, &out_partial, [&](const std::string& l) { follower.Line(l, false); });
    if (err_open) err_open = DrainLines(child.err, &err_partial, [&](const std::string& l) { follower.Line(l, true); });
    if (follower.failed()) stop(false);
    if (!exited && waitpid(child.pid, &wait_status, WNOHANG) == child.pid) exited = true;
    if (stop_started > 0 && !exited) {
      const double since = MonotonicSeconds() - stop_started;
      const bool graceful = outcome.interrupted && user_signals < 2 && !follower.failed() && o.stop_grace_s > 0;
      if (graceful && !asked) {
        kill(child.pid, SIGUSR1);
        asked = true;
        std::fprintf(stderr, "\ntencache-launch: stopping: every rank finishes its step and writes its checkpoint "
                             "(up to %.0f s); interrupt again to stop at once\n", o.stop_grace_s);
      }
      // A death: mpirun normally ends the job itself; give it 3 s. A signal:
      // once the ranks had their grace (at once without one, or at a second signal).
      const bool force = graceful ? since > o.stop_grace_s : outcome.interrupted || since > 3;
      if (term_sent == 0 && force) {
        kill(child.pid, SIGTERM);
        term_sent = MonotonicSeconds();
        outcome.forced = outcome.interrupted;
      }
      if (!killed && term_sent > 0 && MonotonicSeconds() - term_sent > 4) {
        kill(-child.pid, SIGKILL);
        for (pid_t p : follower.pids()) kill(p, SIGKILL);
        killed = true;
      }
    }
    if (exited && stop_started > 0 && !killed) {
      // mpirun is gone; make sure no rank outlives it.
      for (pid_t p : follower.pids()) kill(p, SIGKILL);
      killed = true;
    }
    if (exited && (out_open || err_open) && stop_started > 0 && MonotonicSeconds() - stop_started > 9) break;
  }
  close(child.out);
  close(child.err);
  if (!exited) waitpid(child.pid, &wait_status, 0);
  // Every rank that reported its PID is gone before the run is said to be over.
  for (pid_t p : follower.pids()) {
    for (int i = 0; i < 200 && Running(p); ++i) {
      if (stop_started > 0) kill(p, SIGKILL);
      poll(nullptr, 0, 10);
    }
  }
  if (stop_started > 0) outcome.stop_seconds = MonotonicSeconds() - stop_started;
  follower.Progress(true);
  outcome.steps_done = follower.steps_done();
  outcome.first_step = follower.first_step();
  outcome.first_step_s = follower.first_metrics_s();
  outcome.checkpoint_step = follower.checkpoint_step();
  outcome.failed_rank = follower.failed_rank();
  outcome.failure = follower.failure();
  outcome.failed_host = follower.failed_host();
  outcome.rank_hosts = follower.rank_hosts();
  outcome.rank_pids = follower.rank_pids();
  if (outcome.failed_rank >= 0) outcome.last_stderr = follower.LastStderr(outcome.failed_rank);
  if (WIFEXITED(wait_status)) outcome.exit_code = WEXITSTATUS(wait_status);
  else if (WIFSIGNALED(wait_status)) outcome.exit_code = 128 + WTERMSIG(wait_status);
  if (outcome.exit_code == 0 && (outcome.interrupted || follower.failed())) outcome.exit_code = 1;
  return outcome;
}

}  // namespace tencache
