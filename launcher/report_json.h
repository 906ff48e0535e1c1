// RunReport: report.json, one struct for its writer and its reader. BuildReport
// (launcher/run_report.h) fills it at the end of a run and ToJson writes it;
// RenderReport (launcher/report_render.h) reads it back with FromJson and turns
// it into report.md and pictures. docs/launcher.md "report.json" lists the
// fields. ToJson writes every field that is set, in a fixed order; FromJson
// gives back every field ToJson wrote, and also reads a report in which any
// field but job, measured, predicted and cost_per_epoch is absent or null (left
// unset here). Value type; thread-compatible.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/link.h"
#include "common/status.h"
#include "common/step_lanes.h"

namespace tencache {

using ReportNumber = std::optional<double>;  // unset: absent from report.json

// Per-step traffic, in this order: h2d, d2h, NVMe read, NVMe write.
inline constexpr int kReportLinks = kNumLinks;  // in Link order
// Memory tiers, in this order: device, host, NVMe.
inline constexpr int kReportTiers = 3;

// What an instance type costs at one set of assumptions.
struct ReportPrice {
  ReportNumber step_time_s, epoch_hours, cost_per_epoch_usd, job_cost_usd;
};

// cost_per_epoch[i]: one catalog instance type at its best node count.
struct ReportCostRow {
  std::string instance_type, provider, reason;
  ReportNumber nodes, price_per_hour_usd;
  bool feasible = false;
  bool candidate = true;                  // in cluster.instance_types
  ReportPrice model;                      // the model's assumptions (feasible rows)
  std::optional<ReportPrice> calibrated;  // calibrated on this run (feasible rows)
};

struct ReportHost {
  std::string host;
  int ranks = 0;
};

// run: the job as it ran.
struct ReportRunSection {
  std::string instance_type, dtype, policy;
  ReportNumber nodes, ranks, steps, micro_batch;
  ReportNumber budgets[kReportTiers];  // per rank
  std::vector<ReportHost> hosts;       // cluster.target hosts: each host and its ranks
};

// measured: medians after warm-up (launcher/run_report.h's MeasuredRun).
struct ReportMeasured {
  ReportNumber steps, warmup_steps, step_time_s, tokens_per_s, stall_s, device_hit_rate;
  ReportNumber bytes[kReportLinks];      // per step, summed over ranks
  ReportNumber peak_bytes[kReportTiers];
  ReportNumber loss_first, loss_last;
  ReportNumber evaluations, eval_loss_first, eval_loss_last, skipped_steps;
  ReportNumber lane_busy_s[kStepLanes];  // each lane's busy seconds per step
  std::string bound_lane;
  ReportNumber overlap_efficiency;
  ReportNumber optimizer_wait_s;         // the training thread's seconds in the updates per step
};

// predicted.calibrated: this machine's prediction corrected by the run.
struct ReportCalibratedStep {
  ReportNumber step_time_s, tokens_per_s, factor;
  std::vector<int64_t> steps;  // the first and last step it was calibrated on
};

// predicted: the run's candidate as the model predicted it.
inline constexpr int kReportPredictedLanes = 6;  // compute, h2d, d2h, nvme, collectives, optimizer
struct ReportPredicted {
  ReportNumber step_time_s, tokens_per_s, stall_s;
  ReportNumber lanes_s[kReportPredictedLanes];
  // The updates' arithmetic left on the training thread's path per step, and
  // the seconds the optimizer lane takes off it (train.optimizer_overlap).
  ReportNumber optimizer_exposed_s, optimizer_hidden_s;
  ReportNumber bytes[kReportLinks];           // summed over ranks (bytes_h2d, ...)
  ReportNumber bytes_per_rank[kReportLinks];  // per rank (bytes_per_rank.h2d, ...)
  std::optional<ReportCalibratedStep> calibrated;
  // Bytes per step over all ranks of link `l`: `bytes`, else bytes_per_rank x `ranks`.
  ReportNumber BytesAllRanks(int l, ReportNumber ranks) const;
};

// Typed reads of report.json's objects that remember the first field of the
// wrong type (InvalidArgument "FILE: key 'WHERE.KEY': expected E"); an absent
// or null field is not an error. Used by RunReport::FromJson and by the
// renderer for `machine`.
class ReportFields {
 public:
  using json = nlohmann::ordered_json;
  explicit ReportFields(std::string file) : file_(std::move(file)) {}
  const Status& status() const { return status_; }
  ReportNumber Num(const json& obj, const std::string& where, const char* key);
  std::string Str(const json& obj, const std::string& where, const char* key);
  bool Bool(const json& obj, const std::string& where, const char* key, bool fallback);
  std::vector<std::string> Strings(const json& obj, const std::string& where, const char* key);
  // obj[key], or an empty object when absent.
  const json& Obj(const json& obj, const std::string& where, const char* key);
  void Fail(const std::string& key, const char* expected);

 private:
  const json* Get(const json& obj, const std::string& where, const char* key, bool (json::*is)() const noexcept,
                  const char* expected);
  std::string file_;
  Status status_;
};

struct RunReport {
  std::string job, status, target;
  nlohmann::ordered_json machine;  // machine.json as the run wrote it (null: absent)
  ReportRunSection run;
  ReportMeasured measured;
  nlohmann::ordered_json nodes;    // per-node figures (launcher/report_nodes.h; null: absent)
  nlohmann::ordered_json attempts; // run.json's attempts (launcher/run_recovery.h; null: absent)
  nlohmann::ordered_json spot;     // on spot nodes: expected vs measured preemptions (SpotAgainstAttempts; null: absent)
  ReportPredicted predicted;
  ReportNumber prediction_error, prediction_error_calibrated;
  std::vector<ReportCostRow> cost_per_epoch;
  std::vector<std::string> carried, assumed;  // calibration.carried, calibration.assumed
  std::vector<std::string> assumptions;

  nlohmann::ordered_json ToJson() const;
  // `file` names the source in errors: InvalidArgument "FILE: key 'K': expected
  // E" for the first field of the wrong type, or a required key missing.
  static StatusOr<RunReport> FromJson(const nlohmann::ordered_json& j, const std::string& file);
  // Reads FILE: NotFound when it cannot be opened, InvalidArgument when it is
  // not a JSON object, else FromJson's errors.
  static StatusOr<RunReport> Read(const std::string& file);
};

}  // namespace tencache
