#include "launcher/local_runner.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <regex>

#include "common/human_format.h"

namespace tencache {
namespace {

namespace fs = std::filesystem;

int g_signal_pipe[2] = {-1, -1};

void OnSignal(int signo) {
  const char c = char(signo);
  ssize_t ignored = write(g_signal_pipe[1], &c, 1);
  (void)ignored;
}

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Installs SIGINT / SIGTERM handlers that write to a self-pipe, for one run.
class SignalScope {
 public:
  SignalScope() {
    if (pipe2(g_signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0) return;
    struct sigaction sa {};
    sa.sa_handler = OnSignal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int_);
    sigaction(SIGTERM, &sa, &old_term_);
  }
  ~SignalScope() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
    close(g_signal_pipe[0]);
    close(g_signal_pipe[1]);
    g_signal_pipe[0] = g_signal_pipe[1] = -1;
  }
  int fd() const { return g_signal_pipe[0]; }

 private:
  struct sigaction old_int_ {}, old_term_ {};
};

struct Child {
  pid_t pid = -1;
  int out = -1, err = -1;
};

StatusOr<Child> Spawn(const RunOptions& o) {
  int out[2], err[2];
  if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) {
    return Status::IoError(std::string("pipe: ") + std::strerror(errno));
  }
  std::vector<char*> argv;
  for (const std::string& a : o.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) return Status::IoError(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    setpgid(0, 0);  // signals reach mpirun only through the launcher
    dup2(out[1], 1);
    dup2(err[1], 2);
    for (const auto& [k, v] : o.env) setenv(k.c_str(), v.c_str(), 1);
    execvp(argv[0], argv.data());
    std::fprintf(stderr, "tencache-launch: cannot start '%s': %s\n", argv[0], std::strerror(errno));
    _exit(127);
  }
  setpgid(pid, pid);
  close(out[1]);
  close(err[1]);
  fcntl(out[0], F_SETFL, O_NONBLOCK);
  fcntl(err[0], F_SETFL, O_NONBLOCK);
  return Child{pid, out[0], err[0]};
}

// What one run has seen, fed line by line.
class RunFollower {
 public:
  explicit RunFollower(const RunOptions& o) : o_(o) {}
  Status Open() {
    std::error_code ec;
    fs::create_directories(o_.log_dir, ec);
    if (ec) return Status::IoError(o_.log_dir + ": cannot create the log folder: " + ec.message());
    mpirun_err_.open(fs::path(o_.log_dir) / "mpirun.err");
    metrics_.open(o_.metrics_path, std::ios::app);
    if (!mpirun_err_ || !metrics_) return Status::IoError(o_.log_dir + ": cannot write the run's logs");
    return Status::Ok();
  }
  void Line(const std::string& line, bool from_stderr);
  void Progress(bool final_line);
  std::vector<pid_t> pids() const { return pids_; }
  int failed_rank() const { return failed_rank_; }
  const std::string& failure() const { return failure_; }
  bool failed() const { return failed_rank_ >= 0 || !failure_.empty(); }
  std::vector<std::string> LastStderr(int rank) const {
    auto it = stderr_tail_.find(rank);
    return it == stderr_tail_.end() ? std::vector<std::string>() : std::vector<std::string>(it->second.begin(), it->second.end());
  }
  int steps_done() const { return steps_done_; }

 private:
  std::ofstream& RankLog(int rank, bool err) {
    auto& f = (err ? rank_err_ : rank_out_)[rank];
    if (f == nullptr) {
      f = std::make_unique<std::ofstream>(fs::path(o_.log_dir) / ("rank-" + std::to_string(rank) + (err ? ".err" : ".out")));
    }
    return *f;
  }
  void RankLine(int rank, bool err, const std::string& text);
  void Untagged(const std::string& line);

  const RunOptions& o_;
  std::ofstream mpirun_err_, metrics_;
  std::map<int, std::unique_ptr<std::ofstream>> rank_out_, rank_err_;
  std::map<int, std::deque<std::string>> stderr_tail_;
  std::vector<pid_t> pids_;
  int failed_rank_ = -1;
  std::string failure_;
  int steps_done_ = 0;
  nlohmann::json last_;
  std::vector<double> step_times_;
  double last_progress_ = 0;
};

void RunFollower::Line(const std::string& line, bool from_stderr) {
  static const std::regex tagged(R"(^\[\d+,(\d+)\]<(stdout|stderr)>:\s?(.*)$)");
  std::smatch m;
  if (std::regex_match(line, m, tagged)) {
    RankLine(std::stoi(m[1].str()), m[2].str() == "stderr", m[3].str());
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
    }
    return;
  }
  if (text.rfind(kReportPidPrefix, 0) == 0) {
    pids_.push_back(pid_t(std::atol(text.c_str() + std::strlen(kReportPidPrefix))));
  } else if (rank == 0 && text.rfind(kReportMetricsPrefix, 0) == 0) {
    nlohmann::json j = nlohmann::json::parse(text.substr(std::strlen(kReportMetricsPrefix)), nullptr, false);
    if (j.is_discarded()) return;
    metrics_ << j.dump() << "\n" << std::flush;
    last_ = j;
    steps_done_ = j.value("step", 0) + 1;
    step_times_.push_back(j.value("step_time_s", 0.0));
    if (o_.on_metrics) o_.on_metrics(j);
    Progress(false);
  }
}

void RunFollower::Untagged(const std::string& line) {
  mpirun_err_ << line << "\n" << std::flush;
  // Open MPI's own words when a rank dies or aborts.
  static const std::regex died(R"(process rank (\d+) with PID \d+ on node (\S+) exited on signal (\d+) \(([^)]*)\))");
  static const std::regex exited(R"(process rank (\d+) with PID \d+ on node (\S+) exited with status (\d+))");
  static const std::regex aborted(R"(MPI_ABORT was invoked on rank (\d+))");
  std::smatch m;
  if (std::regex_search(line, m, died)) {
    if (failed_rank_ < 0 || failure_.empty()) {
      failed_rank_ = std::stoi(m[1].str());
      failure_ = "killed by signal " + m[3].str() + " (" + m[4].str() + ") on " + m[2].str();
    }
  } else if (std::regex_search(line, m, exited) && failed_rank_ < 0) {
    failed_rank_ = std::stoi(m[1].str());
    failure_ = "exited with status " + m[3].str() + " on " + m[2].str();
  } else if (std::regex_search(line, m, aborted) && failed_rank_ < 0) {
    failed_rank_ = std::stoi(m[1].str());
    failure_ = "called MPI_Abort";
  }
}

void RunFollower::Progress(bool final_line) {
  if (last_.is_null()) return;
  const double now = Now();
  if (!o_.progress_in_place && !final_line && now - last_progress_ < o_.progress_every_s) return;
  last_progress_ = now;
  std::vector<double> recent(step_times_.end() - std::min<size_t>(step_times_.size(), 20), step_times_.end());
  std::sort(recent.begin(), recent.end());
  const double step_s = recent.empty() ? 0 : recent[recent.size() / 2];
  const int left = std::max(0, o_.total_steps - steps_done_);
  char line[256];
  std::snprintf(line, sizeof line, "step %d/%d  loss %.4f  %s  stall %s  ETA %s", steps_done_, o_.total_steps,
                last_.value("loss", 0.0), FormatRate(last_.value("tokens_per_s", 0.0), "tok/s").c_str(),
                FormatDuration(last_.value("stall_s", 0.0)).c_str(), FormatDuration(left * step_s).c_str());
  if (o_.progress_in_place) {
    std::printf("\r%-100s", line);
    if (final_line) std::printf("\n");
  } else {
    std::printf("%s\n", line);
  }
  std::fflush(stdout);
}

// A process that still runs (a zombie has stopped: only its exit status is left).
bool Running(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!std::getline(stat, text)) return false;
  const size_t paren = text.rfind(')');
  return paren != std::string::npos && paren + 2 < text.size() && text[paren + 2] != 'Z';
}

// Splits what arrives on `fd` into lines; false at end of file.
bool Drain(int fd, std::string* partial, const std::function<void(const std::string&)>& line) {
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

}  // namespace

std::vector<std::string> MpirunCommand(const MpirunSpec& s) {
  std::vector<std::string> argv = {s.mpirun};
  if (s.as_root) argv.push_back("--allow-run-as-root");
  if (s.oversubscribe) argv.push_back("--oversubscribe");
  argv.insert(argv.end(), {"--tag-output", "-n", std::to_string(s.ranks), s.worker, "--job", s.job, "--report-lines"});
  if (s.steps >= 0) argv.insert(argv.end(), {"--steps", std::to_string(s.steps)});
  argv.insert(argv.end(), s.worker_args.begin(), s.worker_args.end());
  return argv;
}

StatusOr<std::string> CaptureOutput(const std::vector<std::string>& argv,
                                    const std::vector<std::pair<std::string, std::string>>& env, double timeout_s,
                                    std::string* stderr_text) {
  RunOptions o;
  o.argv = argv;
  o.env = env;
  TC_ASSIGN_OR_RETURN(Child child, Spawn(o));
  std::string out, err, out_partial, err_partial;
  bool out_open = true, err_open = true;
  const double deadline = Now() + timeout_s;
  bool timed_out = false;
  while (out_open || err_open) {
    std::vector<pollfd> fds;
    if (out_open) fds.push_back({child.out, POLLIN, 0});
    if (err_open) fds.push_back({child.err, POLLIN, 0});
    poll(fds.data(), fds.size(), 200);
    if (out_open) out_open = Drain(child.out, &out_partial, [&](const std::string& l) { out += l + "\n"; });
    if (err_open) err_open = Drain(child.err, &err_partial, [&](const std::string& l) { err += l + "\n"; });
    if (Now() > deadline) {
      kill(-child.pid, SIGKILL);
      timed_out = true;
      break;
    }
  }
  close(child.out);
  close(child.err);
  int status = 0;
  waitpid(child.pid, &status, 0);
  if (stderr_text != nullptr) *stderr_text += err;
  const std::string what = "'" + argv[0] + (argv.size() > 1 ? " " + argv[1] + " ...'" : "'");
  if (timed_out) return Status::Timeout(what + " ran past " + std::to_string(int(timeout_s)) + " s and was stopped");
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return Status::Internal(what + " failed (" + (WIFEXITED(status) ? "exit " + std::to_string(WEXITSTATUS(status))
                                                                     : "signal " + std::to_string(WTERMSIG(status))) +
                            "): " + err.substr(err.size() > 2000 ? err.size() - 2000 : 0));
  }
  return out;
}

StatusOr<RunOutcome> RunLocal(const RunOptions& o) {
  RunFollower follower(o);
  TC_RETURN_IF_ERROR(follower.Open());
  SignalScope signals;
  TC_ASSIGN_OR_RETURN(Child child, Spawn(o));
  RunOutcome outcome;
  std::string out_partial, err_partial;
  bool out_open = true, err_open = true, exited = false;
  int wait_status = 0;
  double stop_started = 0, term_sent = 0;  // when a stop began; when mpirun was sent SIGTERM
  bool killed = false;
  auto stop = [&](bool by_signal) {
    if (stop_started == 0) stop_started = Now();
    if (by_signal) outcome.interrupted = true;
  };
  while (!exited || out_open || err_open) {
    std::vector<pollfd> fds;
    if (out_open) fds.push_back({child.out, POLLIN, 0});
    if (err_open) fds.push_back({child.err, POLLIN, 0});
    if (signals.fd() >= 0) fds.push_back({signals.fd(), POLLIN, 0});
    poll(fds.data(), fds.size(), 200);
    char sig;
    while (signals.fd() >= 0 && read(signals.fd(), &sig, 1) == 1) stop(true);
    if (out_open) out_open = Drain(child.out, &out_partial, [&](const std::string& l) { follower.Line(l, false); });
    if (err_open) err_open = Drain(child.err, &err_partial, [&](const std::string& l) { follower.Line(l, true); });
    if (follower.failed()) stop(false);
    if (!exited && waitpid(child.pid, &wait_status, WNOHANG) == child.pid) exited = true;
    if (stop_started > 0 && !exited) {
      const double since = Now() - stop_started;
      // A death: mpirun normally ends the job itself; give it 3 s. A signal: at once.
      if (term_sent == 0 && (outcome.interrupted || since > 3)) {
        kill(child.pid, SIGTERM);
        term_sent = Now();
      }
      if (!killed && term_sent > 0 && Now() - term_sent > 4) {
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
    if (exited && (out_open || err_open) && stop_started > 0 && Now() - stop_started > 9) break;
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
  if (stop_started > 0) outcome.stop_seconds = Now() - stop_started;
  follower.Progress(true);
  outcome.steps_done = follower.steps_done();
  outcome.failed_rank = follower.failed_rank();
  outcome.failure = follower.failure();
  if (outcome.failed_rank >= 0) outcome.last_stderr = follower.LastStderr(outcome.failed_rank);
  if (WIFEXITED(wait_status)) outcome.exit_code = WEXITSTATUS(wait_status);
  else if (WIFSIGNALED(wait_status)) outcome.exit_code = 128 + WTERMSIG(wait_status);
  if (outcome.exit_code == 0 && (outcome.interrupted || follower.failed())) outcome.exit_code = 1;
  return outcome;
}

}  // namespace tencache
