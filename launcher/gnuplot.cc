#include "launcher/gnuplot.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

namespace tencache {

// The executable `name` in a PATH directory, or "" when there is none.
std::string FindOnPath(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path == nullptr ? "" : path);
  for (std::string dir; std::getline(dirs, dir, ':');) {
    std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    struct stat st;
    if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
  }
  return "";
}

// Runs exe with args (args[0] is the program name) in `cwd`, stdin from
// /dev/null, and waits at most timeout_s. No shell is involved.
StatusOr<ProcessResult> RunProcess(const std::string& exe, const std::vector<std::string>& args,
                                   const std::string& cwd, int timeout_s) {
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return Status::IoError(std::string("pipe: ") + std::strerror(errno));
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    return Status::IoError(std::string("fork: ") + std::strerror(errno));
  }
  if (pid == 0) {  // child: only async-signal-safe calls from here
    const int null_fd = ::open("/dev/null", O_RDONLY);
    if (null_fd >= 0) ::dup2(null_fd, 0);
    ::dup2(fds[1], 1);
    ::dup2(fds[1], 2);
    if (!cwd.empty() && ::chdir(cwd.c_str()) != 0) ::_exit(126);
    ::execv(exe.c_str(), argv.data());
    ::_exit(127);
  }
  ::close(fds[1]);
  ProcessResult r;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  bool timed_out = false;
  for (;;) {
    using std::chrono::milliseconds;
    const auto left = std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      ::kill(pid, SIGKILL);
      break;
    }
    pollfd p = {fds[0], POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) continue;  // timeout is checked at the top
    char buf[4096];
    const ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    r.output.append(buf, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  int st = 0;
  while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  r.exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  if (timed_out) r.output += "\n(killed after " + std::to_string(timeout_s) + " s)";
  return r;
}

// Finds gnuplot and asks it once which PNG terminal it has.
Gnuplot FindGnuplot(int timeout_s) {
  Gnuplot g;
  g.exe = FindOnPath("gnuplot");
  if (g.exe.empty()) return g;
  StatusOr<ProcessResult> terms = RunProcess(g.exe, {"gnuplot", "-e", "set terminal"}, "", timeout_s);
  g.terminal = terms.ok() && terms->output.find("pngcairo") != std::string::npos ? "pngcairo" : "png";
  return g;
}

// A gnuplot string literal: single quotes, an inner quote doubled.
std::string GnuplotQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

std::string GnuplotHeader(const Gnuplot& g, const std::string& name, int width, int height) {
  std::ostringstream out;
  out << "# Drawn by tencache-launch report. Rerun: cd into this folder, then gnuplot " << name << ".gp\n"
      << "set terminal " << g.terminal << " size " << width << "," << height
      << (g.terminal == "pngcairo" ? " font 'sans,11'" : "") << " noenhanced\n"
      << "set output " << GnuplotQuote("../" + name + ".png") << "\n"
      << "set datafile missing 'NaN'\nset grid\nset key outside top center horizontal\n";
  return out.str();
}

std::string GnuplotNumber(double v) {
  if (std::isnan(v)) return "NaN";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

// "[0:top]" with headroom above the largest value, so a flat series does not
// hide under the border; "[0:1]" for an all-zero series (no "empty range" warning).
std::string GnuplotRangeFromZero(double max) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "[0:%.6g]", max > 0 ? max * 1.15 : 1.0);
  return buf;
}

StatusOr<std::string> DrawWithGnuplot(const Gnuplot& g, const std::string& run_dir, const std::string& name,
                                      const std::string& data, const std::string& script, int timeout_s) {
  const std::string dir = run_dir + "/plots";
  const std::string gp = dir + "/" + name + ".gp";
  TC_RETURN_IF_ERROR(WriteFileAtomically(dir + "/" + name + ".dat", data));
  TC_RETURN_IF_ERROR(WriteFileAtomically(gp, script));
  const std::string png = run_dir + "/" + name + ".png";
  ::unlink(png.c_str());  // a picture from an earlier render is no proof
  // gnuplot draws into PNG.tmp (a script of its own, removed after), renamed
  // over PNG once whole; the saved NAME.gp draws NAME.png when rerun.
  const std::string output = "set output " + GnuplotQuote("../" + name + ".png") + "\n";
  std::string drawing = script;
  if (const size_t at = drawing.find(output); at != std::string::npos) {
    drawing.replace(at, output.size(), "set output " + GnuplotQuote("../" + name + ".png.tmp") + "\n");
  }
  const std::string run_gp = name + ".drawing.gp";
  TC_RETURN_IF_ERROR(WriteFileAtomically(dir + "/" + run_gp, drawing));
  StatusOr<ProcessResult> run = RunProcess(g.exe, {"gnuplot", run_gp}, dir, timeout_s);
  ::unlink((dir + "/" + run_gp).c_str());
  if (!run.ok()) return run.status().WithContext("gnuplot " + gp);
  if (run->exit_code != 0 || std::rename((png + ".tmp").c_str(), png.c_str()) != 0) {
    ::unlink((png + ".tmp").c_str());
    if (run->exit_code == 0) return Status::Internal("gnuplot " + gp + " wrote no " + name + ".png: " + run->output);
    return Status::Internal("gnuplot " + gp + " failed (exit " + std::to_string(run->exit_code) + "): " + run->output);
  }
  return run->output;
}

}  // namespace tencache
