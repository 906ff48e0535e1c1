#include "launcher/report_render.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/byte_size.h"
#include "common/human_format.h"
#include "common/link.h"
#include "common/step_lanes.h"
#include "launcher/gnuplot.h"
#include "launcher/probe_conditions.h"
#include "launcher/report_json.h"
#include "launcher/report_nodes.h"
#include "launcher/run_folder.h"

namespace tencache {
namespace {

using json = nlohmann::ordered_json;
using Opt = std::optional<double>;

constexpr int kLinks = kNumLinks;  // per-step traffic, in Link order
// "bytes_h2d", ...: the metrics' and the prediction's key of link `l`'s bytes.
std::string LinkBytesKey(int l) { return std::string("bytes_") + LinkName(Link(l)); }
constexpr int kTiers = 3;
const char* const kTierNames[kTiers] = {"device", "host", "NVMe"};
constexpr size_t kSummaryInstances = 5;
constexpr int kGnuplotTimeoutS = 120;

// ---------------------------------------------------------------- report.json

// A figure calibrated on this run where known (else unset, or the model's).
Opt Cal(const ReportCostRow& c, ReportNumber ReportPrice::*figure) {
  return c.calibrated ? (*c.calibrated).*figure : std::nullopt;
}
Opt Best(const ReportCostRow& c, ReportNumber ReportPrice::*figure) {
  const Opt cal = Cal(c, figure);
  return cal ? cal : c.model.*figure;
}
Opt SortCost(const ReportCostRow& c) { return Best(c, &ReportPrice::cost_per_epoch_usd); }
Opt CalibratedStep(const RunReport& r) {
  return r.predicted.calibrated ? r.predicted.calibrated->step_time_s : std::nullopt;
}
Opt CalibrationFactor(const RunReport& r) {
  return r.predicted.calibrated ? r.predicted.calibrated->factor : std::nullopt;
}

// Where the run ran, from report.json's machine (machine.json's facts and probes).
struct MachineShown {
  std::string hostname, device;
  std::string probe;  // when this machine's probes ran, at what load (machine.probes.conditions)
  bool simulated_device = false;
  Opt cores, ram_bytes, gpus;
};

// "probe taken 2 h before this launch ... at load 2.41 on 2 cores; load now
// 0.40 ...; reused from the probe cache": from machine.probes (its conditions)
// and machine.facts (this launch); "" where the machine was not probed.
std::string ProbeLine(ReportFields& f, const json& machine) {
  const json& probes = f.Obj(machine, "machine.", "probes");
  if (probes.empty()) return "";
  const json& facts = f.Obj(machine, "machine.", "facts");
  ProbeConditions now;
  now.at = int64_t(f.Num(facts, "machine.facts.", "read_at").value_or(0));
  now.load1 = f.Num(facts, "machine.facts.", "load1").value_or(-1);
  now.cores = int(f.Num(facts, "machine.facts.", "cores").value_or(0));
  std::string line = DescribeProbeConditions(ProbeConditions::FromJson(f.Obj(probes, "machine.probes.", "conditions")), now);
  const std::string why = f.Str(probes, "machine.probes.", "reprobe_reason");
  if (f.Bool(probes, "machine.probes.", "cached", false)) {
    return line + "; reused from the probe cache" + (why.empty() ? "" : "; " + why);
  }
  return line + (why.empty() ? "; measured for this launch" : "; measured again, as " + why);
}

StatusOr<MachineShown> ReadMachine(const json& machine, const std::string& file) {
  ReportFields f(file);
  MachineShown m;
  const json& facts = f.Obj(machine, "machine.", "facts");
  m.hostname = f.Str(facts, "machine.facts.", "hostname");
  m.cores = f.Num(facts, "machine.facts.", "cores");
  m.ram_bytes = f.Num(facts, "machine.facts.", "ram_bytes");
  m.gpus = f.Num(facts, "machine.facts.", "gpus");
  const std::string gpu_name = f.Str(facts, "machine.facts.", "gpu_name");
  m.simulated_device = m.gpus && *m.gpus == 0;
  if (m.simulated_device) m.device = "simulated in host memory (no GPU)";
  else if (m.gpus) m.device = gpu_name.empty() ? "GPU memory" : gpu_name + " memory";
  m.probe = ProbeLine(f, machine);
  TC_RETURN_IF_ERROR(f.status());
  return m;
}

// -------------------------------------------------------------- metrics.jsonl

struct StepRow {
  double step = NAN, loss = NAN, step_time_s = NAN, stall_s = NAN, eval_loss = NAN;
  double bytes[kLinks] = {NAN, NAN, NAN, NAN};
  double lanes[kStepLanes] = {NAN, NAN, NAN, NAN, NAN, NAN, NAN};
};

struct Metrics {
  bool found = false;
  std::vector<StepRow> rows;
  std::vector<std::string> skipped;  // "line 201 (not valid JSON; truncated?)"
};

double NumOr(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : NAN;
}

Metrics ReadMetrics(const std::string& path) {
  Metrics m;
  std::ifstream in(path);
  m.found = static_cast<bool>(in);
  std::string line;
  for (long n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
    const std::string where = "line " + std::to_string(n);
    if (j.is_discarded()) {
      m.skipped.push_back(where + " (not valid JSON; truncated?)");
      continue;
    }
    if (!j.is_object() || std::isnan(NumOr(j, "step"))) {
      m.skipped.push_back(where + " (no numeric \"step\")");
      continue;
    }
    StepRow r;
    r.step = NumOr(j, "step");
    r.loss = NumOr(j, "loss");
    r.eval_loss = NumOr(j, "eval_loss");
    r.step_time_s = NumOr(j, "step_time_s");
    r.stall_s = NumOr(j, "stall_s");
    for (int l = 0; l < kLinks; ++l) r.bytes[l] = NumOr(j, LinkBytesKey(l).c_str());
    if (auto lanes = j.find("lane_busy_s"); lanes != j.end() && lanes->is_object()) {
      for (int l = 0; l < kStepLanes; ++l) r.lanes[l] = NumOr(*lanes, StepLaneName(StepLane(l)));
    }
    m.rows.push_back(r);
  }
  return m;
}

double Total(const Metrics& m, int link) {
  double sum = 0;
  for (const StepRow& r : m.rows) sum += std::isnan(r.bytes[link]) ? 0 : r.bytes[link];
  return sum;
}

// ------------------------------------------------------------------- helpers

const std::string kNone = "-";

std::string Usd(Opt v) { return v ? FormatUsd(*v) : kNone; }
std::string Secs(Opt v) { return v ? FormatDuration(*v) : kNone; }
std::string Hours(Opt v) { return v ? FormatDuration(*v * 3600) : kNone; }
std::string Bytes(Opt v) { return v ? FormatBytes(std::max(0.0, *v)) : kNone; }
std::string Rate(Opt v) { return v ? FormatRate(*v, "tok/s") : kNone; }
std::string Pct(Opt v) { return v ? FormatPercent(*v) : kNone; }
std::string Int(Opt v) { return v ? std::to_string(std::llround(*v)) : kNone; }
std::string Loss(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

// (predicted - measured) / measured, when both are known and measured > 0.
Opt Error(Opt measured, Opt predicted) {
  if (!measured || !predicted || *measured <= 0) return std::nullopt;
  return (*predicted - *measured) / *measured;
}
std::string SignedPct(Opt v) { return v ? FormatSignedPercent(*v) : kNone; }

std::string Plural(long n, const char* word) { return std::to_string(n) + " " + word + (n == 1 ? "" : "s"); }

// Feasible rows sorted by calibrated cost (model-only when not calibrated).
std::vector<const ReportCostRow*> FeasibleByCost(const RunReport& r) {
  std::vector<const ReportCostRow*> out;
  for (const ReportCostRow& c : r.cost_per_epoch) {
    if (c.feasible) out.push_back(&c);
  }
  std::stable_sort(out.begin(), out.end(), [](const ReportCostRow* a, const ReportCostRow* b) {
    Opt x = SortCost(*a), y = SortCost(*b);
    if (x.has_value() != y.has_value()) return x.has_value();
    return x && *x < *y;
  });
  return out;
}

std::string MdCell(std::string s) {
  for (size_t i = 0; (i = s.find('|', i)) != std::string::npos; i += 2) s.insert(i, "\\");
  return s;
}

// A Markdown table; rows[0] is the header. The first `text_columns` columns are
// left-aligned, the rest (numbers) right-aligned.
std::string MdTable(const std::vector<std::vector<std::string>>& rows, size_t text_columns = 1) {
  std::ostringstream out;
  for (size_t r = 0; r < rows.size(); ++r) {
    out << "|";
    for (const std::string& cell : rows[r]) out << " " << MdCell(cell) << " |";
    out << "\n";
    if (r == 0) {
      out << "|";
      for (size_t c = 0; c < rows[0].size(); ++c) out << (c < text_columns ? "---|" : "---:|");
      out << "\n";
    }
  }
  return out.str();
}


// A link's name; the device's say so where the device tier is simulated.
std::string LinkName(const MachineShown& machine, int l) {
  const bool device = Link(l) == Link::kH2D || Link(l) == Link::kD2H;
  return std::string(NamesOf(Link(l)).title) + (machine.simulated_device && device ? " (simulated device)" : "");
}

// What was measured against what the planner predicted, with the prediction
// error; with `tiers`, also the hit rate and bytes per link (report.md has
// those in its tier tables).
std::vector<std::vector<std::string>> MeasuredRows(const RunReport& r, const MachineShown& machine, bool tiers) {
  Opt step_error = r.prediction_error ? r.prediction_error : Error(r.measured.step_time_s, r.predicted.step_time_s);
  std::vector<std::vector<std::string>> rows = {
      {"step time", Secs(r.measured.step_time_s), Secs(r.predicted.step_time_s), SignedPct(step_error)}};
  if (CalibratedStep(r)) {
    rows.push_back({"step time, calibrated", Secs(r.measured.step_time_s), Secs(CalibratedStep(r)),
                    SignedPct(r.prediction_error_calibrated ? r.prediction_error_calibrated : Error(r.measured.step_time_s, CalibratedStep(r)))});
  }
  rows.insert(rows.end(), {
      {"tokens/s", Rate(r.measured.tokens_per_s), Rate(r.predicted.tokens_per_s), SignedPct(Error(r.measured.tokens_per_s, r.predicted.tokens_per_s))},
      {"stall per step", Secs(r.measured.stall_s), Secs(r.predicted.stall_s), SignedPct(Error(r.measured.stall_s, r.predicted.stall_s))}});
  if (tiers) rows.push_back({"device hit rate", Pct(r.measured.device_hit_rate), kNone, kNone});
  for (int l = 0; tiers && l < kLinks; ++l) {
    rows.push_back({LinkName(machine, l) + " per step", Bytes(r.measured.bytes[l]), Bytes(r.predicted.BytesAllRanks(l, r.run.ranks)),
                    SignedPct(Error(r.measured.bytes[l], r.predicted.BytesAllRanks(l, r.run.ranks)))});
  }
  return rows;
}

// ------------------------------------------------------------------ report.md

struct Pictures {
  std::vector<std::pair<std::string, std::string>> drawn;  // file, caption
  std::vector<std::string> notes;                           // why some are missing
  Status status;                                            // first gnuplot failure
};

std::string WhatRan(const RunReport& r, const MachineShown& machine, const Metrics& m) {
  std::vector<std::vector<std::string>> rows = {{"", ""}};
  if (!r.target.empty()) rows.push_back({"target", r.target});
  if (!machine.hostname.empty() || machine.cores) {
    std::string where = machine.hostname.empty() ? "this machine" : machine.hostname;
    if (machine.cores) where += ", " + Plural(std::llround(*machine.cores), "core");
    if (machine.ram_bytes) where += ", " + FormatBytes(*machine.ram_bytes) + " RAM";
    if (machine.gpus) where += ", " + Plural(std::llround(*machine.gpus), "GPU");
    rows.push_back({"machine", where});
  }
  if (!machine.device.empty()) rows.push_back({"device tier", machine.device});
  if (!machine.probe.empty()) rows.push_back({"probe", machine.probe});
  if (!r.run.instance_type.empty()) rows.push_back({"instance type", r.run.instance_type});
  if (r.run.nodes) rows.push_back({"nodes", Int(r.run.nodes)});
  if (r.run.ranks) rows.push_back({"ranks", Int(r.run.ranks)});
  std::string steps = (r.measured.steps ? Int(r.measured.steps) + " measured" : "") + (r.measured.steps && r.run.steps ? " of " : "") +
                      (r.run.steps ? Int(r.run.steps) + " planned" : "");
  steps += (steps.empty() ? "" : "; ") + Plural(long(m.rows.size()), "step") + " in metrics.jsonl";
  if (r.measured.warmup_steps && *r.measured.warmup_steps > 0) {
    steps += "; measured values are medians after " + Plural(std::llround(*r.measured.warmup_steps), "warm-up step");
  }
  rows.push_back({"steps", steps});
  if (!r.run.dtype.empty()) rows.push_back({"dtype", r.run.dtype});
  if (!r.run.policy.empty()) rows.push_back({"cache policy", r.run.policy});
  for (int t = 0; t < kTiers; ++t) {
    if (r.run.budgets[t]) rows.push_back({std::string(kTierNames[t]) + " budget", Bytes(r.run.budgets[t])});
  }
  if (r.measured.loss_first && r.measured.loss_last) rows.push_back({"loss", Loss(*r.measured.loss_first) + " -> " + Loss(*r.measured.loss_last)});
  if (r.measured.evaluations && r.measured.eval_loss_first && r.measured.eval_loss_last) {
    rows.push_back({"validation loss", Loss(*r.measured.eval_loss_first) + " -> " + Loss(*r.measured.eval_loss_last) + " (" +
                                           Plural(std::llround(*r.measured.evaluations), "evaluation") + ")"});
  }
  if (r.measured.skipped_steps) {
    rows.push_back({"skipped steps", Int(r.measured.skipped_steps) + " (fp16 loss scaling: the gradient overflowed, no update)"});
  }
  return "## What ran\n\n" + MdTable(rows, /*text_columns=*/2);
}

constexpr const char* kSimulatedLinks =
    "The device tier is simulated in host memory (no GPU): host->device is a memcpy into it, and the worker "
    "computes on the CPU, so its reduce-scatters write every gradient straight into host memory and nothing "
    "moves device->host (none is predicted).";

std::string TierTables(const RunReport& r, const MachineShown& machine, const Metrics& m) {
  std::vector<std::vector<std::string>> tiers = {{"tier", "budget", "peak held", "hit rate"}};
  for (int t = 0; t < kTiers; ++t) {
    tiers.push_back({kTierNames[t], Bytes(r.run.budgets[t]), Bytes(r.measured.peak_bytes[t]), t == 0 ? Pct(r.measured.device_hit_rate) : kNone});
  }
  const std::string all = "all " + Plural(long(m.rows.size()), "logged step");
  std::vector<std::vector<std::string>> links = {
      {"link", "measured per step", "predicted per step", "prediction error", all}};
  for (int l = 0; l < kLinks; ++l) {
    links.push_back({LinkName(machine, l), Bytes(r.measured.bytes[l]), Bytes(r.predicted.BytesAllRanks(l, r.run.ranks)),
                     SignedPct(Error(r.measured.bytes[l], r.predicted.BytesAllRanks(l, r.run.ranks))), FormatBytes(Total(m, l))});
  }
  return "## Tiers\n\n" + MdTable(tiers) + "\nHit rate: device parameter-shard accesses that found the shard "
         "still on the device (docs/worker.md).\n\n" + MdTable(links) +
         "\nBytes per step are summed over ranks." + (machine.simulated_device ? " " + std::string(kSimulatedLinks) : "") +
         "\n";
}

// The updates on the training thread's path, measured against predicted, and
// what the optimizer lane hides (docs/worker.md "The optimizer lane"); empty
// when the run measured none.
std::string OptimizerLine(const RunReport& r) {
  const Opt wait = r.measured.optimizer_wait_s;
  if (!wait) return "";
  const Opt step = r.measured.step_time_s;
  std::string line = "Optimizer: the training thread spent " + Secs(wait) + " a step in the updates";
  if (step && *step > 0) line += " (" + Pct(*wait / *step) + " of the step)";
  line += ", issuing them to the optimizer lane and waiting for them, or running them itself";
  if (r.predicted.optimizer_exposed_s) {
    line += "; predicted " + Secs(r.predicted.optimizer_exposed_s) + " on the step";
    if (r.predicted.optimizer_hidden_s && *r.predicted.optimizer_hidden_s > 0) {
      line += ", " + Secs(r.predicted.optimizer_hidden_s) + " hidden by the optimizer lane";
    }
  }
  return line + ".\n";
}

// Each lane's busy time per step against the step time, and the overlap
// efficiency they bound (docs/worker.md "Lanes"), then the optimizer's share.
std::string LaneTable(const RunReport& r) {
  const std::string optimizer = OptimizerLine(r);
  const std::string optimizer_paragraph = optimizer.empty() ? "" : optimizer + "\n";
  if (!r.measured.overlap_efficiency) return optimizer.empty() ? "" : "## Lanes\n\n" + optimizer_paragraph;
  std::vector<std::vector<std::string>> rows = {{"lane", "busy per step", "share of the step"}};
  for (int l = 0; l < kStepLanes; ++l) {
    const Opt share = r.measured.lane_busy_s[l] && r.measured.step_time_s && *r.measured.step_time_s > 0 ? Opt(*r.measured.lane_busy_s[l] / *r.measured.step_time_s)
                                                                          : std::nullopt;
    rows.push_back({StepLaneName(StepLane(l)), Secs(r.measured.lane_busy_s[l]), Pct(share)});
  }
  char eff[32];
  std::snprintf(eff, sizeof eff, "%.2f", *r.measured.overlap_efficiency);
  return "## Lanes\n\nOverlap efficiency " + std::string(eff) + (r.measured.bound_lane.empty() ? "" : ", bound by " + r.measured.bound_lane) +
         ": the busiest lane's time over the step time (1.00: the step is as short as its slowest resource "
         "allows). Medians per step after warm-up; each lane the busiest rank's.\n\n" + MdTable(rows) + "\n" + optimizer_paragraph;
}

std::string CostTable(const RunReport& r) {
  std::ostringstream out;
  out << "## Cost per epoch\n\n";
  std::vector<const ReportCostRow*> feasible = FeasibleByCost(r);
  if (feasible.empty()) out << "No instance type of the catalog can run this job.\n";
  std::vector<std::vector<std::string>> rows = {{"instance", "cloud", "nodes", "epoch time", "$/epoch model-only",
                                                 "$/epoch calibrated", "cost of this job's steps"}};
  bool any_non_candidate = false;
  for (const ReportCostRow* c : feasible) {
    std::string name = c->instance_type + (c->candidate ? "" : " †") + (c->instance_type == r.run.instance_type ? " (this run)" : "");
    any_non_candidate |= !c->candidate;
    rows.push_back({name, c->provider, Int(c->nodes), Hours(Best(*c, &ReportPrice::epoch_hours)),
                    Usd(c->model.cost_per_epoch_usd), Usd(Cal(*c, &ReportPrice::cost_per_epoch_usd)), Usd(Best(*c, &ReportPrice::job_cost_usd))});
  }
  if (!feasible.empty()) {
    out << "Feasible instance types, cheapest first by cost calibrated on this run. Model-only: the planner's "
           "prediction; calibrated: the same with what this run measured (see Calibration). Epoch time and "
           "job cost are calibrated where known.\n\n"
        << MdTable(rows, /*text_columns=*/2);
    if (any_non_candidate) out << "\n† not among this job's candidate instance types.\n";
  }
  bool header = false;
  for (const ReportCostRow& c : r.cost_per_epoch) {
    if (c.feasible) continue;
    if (!header) out << "\nInfeasible:\n\n";
    header = true;
    out << "- " << c.instance_type << (c.provider.empty() ? "" : " (" + c.provider + ")") << ": "
        << (c.reason.empty() ? "no reason given" : c.reason) << "\n";
  }
  return out.str();
}

std::string Bullets(const std::string& title, const std::vector<std::string>& items) {
  if (items.empty()) return "";
  std::string out = title + "\n\n";
  for (const std::string& s : items) out += "- " + s + "\n";
  return out + "\n";
}

std::string Calibration(const RunReport& r) {
  std::string body = Bullets("Carried over from this run:", r.carried) +
                     Bullets("Assumed (not measured by this run):", r.assumed) +
                     Bullets("Assumptions behind the predictions:", r.assumptions);
  return "## Calibration\n\n" + (body.empty() ? "report.json lists no calibration.\n" : body);
}

std::string MetricsNote(const Metrics& m) {
  std::string out = "## Metrics log\n\n";
  if (!m.found) return out + "metrics.jsonl was not found: no per-step metrics.\n";
  out += "metrics.jsonl: " + Plural(long(m.rows.size()), "step") + " read";
  if (m.skipped.empty()) return out + ".\n";
  out += "; " + Plural(long(m.skipped.size()), "line") + " skipped:\n\n";
  for (const std::string& s : m.skipped) out += "- " + s + "\n";
  return out;
}

// Managed recovery: every attempt of a run that was restarted (none: "").
std::string AttemptsTable(const RunReport& r) {
  if (!r.attempts.is_array() || r.attempts.size() < 2) return "";
  auto num = [](const nlohmann::ordered_json& a, const char* key) -> Opt {
    return a.contains(key) && a[key].is_number() ? Opt(a[key].get<double>()) : std::nullopt;
  };
  auto text = [](const nlohmann::ordered_json& a, const char* key) {
    return a.contains(key) && a[key].is_string() ? a[key].get<std::string>() : std::string(kNone);
  };
  std::vector<std::vector<std::string>> rows = {
      {"attempt", "started (UTC)", "ended", "steps", "resumed at", "steps lost", "to recover", "recovery cost"}};
  for (const auto& a : r.attempts) {
    if (!a.is_object()) continue;
    const Opt first = num(a, "first_step"), done = num(a, "steps_done");
    const std::string replanned = a.contains("replanned") && a["replanned"].is_string()
                                      ? "; planned again " + a["replanned"].get<std::string>()
                                      : "";
    rows.push_back({Int(num(a, "attempt")), text(a, "started_at"),
                    text(a, "status") + ": " + text(a, "cause") + replanned,
                    first && done ? Int(first) + "-" + Int(Opt(*done - 1)) : kNone, Int(num(a, "resumed_at_step")),
                    Int(num(a, "steps_lost")), Secs(num(a, "recover_seconds")), Usd(num(a, "recovery_cost_usd"))});
  }
  return "## Attempts\n\n" + MdTable(rows, /*text_columns=*/3) +
         "\nA failed attempt was started again from its newest complete checkpoint (cluster.max_restarts). Steps "
         "lost: reported past that checkpoint, and run again; to recover: from the failure to the next attempt's "
         "first step; recovery cost: both at the run's price, where the price is known. The pictures mark each "
         "restart.\n\n";
}

// On spot nodes: the plan's expected preemptions over this run's hours against
// its attempts (none: "").
std::string SpotTable(const RunReport& r) {
  if (!r.spot.is_object()) return "";
  auto num = [&](const char* key) -> Opt {
    return r.spot.contains(key) && r.spot[key].is_number() ? Opt(r.spot[key].get<double>()) : std::nullopt;
  };
  char expected[32] = "-";
  if (const Opt e = num("expected_preemptions")) std::snprintf(expected, sizeof expected, "%.2g", *e);
  const std::string source = r.spot.value("rate_source", std::string());
  const std::vector<std::vector<std::string>> rows = {
      {"", "expected", "measured"},
      {"preemptions in the run's " + Secs(num("run_hours") ? Opt(*num("run_hours") * 3600) : std::nullopt),
       std::string(expected) + " (one every " + Secs(num("mtbp_hours") ? Opt(*num("mtbp_hours") * 3600) : std::nullopt) +
           ")",
       Plural(long(num("restarts").value_or(0)), "restart") + " (" +
           Plural(long(num("failed_attempts").value_or(0)), "failed attempt") + ")"},
      {"time each (work lost + recovery)", Secs(num("expected_seconds_per_preemption")),
       Secs(num("measured_seconds_per_restart"))},
      {"their cost at the spot price", Usd(num("expected_cost_usd")), Usd(num("measured_cost_usd"))}};
  return "## Spot\n\n" + MdTable(rows, /*text_columns=*/1) +
         "\nExpected: the plan's spot model (docs/launcher.md, \"Spot pricing\") over the run's hours, at the "
         "interruption rate of " + (source.empty() ? std::string(kNone) : source) +
         (r.spot.value("rate_assumed", false) ? " (assumed)" : "") +
         ". Measured: the attempts above; every failed attempt counts, whatever ended it. A run of a few hours "
         "sees a preemption or none: one run says little about the rate.\n\n";
}

// Gnuplot lines marking each restart at the step it resumed at.
std::string RestartMarks(const RunReport& r) {
  std::ostringstream gp;
  if (!r.attempts.is_array()) return "";
  for (const auto& a : r.attempts) {
    if (!a.is_object() || !a.contains("resumed_at_step") || !a["resumed_at_step"].is_number()) continue;
    const double step = a["resumed_at_step"].get<double>();
    gp << "set arrow from first " << GnuplotNumber(step) << ", graph 0 to first " << GnuplotNumber(step)
       << ", graph 1 nohead dashtype 2 lw 2 lc rgb 'red'\n"
       << "set label " << GnuplotQuote("restart") << " at first " << GnuplotNumber(step)
       << ", graph 0.97 offset 0.5,0 textcolor rgb 'red'\n";
  }
  return gp.str();
}

std::string RenderMarkdown(const RunReport& r, const MachineShown& machine, const Metrics& m,
                           const Pictures& p) {
  std::ostringstream out;
  out << "# Run report: " << r.job << (r.status.empty() ? "" : " (" + r.status + ")") << "\n\n";
  out << WhatRan(r, machine, m) << "\n";
  out << "## Measured vs predicted\n\n";
  std::vector<std::vector<std::string>> rows = {{"", "measured", "predicted", "prediction error"}};
  for (auto& row : MeasuredRows(r, machine, /*tiers=*/false)) rows.push_back(row);
  out << MdTable(rows) << "\nPrediction error: (predicted - measured) / measured.";
  if (CalibrationFactor(r)) {
    char factor[32];
    std::snprintf(factor, sizeof factor, "%.2f", *CalibrationFactor(r));
    out << " Calibrated: the prediction with every speed divided by " << factor
        << ", what the first steps past warm-up took over what was predicted (see Calibration).";
  }
  out << "\n\n";
  if (const auto nodes = NodeRows(r.nodes); nodes.size() > 2 || (nodes.size() == 2 && r.target == "hosts")) {
    out << "## Per node\n\nMedians per step after warm-up; stall and bytes summed over the node's ranks.\n\n"
        << MdTable(nodes, 2) << "\n";
  }
  out << AttemptsTable(r);
  out << SpotTable(r);
  out << TierTables(r, machine, m) << "\n" << LaneTable(r) << CostTable(r) << "\n" << Calibration(r);
  out << "## Pictures\n\n";
  for (const auto& [file, caption] : p.drawn) out << "![" << caption << "](" << file << ")\n\n";
  for (const std::string& n : p.notes) out << n << "\n\n";
  out << MetricsNote(m);
  return out.str();
}

// -------------------------------------------------------------------- summary

std::string RenderSummary(const RunReport& r, const MachineShown& machine) {
  std::ostringstream out;
  out << "run " << r.job << (r.status.empty() ? "" : " (" + r.status + ")");
  if (r.measured.steps) out << ": " << Int(r.measured.steps) << " steps";
  if (!r.run.instance_type.empty()) out << " on " << r.run.instance_type;
  if (r.run.ranks) out << ", " << Plural(std::llround(*r.run.ranks), "rank");
  if (!r.run.dtype.empty()) out << ", " << r.run.dtype;
  out << "\n";
  std::vector<std::vector<std::string>> rows = {{"", "MEASURED", "PREDICTED", "PREDICTION ERROR"}};
  for (auto& row : MeasuredRows(r, machine, /*tiers=*/true)) rows.push_back(row);
  out << FormatTable(rows);
  if (r.measured.overlap_efficiency) {
    char eff[96];
    std::snprintf(eff, sizeof eff, "overlap efficiency %.2f (busiest lane: %s)\n", *r.measured.overlap_efficiency,
                  r.measured.bound_lane.empty() ? "-" : r.measured.bound_lane.c_str());
    out << eff;
  }
  std::vector<const ReportCostRow*> feasible = FeasibleByCost(r);
  if (feasible.empty()) {
    out << "\nno feasible instance type in the catalog\n";
  } else {
    out << "\ncheapest feasible instance types, per epoch:\n";
    std::vector<std::vector<std::string>> cost = {
        {"INSTANCE", "CLOUD", "NODES", "CALIBRATED", "MODEL-ONLY", "EPOCH TIME"}};
    for (size_t i = 0; i < feasible.size() && i < kSummaryInstances; ++i) {
      const ReportCostRow& c = *feasible[i];
      cost.push_back({c.instance_type, c.provider, Int(c.nodes), Usd(Cal(c, &ReportPrice::cost_per_epoch_usd)), Usd(c.model.cost_per_epoch_usd),
                      Hours(Best(c, &ReportPrice::epoch_hours))});
    }
    out << FormatTable(cost);
  }
  return out.str();
}

// -------------------------------------------------------------------- pictures

// Draws plots/NAME with gnuplot; records the picture, or why it is missing and
// the first failure.
void Draw(const Gnuplot& g, const std::string& run_dir, const std::string& name, const std::string& caption,
          const std::string& data, const std::string& script, Pictures* p, std::vector<std::string>* warnings) {
  StatusOr<std::string> output = DrawWithGnuplot(g, run_dir, name, data, script, kGnuplotTimeoutS);
  if (output.ok()) {
    p->drawn.push_back({name + ".png", caption});
    if (!output->empty() && warnings != nullptr) warnings->push_back("gnuplot " + run_dir + "/plots/" + name + ".gp: " + *output);
    return;
  }
  p->notes.push_back(name + ".png was not drawn:\n\n```\n" + output.status().message() + "\n```");
  if (p->status.ok()) p->status = output.status();
}

std::string Points(const Metrics& m) { return m.rows.size() < 30 ? "linespoints pt 7 ps 0.6" : "lines"; }

void DrawLossStepTime(const Gnuplot& g, const std::string& run_dir, const RunReport& r, const Metrics& m,
                      Pictures* p, std::vector<std::string>* warnings) {
  std::string data = "# step loss step_time_s eval_loss\n";
  double max_step_time = 0;
  bool evaluated = false;
  for (const StepRow& s : m.rows) {
    data += GnuplotNumber(s.step) + " " + GnuplotNumber(s.loss) + " " + GnuplotNumber(s.step_time_s) + " " +
            GnuplotNumber(s.eval_loss) + "\n";
    if (!std::isnan(s.step_time_s)) max_step_time = std::max(max_step_time, s.step_time_s);
    evaluated |= !std::isnan(s.eval_loss);
  }
  std::ostringstream gp;
  gp << GnuplotHeader(g, "loss_step_time", 1100, 600) << "set title " << GnuplotQuote(r.job + ": loss and step time") << "\n"
     << "set xlabel 'step'\nset ylabel 'loss (nats)'\nset y2label 'step time (s)'\n"
     << "set ytics nomirror\nset y2tics\nset y2range " << GnuplotRangeFromZero(max_step_time) << "\n"
     << RestartMarks(r) << "plot 'loss_step_time.dat' using 1:2 axes x1y1 with " << Points(m) << " lw 2 title 'loss', \\\n"
     << (evaluated ? "     'loss_step_time.dat' using 1:4 axes x1y1 with points pt 5 ps 1.2 title 'validation loss', \\\n"
                   : "")
     << "     'loss_step_time.dat' using 1:3 axes x1y2 with " << Points(m) << " lw 1.5 title 'step time (s)'\n";
  Draw(g, run_dir, "loss_step_time", "loss and step time per step", data, gp.str(), p, warnings);
}

void DrawStallBytes(const Gnuplot& g, const std::string& run_dir, const RunReport& r, const Metrics& m,
                    Pictures* p, std::vector<std::string>* warnings) {
  std::string data = "# step stall_s h2d_MiB d2h_MiB nvme_read_MiB nvme_write_MiB\n";
  double max_stall = 0, max_mib = 0;
  for (const StepRow& s : m.rows) {
    data += GnuplotNumber(s.step) + " " + GnuplotNumber(s.stall_s);
    if (!std::isnan(s.stall_s)) max_stall = std::max(max_stall, s.stall_s);
    for (int l = 0; l < kLinks; ++l) {
      const double mib = s.bytes[l] / double(kMiB);
      data += " " + GnuplotNumber(mib);
      if (!std::isnan(mib)) max_mib = std::max(max_mib, mib);
    }
    data += "\n";
  }
  std::ostringstream gp;
  gp << GnuplotHeader(g, "stall_bytes", 1100, 800) << "set multiplot layout 2,1 title "
     << GnuplotQuote(r.job + ": stall and bytes moved per step (all ranks)") << "\n"
     << "set lmargin 12\nset rmargin 4\n"  // both panels' plot areas aligned
     << "set ylabel 'stall (s)'\nset yrange " << GnuplotRangeFromZero(max_stall) << "\n"
     << "plot 'stall_bytes.dat' using 1:2 with " << Points(m) << " lw 2 title 'stall'\n"
     << "set xlabel 'step'\nset ylabel 'MiB per step'\nset yrange " << GnuplotRangeFromZero(max_mib) << "\n"
     << "plot 'stall_bytes.dat' using 1:3 with " << Points(m) << " lw 2 title 'h2d', \\\n"
     << "     'stall_bytes.dat' using 1:4 with " << Points(m) << " lw 2 title 'd2h', \\\n"
     << "     'stall_bytes.dat' using 1:5 with " << Points(m) << " lw 2 title 'NVMe read', \\\n"
     << "     'stall_bytes.dat' using 1:6 with " << Points(m) << " lw 2 title 'NVMe write'\n"
     << "unset multiplot\n";
  Draw(g, run_dir, "stall_bytes", "stall and bytes per tier per step", data, gp.str(), p, warnings);
}

void DrawLanes(const Gnuplot& g, const std::string& run_dir, const RunReport& r, const Metrics& m, Pictures* p,
               std::vector<std::string>* warnings) {
  std::string data = "# step step_time_s";
  for (int l = 0; l < kStepLanes; ++l) data += std::string(" ") + StepLaneName(StepLane(l)) + "_s";
  data += "\n";
  double top = 0;
  for (const StepRow& s : m.rows) {
    data += GnuplotNumber(s.step) + " " + GnuplotNumber(s.step_time_s);
    if (!std::isnan(s.step_time_s)) top = std::max(top, s.step_time_s);
    for (double v : s.lanes) data += " " + GnuplotNumber(v);
    data += "\n";
  }
  std::ostringstream gp;
  gp << GnuplotHeader(g, "lanes", 1100, 600)
     << "set title " << GnuplotQuote(r.job + ": each lane's busy time per step (busiest rank) against the step time") << "\n"
     << "set xlabel 'step'\nset ylabel 'seconds'\nset yrange " << GnuplotRangeFromZero(top) << "\n"
     << "set key outside right\n" << RestartMarks(r)
     << "plot 'lanes.dat' using 1:2 with " << Points(m) << " lw 3 lc rgb 'black' title 'step time'";
  for (int l = 0; l < kStepLanes; ++l) {
    gp << ", \\\n     'lanes.dat' using 1:" << l + 3 << " with " << Points(m) << " lw 2 lc " << l + 1  // none black
       << " title '" << StepLaneName(StepLane(l)) << "'";
  }
  gp << "\n";
  Draw(g, run_dir, "lanes", "each lane's busy time per step against the step time", data, gp.str(), p, warnings);
}

void DrawCostPerEpoch(const Gnuplot& g, const std::string& run_dir, const RunReport& r, Pictures* p,
                      std::vector<std::string>* warnings) {
  std::vector<const ReportCostRow*> feasible = FeasibleByCost(r);
  std::string data = "# instance model_only_usd calibrated_usd\n";
  double lo = INFINITY, hi = 0;
  for (const ReportCostRow* c : feasible) {
    std::string label = c->instance_type + (c->nodes && *c->nodes > 1 ? " x" + Int(c->nodes) : "");
    data += "\"" + label + "\" " + GnuplotNumber(c->model.cost_per_epoch_usd.value_or(NAN)) + " " + GnuplotNumber(Cal(*c, &ReportPrice::cost_per_epoch_usd).value_or(NAN)) + "\n";
    for (Opt v : {c->model.cost_per_epoch_usd, Cal(*c, &ReportPrice::cost_per_epoch_usd)}) {
      if (v && *v > 0) lo = std::min(lo, *v), hi = std::max(hi, *v);
    }
  }
  const bool log_scale = hi > 0 && hi / lo > 100;
  const int width = std::clamp(int(feasible.size()) * 70 + 250, 800, 2400);
  std::ostringstream gp;
  gp << GnuplotHeader(g, "cost_per_epoch", width, 650)
     << "set title " << GnuplotQuote(r.job + ": cost per epoch on each feasible instance type") << "\n"
     << "set style data histograms\nset style histogram clustered gap 1\n"
     << "set style fill solid 0.85 border -1\nset boxwidth 0.9\nset grid noxtics ytics\n"
     << "set xtics rotate by 45 right\nset ylabel 'USD per epoch" << (log_scale ? " (log scale)" : "") << "'\n"
     << (log_scale ? "set logscale y\n" : "set yrange [0:*]\n") << "set key inside top left vertical\n"
     << "plot 'cost_per_epoch.dat' using 2:xtic(1) title 'model only', \\\n"
     << "     'cost_per_epoch.dat' using 3 title 'calibrated on this run'\n";
  Draw(g, run_dir, "cost_per_epoch", "cost per epoch: model only and calibrated on this run", data, gp.str(), p,
       warnings);
}

Pictures DrawPictures(const std::string& run_dir, const RunReport& r, const Metrics& m,
                      std::vector<std::string>* warnings) {
  Pictures p;
  const bool steps = !m.rows.empty();
  const bool costs = !FeasibleByCost(r).empty();
  if (!steps) p.notes.push_back("No steps in metrics.jsonl, so no pictures of steps.");
  if (!steps && !costs) return p;
  const Gnuplot g = FindGnuplot(kGnuplotTimeoutS);
  if (g.exe.empty()) {
    p.notes.push_back("Pictures need gnuplot, which is not on PATH: install it (Debian: `apt-get install "
                      "gnuplot-nox`) and run `tencache-launch report " + run_dir + "` again.");
    if (warnings != nullptr) {
      warnings->push_back("no pictures: gnuplot is not on PATH (Debian: apt-get install gnuplot-nox)");
    }
    return p;
  }
  if (::mkdir((run_dir + "/plots").c_str(), 0755) != 0 && errno != EEXIST) {
    p.status = Status::IoError(run_dir + "/plots: cannot create (" + std::strerror(errno) + ")");
    p.notes.push_back("No pictures: " + p.status.message());
    return p;
  }
  if (steps) {
    DrawLossStepTime(g, run_dir, r, m, &p, warnings);
    DrawStallBytes(g, run_dir, r, m, &p, warnings);
    if (r.measured.overlap_efficiency) DrawLanes(g, run_dir, r, m, &p, warnings);
  }
  if (costs) DrawCostPerEpoch(g, run_dir, r, &p, warnings);
  return p;
}

}  // namespace

Status RenderReport(const std::string& run_dir, std::string* summary, std::vector<std::string>* warnings) {
  const std::string file = run_dir + "/report.json";
  TC_ASSIGN_OR_RETURN(const RunReport r, RunReport::Read(file));
  TC_ASSIGN_OR_RETURN(const MachineShown machine, ReadMachine(r.machine, file));
  const Metrics m = ReadMetrics(run_dir + "/metrics.jsonl");
  if (warnings != nullptr) {
    if (!m.skipped.empty()) {
      warnings->push_back(run_dir + "/metrics.jsonl: skipped " + Plural(long(m.skipped.size()), "line") +
                          " that did not parse (first: " + m.skipped.front() + ")");
    }
    if (m.rows.empty()) warnings->push_back(run_dir + "/metrics.jsonl: no steps, so no pictures of steps");
  }
  const Pictures p = DrawPictures(run_dir, r, m, warnings);
  TC_RETURN_IF_ERROR(RunFolder(run_dir).Write("report.md", RenderMarkdown(r, machine, m, p)));
  if (summary != nullptr) *summary = RenderSummary(r, machine);
  return p.status;
}

}  // namespace tencache
