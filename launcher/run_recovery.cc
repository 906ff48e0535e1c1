#include "launcher/run_recovery.h"

#include <poll.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/clock.h"
#include "launcher/run_follower.h"
#include "launcher/run_pipeline.h"

namespace tencache {

namespace fs = std::filesystem;

std::string FailureSignature(const RunOutcome& o) {
  std::string what;
  for (char c : o.failure) {
    if (!std::isdigit(static_cast<unsigned char>(c))) what += c;
  }
  return std::to_string(o.failed_rank) + "|" + what + "|" + std::to_string(o.steps_done);
}

bool FailedTheSameWayTwice(const std::vector<RunAttempt>& attempts) {
  if (attempts.size() < 2) return false;
  const RunOutcome& last = attempts.back().outcome;
  const RunOutcome& before = attempts[attempts.size() - 2].outcome;
  return last.exit_code != 0 && before.exit_code != 0 && FailureSignature(last) == FailureSignature(before);
}

std::string AttemptCause(const RunOutcome& o) {
  if (o.interrupted) return "interrupted (SIGINT / SIGTERM to tencache-launch)";
  if (o.exit_code == 0) return "finished";
  return WhoFailed(o) + ": " + (o.failure.empty() ? "exit code " + std::to_string(o.exit_code) : o.failure);
}

Status TrimMetrics(const std::string& path, int64_t step, int64_t* removed, double* removed_s) {
  *removed = 0;
  *removed_s = 0;
  std::ifstream in(path);
  if (!in.is_open()) return Status::Ok();  // no step reported
  std::string kept, line;
  while (std::getline(in, line)) {
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    const bool metrics = !j.is_discarded() && j.is_object() && j.contains("step") && j["step"].is_number();
    if (metrics && j["step"].get<int64_t>() >= step) {
      ++*removed;
      if (j.contains("step_time_s") && j["step_time_s"].is_number()) *removed_s += j["step_time_s"].get<double>();
      continue;
    }
    kept += line + "\n";
  }
  in.close();
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << kept;
    if (!out.flush()) return Status::IoError(tmp + ": cannot write the kept metrics");
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) return Status::IoError(path + ": cannot replace it: " + ec.message());
  return Status::Ok();
}

Status KeepAttemptLogs(const RunFolder& folder, int attempt) {
  const fs::path logs = folder.Path("logs");
  const fs::path kept = folder.Path("logs.attempt-" + std::to_string(attempt));
  std::error_code ec;
  if (!fs::exists(logs, ec)) return Status::Ok();
  fs::remove_all(kept, ec);
  fs::rename(logs, kept, ec);
  if (ec) return Status::IoError(logs.string() + ": cannot keep it as " + kept.string() + ": " + ec.message());
  return Status::Ok();
}

bool WaitBeforeRestart(double seconds) {
  SignalScope signals;
  const double end = MonotonicSeconds() + seconds;
  for (;;) {
    if (signals.Take() != 0) return false;
    const double left = end - MonotonicSeconds();
    if (left <= 0) return true;
    pollfd p{signals.fd(), POLLIN, 0};
    poll(&p, 1, int(std::ceil(std::min(left, 1.0) * 1000)));
  }
}

namespace {

nlohmann::ordered_json NumberOrNull(double v, bool known) { return known ? nlohmann::ordered_json(v) : nullptr; }

}  // namespace

nlohmann::ordered_json AttemptsToJson(const std::vector<RunAttempt>& attempts, double price_per_hour) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const RunAttempt& a : attempts) {
    const RunOutcome& o = a.outcome;
    nlohmann::ordered_json j = {{"attempt", a.number},
                                {"started_at", a.started_at},
                                {"seconds", a.ended_s - a.started_s},
                                {"status", RunStatus(o)},
                                {"cause", AttemptCause(o)},
                                {"failed_rank", o.failed_rank},
                                {"first_step", o.first_step >= 0 ? nlohmann::ordered_json(o.first_step) : nullptr},
                                {"steps_done", o.steps_done}};
    if (a.restarted) {
      const bool recovered = a.recover_s >= 0;
      j["resumed_at_step"] = a.resumed_at;
      j["steps_lost"] = a.steps_lost;
      j["lost_step_seconds"] = a.lost_step_s;
      j["recover_seconds"] = NumberOrNull(a.recover_s, recovered);
      j["recovery_cost_usd"] =
          NumberOrNull((a.lost_step_s + std::max(0.0, a.recover_s)) * price_per_hour / 3600.0,
                       recovered && price_per_hour > 0);
    }
    out.push_back(std::move(j));
  }
  return out;
}

}  // namespace tencache
