// LocalRunner: runs a job's ranks on this machine under Open MPI and follows
// them. mpirun is started with an argument vector (never a shell string), in
// its own process group, with --tag-output so that every line names its rank;
// the runner files each rank's stdout and stderr under OUT/logs/, picks rank 0's
// per-step metrics out of its stdout (the worker's --report-lines protocol) into
// OUT/metrics.jsonl and a progress line, and when a rank dies names it with its
// last stderr lines. A first SIGINT / SIGTERM asks every rank, on every host, to
// stop after its current step and write its checkpoint (SIGUSR1, which mpirun
// forwards to the ranks; a SIGTERM to mpirun would have Open MPI kill them a
// second later, mid-checkpoint), for up to RunOptions::stop_grace_s; past
// that, at a second signal, or after a death, mpirun is asked to end the job
// (SIGTERM) and 4 s later mpirun and every rank that reported its PID are killed.
// One run at a time per process (it installs signal handlers while running).
// The line following (rank logs, metrics, progress) is RunFollower in
// launcher/run_follower.h, shared with the Kubernetes runner.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/job_spec.h"
#include "common/report_lines.h"
#include "common/status.h"

namespace tencache {

struct MpirunSpec {
  std::string mpirun = "mpirun";
  std::string worker;          // path of tencache-worker
  std::string job;             // the resolved job file
  int ranks = 1;
  int steps = -1;              // --steps for the worker; -1: train.steps
  bool as_root = false;        // add --allow-run-as-root
  bool oversubscribe = true;   // more ranks than cores is allowed (simulated devices)
  std::vector<std::string> worker_args;  // extra worker flags
  // cluster.target hosts: `--host H1:S1,H2:S2`, the launch agent (plm_rsh_agent)
  // and the interface of MPI's TCP traffic and out-of-band channel. Empty: this machine.
  std::vector<HostSlots> hosts;
  std::string rsh_agent;
  std::string network_interface;
};
// The mpirun argument vector for `spec` (argv[0] is spec.mpirun).
std::vector<std::string> MpirunCommand(const MpirunSpec& spec);

struct RunOptions {
  std::vector<std::string> argv;   // what to start (MpirunCommand)
  std::vector<std::pair<std::string, std::string>> env;  // added to the environment
  std::string log_dir;             // per-rank logs: rank-N.out, rank-N.err, mpirun.err
  std::string metrics_path;        // rank 0's metrics, one JSON object a line
  int total_steps = 0;             // for step k/N and the ETA
  bool progress_in_place = false;  // a terminal: one line rewritten in place; else a line every few seconds
  double progress_every_s = 5;
  // After a first signal, how long the ranks may take to finish the step and
  // write a checkpoint before they are stopped by force; 0: at once.
  double stop_grace_s = 0;
  // Called with each metrics object as it arrives (may be empty).
  std::function<void(const nlohmann::json&)> on_metrics;
};

struct RunOutcome {
  int exit_code = 0;                      // 0: every rank finished
  bool interrupted = false;               // stopped by SIGINT / SIGTERM
  bool forced = false;                    // the ranks were stopped before they finished stopping
  int failed_rank = -1;                   // the rank that died first, where known
  std::string failed_host;                // the host it ran on, or the node that was lost, where known
  std::map<int, std::string> rank_hosts;  // the host each rank said it runs on (its PID line)
  std::map<int, pid_t> rank_pids;         // the PID each rank said it has
  std::string failure;                    // what mpirun or the rank said
  std::vector<std::string> last_stderr;   // that rank's last stderr lines
  int steps_done = 0;                     // the last step reported + 1 (a resumed run counts from 0)
  int first_step = -1;                    // the first step reported (0, or a resumed run's first); -1: none
  double first_step_s = -1;               // MonotonicSeconds when it was reported; -1: none
  int64_t checkpoint_step = -1;           // the newest checkpoint rank 0 said it committed or resumed from; -1: none
  double stop_seconds = 0;                // from the signal or death to every rank gone
};

// Runs `argv` to completion and returns its stdout; stderr is appended to
// `stderr_text` when given. InvalidArgument-free: IoError when it cannot start,
// Timeout (after killing it) past `timeout_s`, Internal with its stderr when it
// exits non-zero.
StatusOr<std::string> CaptureOutput(const std::vector<std::string>& argv,
                                    const std::vector<std::pair<std::string, std::string>>& env, double timeout_s,
                                    std::string* stderr_text = nullptr);

// Runs to completion. A Status only when the program cannot be started or the
// log folder written; a failed run is a RunOutcome with exit_code != 0.
StatusOr<RunOutcome> RunLocal(const RunOptions& options);

}  // namespace tencache
