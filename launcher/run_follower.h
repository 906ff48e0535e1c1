// RunFollower and the process plumbing shared by the local runner
// (launcher/local_runner.h: mpirun on this machine) and the Kubernetes runner
// (launcher/k8s_runner.h: the MPIJob launcher pod's log through `kubectl logs -f`).
// Both read the same lines — mpirun --tag-output's "[1,R]<stdout|stderr>:"
// prefixes around the worker's --report-lines protocol (common/report_lines.h)
// — so both file each rank's lines, pick rank 0's metrics and show the same
// progress line with this one class.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <deque>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "common/status.h"

namespace tencache {

// SIGINT / SIGTERM handlers that write to a self-pipe while the scope lives
// (one at a time per process); poll() fd() and read a byte per signal.
class SignalScope {
 public:
  SignalScope();
  ~SignalScope();
  SignalScope(const SignalScope&) = delete;
  SignalScope& operator=(const SignalScope&) = delete;
  int fd() const;
  // The signals that arrived since the last call (consumes them); 0: none.
  int Take();
};

// A started program: its PID (leader of its own process group) and the
// read ends of its stdout and stderr, both non-blocking.
struct ChildProcess {
  pid_t pid = -1;
  int out = -1, err = -1;
};
// Starts `argv` (never through a shell) in its own process group, with `env`
// added to the environment. IoError when no pipe or process can be made; a
// program that cannot be executed exits 127 after saying so on its stderr.
StatusOr<ChildProcess> SpawnChild(const std::vector<std::string>& argv,
                                  const std::vector<std::pair<std::string, std::string>>& env);

// Reads what is available on the non-blocking `fd`, calling `line` for every
// complete line (and for the rest at end of file). False at end of file.
bool DrainLines(int fd, std::string* partial, const std::function<void(const std::string&)>& line);

// A finished program's exit code (128 + signal when killed), output and errors.
struct ProcessResult {
  int exit_code = 0;
  int signal = 0;  // the signal that ended it, else 0
  bool timed_out = false;
  std::string out, err;
};
// Runs `argv` to completion (killed past `timeout_s`). IoError only when it
// cannot be started at all.
StatusOr<ProcessResult> RunProcess(const std::vector<std::string>& argv,
                                   const std::vector<std::pair<std::string, std::string>>& env, double timeout_s);

struct FollowerOptions {
  std::string log_dir;             // rank-N.out, rank-N.err and (when named) the untagged lines
  std::string untagged_log = "mpirun.err";  // file for lines without a rank tag; "": not filed
  std::string metrics_path;        // rank 0's metrics, one JSON object a line (appended)
  int total_steps = 0;             // for step k/N and the ETA
  bool progress_in_place = false;  // a terminal: one line rewritten in place; else a line every few seconds
  double progress_every_s = 5;
  std::function<void(const nlohmann::json&)> on_metrics;  // each metrics object as it arrives (may be empty)
};

// What a run's mpirun --tag-output stream has said, fed line by line: each
// rank's lines filed, rank 0's metrics picked into metrics_path and the
// progress line, the PIDs ranks reported, and the first rank that failed (the
// worker's own error line, or Open MPI's notice of a death or an abort).
class RunFollower {
 public:
  explicit RunFollower(FollowerOptions options);
  Status Open();  // creates log_dir, opens the files
  void Line(const std::string& line, bool from_stderr);
  // The progress line: "step k/N  loss  tok/s  stall  ETA"; `final_line` ends an in-place line.
  void Progress(bool final_line);
  // Prints `text` as its own line on stdout, clearing an in-place progress line first.
  void Note(const std::string& text);

  // PIDs of the ranks on this machine (those whose reported host is this
  // machine's hostname): the ones this process may signal. Ranks on other
  // hosts are stopped by mpirun through its daemons.
  const std::vector<pid_t>& pids() const { return pids_; }
  // The host each rank reported (its PID line), by rank.
  const std::map<int, std::string>& rank_hosts() const { return rank_hosts_; }
  // The PID each rank reported, by rank (on whichever host it runs).
  const std::map<int, pid_t>& rank_pids() const { return rank_pids_; }
  // The host a failure was on, where Open MPI or the rank's PID line says.
  const std::string& failed_host() const { return failed_host_; }
  int failed_rank() const { return failed_rank_; }
  const std::string& failure() const { return failure_; }
  bool failed() const { return failed_rank_ >= 0 || !failure_.empty(); }
  std::vector<std::string> LastStderr(int rank) const;
  int steps_done() const { return steps_done_; }
  // When rank 0's first metrics line arrived (MonotonicSeconds) and its
  // step; -1: none yet.
  double first_metrics_s() const { return first_metrics_s_; }
  int first_step() const { return first_step_; }
  // The newest checkpoint rank 0 said it committed or resumed from
  // (common/report_lines.h); -1: none said.
  int64_t checkpoint_step() const { return checkpoint_step_; }
  // Rank 0's metrics lines that were not JSON (each also said as a Note).
  int unreadable_metrics() const { return unreadable_metrics_; }

 private:
  std::ofstream& RankLog(int rank, bool err);
  void RankLine(int rank, bool err, const std::string& text);
  void Untagged(const std::string& line);

  FollowerOptions o_;
  std::ofstream untagged_, metrics_;
  std::map<int, std::unique_ptr<std::ofstream>> rank_out_, rank_err_;
  std::map<int, std::deque<std::string>> stderr_tail_;
  std::vector<pid_t> pids_;
  std::map<int, std::string> rank_hosts_;
  std::map<int, pid_t> rank_pids_;
  std::string failed_host_;
  bool failure_provisional_ = false;  // Open MPI's generic daemon notice, until a line names the node
  std::string local_host_;  // this machine's hostname
  int failed_rank_ = -1;
  std::string failure_;
  int steps_done_ = 0;
  double first_metrics_s_ = -1;
  int first_step_ = -1;
  int64_t checkpoint_step_ = -1;
  int unreadable_metrics_ = 0;
  nlohmann::json last_;
  std::vector<double> step_times_;
  double last_progress_ = 0;
  bool line_open_ = false;  // an in-place progress line is on the terminal
};

}  // namespace tencache
