#include "launcher/run_follower.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <regex>
#include <sstream>

#include "common/human_format.h"
#include "common/report_lines.h"
#include "common/stats.h"

namespace tencache {
namespace {

namespace fs = std::filesystem;

int g_signal_pipe[2] = {-1, -1};
struct sigaction g_old_int {}, g_old_term {};

void OnSignal(int signo) {
  const char c = char(signo);
  ssize_t ignored = write(g_signal_pipe[1], &c, 1);
  (void)ignored;
}

}  // namespace

SignalScope::SignalScope() {
  if (pipe2(g_signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
    g_signal_pipe[0] = g_signal_pipe[1] = -1;
    return;
  }
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &g_old_int);
  sigaction(SIGTERM, &sa, &g_old_term);
}

SignalScope::~SignalScope() {
  if (g_signal_pipe[0] < 0) return;
  sigaction(SIGINT, &g_old_int, nullptr);
  sigaction(SIGTERM, &g_old_term, nullptr);
  close(g_signal_pipe[0]);
  close(g_signal_pipe[1]);
  g_signal_pipe[0] = g_signal_pipe[1] = -1;
}

int SignalScope::fd() const { return g_signal_pipe[0]; }

int SignalScope::Take() {
  int n = 0;
  char sig;
  while (g_signal_pipe[0] >= 0 && read(g_signal_pipe[0], &sig, 1) == 1) ++n;
  return n;
}

StatusOr<ChildProcess> SpawnChild(const std::vector<std::string>& args,
                                  const std::vector<std::pair<std::string, std::string>>& env) {
  if (args.empty()) return Status::InvalidArgument("no program to start");
  int out[2], err[2];
  if (pipe2(out, O_CLOEXEC) != 0) return Status::IoError(std::string("pipe: ") + std::strerror(errno));
  if (pipe2(err, O_CLOEXEC) != 0) {
    close(out[0]);
    close(out[1]);
    return Status::IoError(std::string("pipe: ") + std::strerror(errno));
  }
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) {
    for (int fd : {out[0], out[1], err[0], err[1]}) close(fd);
    return Status::IoError(std::string("fork: ") + std::strerror(errno));
  }
  if (pid == 0) {
    setpgid(0, 0);  // signals reach the child only through the launcher
    dup2(out[1], 1);
    dup2(err[1], 2);
    for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
    execvp(argv[0], argv.data());
    std::fprintf(stderr, "tencache-launch: cannot start '%s': %s\n", argv[0], std::strerror(errno));
    _exit(127);
  }
  setpgid(pid, pid);
  close(out[1]);
  close(err[1]);
  fcntl(out[0], F_SETFL, O_NONBLOCK);
  fcntl(err[0], F_SETFL, O_NONBLOCK);
  return ChildProcess{pid, out[0], err[0]};
}

bool DrainLines(int fd, std::string* partial, const std::function<void(const std::string&)>& line) {
  char buf[65536];
  while (true) {
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n == 0) {
      if (!partial->empty()) line(*partial);
      partial->clear();
      return false;
    }
    if (n < 0) return errno == EAGAIN || errno == EINTR;
    partial->append(buf, size_t(n));
    size_t start = 0, nl;
    while ((nl = partial->find('\n', start)) != std::string::npos) {
      line(partial->substr(start, nl - start));
      start = nl + 1;
    }
    partial->erase(0, start);
  }
}

StatusOr<ProcessResult> RunProcess(const std::vector<std::string>& argv,
                                   const std::vector<std::pair<std::string, std::string>>& env, double timeout_s) {
  TC_ASSIGN_OR_RETURN(ChildProcess child, SpawnChild(argv, env));
  ProcessResult r;
  std::string out_partial, err_partial;
  bool out_open = true, err_open = true;
  const double deadline = MonotonicSeconds() + timeout_s;
  while (out_open || err_open) {
    std::vector<pollfd> fds;
    if (out_open) fds.push_back({child.out, POLLIN, 0});
    if (err_open) fds.push_back({child.err, POLLIN, 0});
    poll(fds.data(), fds.size(), 200);
    if (out_open) out_open = DrainLines(child.out, &out_partial, [&](const std::string& l) { r.out += l + "\n"; });
    if (err_open) err_open = DrainLines(child.err, &err_partial, [&](const std::string& l) { r.err += l + "\n"; });
    if (MonotonicSeconds() > deadline) {
      kill(-child.pid, SIGKILL);
      r.timed_out = true;
      break;
    }
  }
  close(child.out);
  close(child.err);
  int status = 0;
  waitpid(child.pid, &status, 0);
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  else if (WIFSIGNALED(status)) r.exit_code = 128 + (r.signal = WTERMSIG(status));
  return r;
}

RunFollower::RunFollower(FollowerOptions options) : o_(std::move(options)) {
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  local_host_ = host;
}

Status RunFollower::Open() {
  std::error_code ec;
  fs::create_directories(o_.log_dir, ec);
  if (ec) return Status::IoError(o_.log_dir + ": cannot create the log folder: " + ec.message());
  if (!o_.untagged_log.empty()) untagged_.open(fs::path(o_.log_dir) / o_.untagged_log);
  metrics_.open(o_.metrics_path, std::ios::app);
  if ((!o_.untagged_log.empty() && !untagged_) || !metrics_) {
    return Status::IoError(o_.log_dir + ": cannot write the run's logs");
  }
  return Status::Ok();
}

std::vector<std::string> RunFollower::LastStderr(int rank) const {
  auto it = stderr_tail_.find(rank);
  return it == stderr_tail_.end() ? std::vector<std::string>()
                                  : std::vector<std::string>(it->second.begin(), it->second.end());
}

std::ofstream& RunFollower::RankLog(int rank, bool err) {
  auto& f = (err ? rank_err_ : rank_out_)[rank];
  if (f == nullptr) {
    f = std::make_unique<std::ofstream>(fs::path(o_.log_dir) /
                                        ("rank-" + std::to_string(rank) + (err ? ".err" : ".out")));
  }
  return *f;
}

void RunFollower::Line(const std::string& line, bool from_stderr) {
  (void)from_stderr;  // mpirun --tag-output says which stream each rank's line came from
  static const std::regex tagged(R"(^(\[\d+,(\d+)\]<(stdout|stderr)>:)\s?(.*)$)");
  std::smatch m;
  if (std::regex_match(line, m, tagged)) {
    // Open MPI tags each chunk it forwards (about 1 KiB), not each line: a
    // longer line carries its tag again inside, where a chunk ended.
    const std::string tag = m[1].str();
    std::string text = m[4].str();
    for (size_t at; (at = text.find(tag)) != std::string::npos;) text.erase(at, tag.size());
    RankLine(std::stoi(m[2].str()), m[3].str() == "stderr", text);
  } else {
    Untagged(line);
  }
}

void RunFollower::RankLine(int rank, bool err, const std::string& text) {
  RankLog(rank, err) << text << "\n" << std::flush;
  if (err) {
    auto& tail = stderr_tail_[rank];
    tail.push_back(text);
    if (tail.size() > 12) tail.pop_front();
    static const std::regex worker_error(R"(^tencache-worker \(rank (\d+)\): (.*)$)");
    std::smatch m;
    if (failed_rank_ < 0 && std::regex_match(text, m, worker_error)) {
      failed_rank_ = std::stoi(m[1].str());
      failure_ = m[2].str();
      if (auto h = rank_hosts_.find(failed_rank_); h != rank_hosts_.end()) failed_host_ = h->second;
    }
    return;
  }
  if (text.rfind(kReportPidPrefix, 0) == 0) {  // "PID HOST"
    std::istringstream in(text.substr(std::strlen(kReportPidPrefix)));
    long pid = 0;
    std::string host;
    in >> pid >> host;
    rank_hosts_[rank] = host;
    if (pid > 0) rank_pids_[rank] = pid_t(pid);
    if (pid > 0 && (host.empty() || host == local_host_)) pids_.push_back(pid_t(pid));
  } else if (rank == 0 && text.rfind(kWorkerLogPrefix, 0) == 0) {
    const std::string said = text.substr(std::strlen(kWorkerLogPrefix));
    for (const char* prefix : {kReportCheckpointSaid, kReportResumedSaid}) {
      if (said.rfind(prefix, 0) != 0) continue;
      const long long step = std::atoll(said.c_str() + std::strlen(prefix));
      if (step > 0) checkpoint_step_ = std::max<int64_t>(checkpoint_step_, step);
    }
  } else if (rank == 0 && text.rfind(kReportMetricsPrefix, 0) == 0) {
    nlohmann::json j = nlohmann::json::parse(text.substr(std::strlen(kReportMetricsPrefix)), nullptr, false);
    if (j.is_discarded() || !j.is_object()) {  // said, not dropped in silence
      ++unreadable_metrics_;
      Note("tencache-launch: rank 0's metrics line " + std::to_string(steps_done_ + unreadable_metrics_) +
           " is not readable JSON; it stays in logs/rank-0.out, not in metrics.jsonl");
      return;
    }
    metrics_ << j.dump() << "\n" << std::flush;
    if (first_metrics_s_ < 0) {
      first_metrics_s_ = MonotonicSeconds();
      first_step_ = j.value("step", 0);
    }
    last_ = j;
    steps_done_ = j.value("step", 0) + 1;
    step_times_.push_back(j.value("step_time_s", 0.0));
    if (o_.on_metrics) o_.on_metrics(j);
    Progress(false);
  }
}

void RunFollower::Untagged(const std::string& line) {
  if (untagged_.is_open()) untagged_ << line << "\n" << std::flush;
  // Open MPI's own words when a rank dies or aborts.
  static const std::regex died(R"(process rank (\d+) with PID \d+ on node (\S+) exited on signal (\d+) \(([^)]*)\))");
  static const std::regex exited(R"(process rank (\d+) with PID \d+ on node (\S+) exited with status (\d+))");
  static const std::regex aborted(R"(MPI_ABORT was invoked on rank (\d+))");
  // A node lost mid-run (its daemon died or stopped answering), or one that
  // could not be reached at the start.
  static const std::regex lost(R"(Remote daemon:\s*\[\[[^\]]*\],\d+\] on node (\S+))");
  static const std::regex unreachable(R"(ORTE was unable to reliably start one or more daemons)");
  static const std::regex peer(R"(^\s*Peer host:\s+(\S+))");
  std::smatch m;
  if (std::regex_search(line, m, died)) {
    if (failed_rank_ < 0 || failure_.empty()) {
      failed_rank_ = std::stoi(m[1].str());
      failed_host_ = m[2].str();
      failure_ = "killed by signal " + m[3].str() + " (" + m[4].str() + ") on " + m[2].str();
    }
  } else if (std::regex_search(line, m, lost)) {
    if (failed_host_.empty()) {
      failed_host_ = m[1].str();
      failure_ = "node " + failed_host_ + " was lost: its Open MPI daemon died or stopped answering";
    }
  } else if (std::regex_search(line, m, unreachable)) {
    // Open MPI says this too when a daemon (or its launch agent) goes away
    // mid-run; a "Peer host" notice that follows names the node.
    if (failure_.empty()) {
      failure_ = steps_done_ == 0 ? "mpirun could not start its daemon on every host (logs/mpirun.err)"
                                  : "an Open MPI daemon on another host went away (the node died or its launch agent "
                                    "exited)";
      failure_provisional_ = true;
    }
  } else if (std::regex_search(line, m, peer)) {
    if (failed_host_.empty()) failed_host_ = m[1].str();
    if (failure_.empty() || failure_provisional_) {
      failure_ = "the connection to " + m[1].str() + " was lost: its rank or its Open MPI daemon died";
      failure_provisional_ = false;
    }
  } else if (std::regex_search(line, m, exited) && failed_rank_ < 0) {
    failed_rank_ = std::stoi(m[1].str());
    failed_host_ = m[2].str();
    failure_ = "exited with status " + m[3].str() + " on " + m[2].str();
  } else if (std::regex_search(line, m, aborted) && failed_rank_ < 0) {
    failed_rank_ = std::stoi(m[1].str());
    failure_ = "called MPI_Abort";
  }
}

void RunFollower::Progress(bool final_line) {
  if (last_.is_null()) return;
  const double now = MonotonicSeconds();
  if (!o_.progress_in_place && !final_line && now - last_progress_ < o_.progress_every_s) return;
  last_progress_ = now;
  const double step_s =
      Median(std::vector<double>(step_times_.end() - std::min<size_t>(step_times_.size(), 20), step_times_.end()));
  const int left = std::max(0, o_.total_steps - steps_done_);
  char line[256];
  std::snprintf(line, sizeof line, "step %d/%d  loss %.4f  %s  stall %s  ETA %s", steps_done_, o_.total_steps,
                last_.value("loss", 0.0), FormatRate(last_.value("tokens_per_s", 0.0), "tok/s").c_str(),
                FormatDuration(last_.value("stall_s", 0.0)).c_str(), FormatDuration(left * step_s).c_str());
  if (o_.progress_in_place) {
    std::printf("\r%-100s", line);
    line_open_ = !final_line;
    if (final_line) std::printf("\n");
  } else {
    std::printf("%s\n", line);
  }
  std::fflush(stdout);
}

void RunFollower::Note(const std::string& text) {
  if (line_open_) std::printf("\r%-100s\r", "");
  std::printf("%s\n", text.c_str());
  std::fflush(stdout);
  if (line_open_) {
    line_open_ = false;
    Progress(false);  // the progress line again, below the note
  }
}

}  // namespace tencache
