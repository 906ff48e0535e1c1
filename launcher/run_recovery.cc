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
      if (!a.replanned.empty()) j["replanned"] = a.replanned;
    }
    out.push_back(std::move(j));
  }
  return out;
}

nlohmann::ordered_json SpotAgainstAttempts(const SpotEstimate& e, bool on_spot, int nodes,
                                           const nlohmann::ordered_json& attempts) {
  if (!on_spot || !e.known || e.mtbp_s <= 0 || !attempts.is_array()) return nullptr;
  auto num = [](const nlohmann::ordered_json& a, const char* key) {
    return a.is_object() && a.contains(key) && a[key].is_number() ? a[key].get<double>() : -1.0;
  };
  double run_s = 0, measured_s = 0, measured_usd = 0;
  int failed = 0, restarts = 0, timed = 0, priced = 0;
  for (const auto& a : attempts) {
    run_s += std::max(0.0, num(a, "seconds"));
    if (a.is_object() && a.value("status", "") == "failed") ++failed;
    if (num(a, "resumed_at_step") < 0) continue;
    ++restarts;
    if (const double recover = num(a, "recover_seconds"); recover >= 0) {
      measured_s += std::max(0.0, num(a, "lost_step_seconds")) + recover;
      ++timed;
    }
    if (const double usd = num(a, "recovery_cost_usd"); usd >= 0) {
      measured_usd += usd;
      ++priced;
    }
  }
  const double price_per_hour = e.price_per_node_hour * std::max(1, nodes);
  const double expected = run_s / e.mtbp_s;
  const bool per_known = e.preemptions > 0;
  const double per_s = per_known ? (e.lost_hours + e.restart_hours) * 3600.0 / e.preemptions : 0;
  nlohmann::ordered_json j = {{"rate_source", e.rate_source},
                              {"rate_assumed", e.rate_assumed},
                              {"mtbp_hours", e.mtbp_s / 3600.0},
                              {"run_hours", run_s / 3600.0},
                              {"expected_preemptions", expected},
                              {"failed_attempts", failed},
                              {"restarts", restarts},
                              {"expected_seconds_per_preemption", NumberOrNull(per_s, per_known)},
                              {"measured_seconds_per_restart", NumberOrNull(timed > 0 ? measured_s / timed : 0,
                                                                            timed > 0)},
                              {"expected_cost_usd",
                               NumberOrNull(expected * per_s / 3600.0 * price_per_hour, per_known)},
                              {"measured_cost_usd", NumberOrNull(measured_usd, priced > 0)}};
  return j;
}

}  // namespace tencache
