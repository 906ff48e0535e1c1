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
#include "launcher/report_nodes.h"

namespace tencache {
namespace {

using json = nlohmann::json;
using Opt = std::optional<double>;

constexpr int kLinks = kNumLinks;  // per-step traffic, in Link order
// "bytes_h2d", ...: the metrics' and the prediction's key of link `l`'s bytes.
std::string LinkBytesKey(int l) { return std::string("bytes_") + LinkName(Link(l)); }
constexpr int kTiers = 3;
const char* const kTierKeys[kTiers] = {"device", "host", "nvme"};
const char* const kTierNames[kTiers] = {"device", "host", "NVMe"};
constexpr size_t kSummaryInstances = 5;
constexpr int kGnuplotTimeoutS = 120;

// ---------------------------------------------------------------- report.json

struct CostRow {
  std::string type, provider, reason;
  bool feasible = false, candidate = true;
  Opt nodes, epoch_hours, cost, job_cost;         // model only
  Opt cal_epoch_hours, cal_cost, cal_job_cost;    // calibrated on this run
  Opt SortCost() const { return cal_cost ? cal_cost : cost; }
};

struct RunReport {
  std::string job, status, target;
  std::string hostname, device, instance_type, dtype, policy;
  std::string probe;          // when this machine's probes ran, at what load (machine.probes.conditions)
  bool simulated_device = false;
  Opt cores, ram_bytes, gpus, nodes, ranks, steps, budget[kTiers];
  Opt m_steps, m_warmup, m_step_time, m_tokens, m_stall, m_hit, m_bytes[kLinks], m_peak[kTiers], loss_first, loss_last;
  Opt evaluations, eval_loss_first, eval_loss_last, skipped_steps;
  Opt p_step_time, p_tokens, p_stall, p_bytes[kLinks];
  Opt prediction_error;
  Opt p_cal_step_time, p_cal_tokens, cal_factor, cal_error;  // predicted.calibrated: this machine's, corrected
  Opt m_lanes[kStepLanes], m_overlap;  // measured.lane_busy_s, overlap_efficiency (absent in older reports)
  std::string m_bound_lane;
  std::vector<CostRow> costs;
  std::vector<std::string> carried, assumed, assumptions;
  json node_figures;  // per node (launcher/report_nodes.h), as report.json holds them
};

// Reads typed fields of report.json; remembers the first type error.
class Fields {
 public:
  explicit Fields(std::string file) : file_(std::move(file)) {}
  const Status& status() const { return status_; }

  Opt Num(const json& obj, const std::string& where, const char* key) {
    const json* v = Get(obj, where, key, &json::is_number, "a number");
    return v ? Opt(v->get<double>()) : std::nullopt;
  }
  std::string Str(const json& obj, const std::string& where, const char* key) {
    const json* v = Get(obj, where, key, &json::is_string, "a string");
    return v ? v->get<std::string>() : "";
  }
  bool Bool(const json& obj, const std::string& where, const char* key, bool fallback) {
    const json* v = Get(obj, where, key, &json::is_boolean, "true or false");
    return v ? v->get<bool>() : fallback;
  }
  std::vector<std::string> Strings(const json& obj, const std::string& where, const char* key) {
    std::vector<std::string> out;
    const json* v = Get(obj, where, key, &json::is_array, "an array of strings");
    for (size_t i = 0; v != nullptr && i < v->size(); ++i) {
      if (!(*v)[i].is_string()) return Fail(where + key, "an array of strings"), out;
      out.push_back((*v)[i].get<std::string>());
    }
    return out;
  }
  const json& Obj(const json& obj, const std::string& where, const char* key) {
    static const json kEmpty = json::object();
    const json* v = Get(obj, where, key, &json::is_object, "an object");
    return v ? *v : kEmpty;
  }
  void Fail(const std::string& key, const char* expected) {
    if (status_.ok()) status_ = Status::InvalidArgument(file_ + ": key '" + key + "': expected " + expected);
  }

 private:
  // obj[key] when present (not null) and of the kind `is` accepts; records an
  // error when it is present with another kind.
  const json* Get(const json& obj, const std::string& where, const char* key, bool (json::*is)() const noexcept,
                  const char* expected) {
    if (!obj.is_object()) return nullptr;
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return nullptr;
    if (!((*it).*is)()) return Fail(where + key, expected), nullptr;
    return &*it;
  }

  std::string file_;
  Status status_;
};

void ReadCostRows(Fields& f, const json& list, std::vector<CostRow>* out) {
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string where = "cost_per_epoch[" + std::to_string(i) + "].";
    const json& c = list[i];
    if (!c.is_object() || f.Str(c, where, "instance_type").empty()) {
      f.Fail(where + "instance_type", "an object with a non-empty instance_type");
      return;
    }
    CostRow r;
    r.type = f.Str(c, where, "instance_type");
    r.provider = f.Str(c, where, "provider");
    r.reason = f.Str(c, where, "reason");
    r.feasible = f.Bool(c, where, "feasible", false);
    r.candidate = f.Bool(c, where, "candidate", true);
    r.nodes = f.Num(c, where, "nodes");
    r.epoch_hours = f.Num(c, where, "epoch_hours");
    r.cost = f.Num(c, where, "cost_per_epoch_usd");
    r.job_cost = f.Num(c, where, "job_cost_usd");
    const json& cal = f.Obj(c, where, "calibrated");
    r.cal_epoch_hours = f.Num(cal, where + "calibrated.", "epoch_hours");
    r.cal_cost = f.Num(cal, where + "calibrated.", "cost_per_epoch_usd");
    r.cal_job_cost = f.Num(cal, where + "calibrated.", "job_cost_usd");
    out->push_back(std::move(r));
  }
}

// "probe taken 2 h before this launch ... at load 2.41 on 2 cores; load now
// 0.40 ...; reused from the probe cache": from machine.probes (its conditions)
// and machine.facts (this launch); "" where the machine was not probed.
std::string ProbeLine(Fields& f, const json& machine) {
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

void ReadRunSections(Fields& f, const json& j, RunReport* r) {
  r->status = f.Str(j, "", "status");
  r->target = f.Str(j, "", "target");
  const json& facts = f.Obj(f.Obj(j, "", "machine"), "machine.", "facts");
  r->hostname = f.Str(facts, "machine.facts.", "hostname");
  r->cores = f.Num(facts, "machine.facts.", "cores");
  r->ram_bytes = f.Num(facts, "machine.facts.", "ram_bytes");
  r->gpus = f.Num(facts, "machine.facts.", "gpus");
  const std::string gpu_name = f.Str(facts, "machine.facts.", "gpu_name");
  r->simulated_device = r->gpus && *r->gpus == 0;
  if (r->simulated_device) r->device = "simulated in host memory (no GPU)";
  else if (r->gpus) r->device = gpu_name.empty() ? "GPU memory" : gpu_name + " memory";
  r->probe = ProbeLine(f, f.Obj(j, "", "machine"));
  const json& run = f.Obj(j, "", "run");
  r->instance_type = f.Str(run, "run.", "instance_type");
  r->dtype = f.Str(run, "run.", "dtype");
  r->policy = f.Str(run, "run.", "policy");
  r->nodes = f.Num(run, "run.", "nodes");
  r->ranks = f.Num(run, "run.", "ranks");
  r->steps = f.Num(run, "run.", "steps");
  const json& budgets = f.Obj(run, "run.", "budgets");
  for (int t = 0; t < kTiers; ++t) r->budget[t] = f.Num(budgets, "run.budgets.", kTierKeys[t]);
  const json& cal = f.Obj(j, "", "calibration");
  r->carried = f.Strings(cal, "calibration.", "carried");
  r->assumed = f.Strings(cal, "calibration.", "assumed");
  r->assumptions = f.Strings(j, "", "assumptions");
}

void ReadMeasuredPredicted(Fields& f, const json& j, RunReport* r) {
  const json& m = j["measured"];
  r->m_steps = f.Num(m, "measured.", "steps");
  r->m_warmup = f.Num(m, "measured.", "warmup_steps");
  r->m_step_time = f.Num(m, "measured.", "step_time_s");
  r->m_tokens = f.Num(m, "measured.", "tokens_per_s");
  r->m_stall = f.Num(m, "measured.", "stall_s");
  r->m_hit = f.Num(m, "measured.", "device_hit_rate");
  r->loss_first = f.Num(m, "measured.", "loss_first");
  r->loss_last = f.Num(m, "measured.", "loss_last");
  r->evaluations = f.Num(m, "measured.", "evaluations");
  r->eval_loss_first = f.Num(m, "measured.", "eval_loss_first");
  r->eval_loss_last = f.Num(m, "measured.", "eval_loss_last");
  r->skipped_steps = f.Num(m, "measured.", "skipped_steps");
  const json& lanes = f.Obj(m, "measured.", "lane_busy_s");
  for (int l = 0; l < kStepLanes; ++l) r->m_lanes[l] = f.Num(lanes, "measured.lane_busy_s.", StepLaneName(StepLane(l)));
  r->m_overlap = f.Num(m, "measured.", "overlap_efficiency");
  r->m_bound_lane = f.Str(m, "measured.", "bound_lane");
  const json& peak = f.Obj(m, "measured.", "peak_bytes");
  for (int t = 0; t < kTiers; ++t) r->m_peak[t] = f.Num(peak, "measured.peak_bytes.", kTierKeys[t]);
  const json& p = j["predicted"];
  r->p_step_time = f.Num(p, "predicted.", "step_time_s");
  r->p_tokens = f.Num(p, "predicted.", "tokens_per_s");
  r->p_stall = f.Num(p, "predicted.", "stall_s");
  // Predicted bytes per step: all ranks, or per rank (bytes_per_rank.h2d) times the ranks.
  const json& per_rank = f.Obj(p, "predicted.", "bytes_per_rank");
  for (int l = 0; l < kLinks; ++l) {
    r->m_bytes[l] = f.Num(m, "measured.", LinkBytesKey(l).c_str());
    r->p_bytes[l] = f.Num(p, "predicted.", LinkBytesKey(l).c_str());
    const Opt one = f.Num(per_rank, "predicted.bytes_per_rank.", LinkName(Link(l)));
    if (!r->p_bytes[l] && one && r->ranks) r->p_bytes[l] = *one * *r->ranks;
  }
  r->prediction_error = f.Num(j, "", "prediction_error");
  const json& cal = f.Obj(p, "predicted.", "calibrated");
  r->p_cal_step_time = f.Num(cal, "predicted.calibrated.", "step_time_s");
  r->p_cal_tokens = f.Num(cal, "predicted.calibrated.", "tokens_per_s");
  r->cal_factor = f.Num(cal, "predicted.calibrated.", "factor");
  r->cal_error = f.Num(j, "", "prediction_error_calibrated");
}

Status ReadReport(const std::string& path, RunReport* r) {
  const char* kExpected = "; expected the report.json tencache-launch writes at the end of a run";
  std::ifstream in(path);
  if (!in) return Status::NotFound(path + ": cannot open (" + std::strerror(errno) + ")" + kExpected);
  json j = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Status::InvalidArgument(path + ": not valid JSON" + kExpected);
  if (!j.is_object()) return Status::InvalidArgument(path + ": not a JSON object" + kExpected);
  for (const char* key : {"job", "measured", "predicted", "cost_per_epoch"}) {
    if (!j.contains(key)) return Status::InvalidArgument(path + ": key '" + key + "' missing" + kExpected);
  }
  Fields f(path);
  if (!j["job"].is_string()) f.Fail("job", "a string (the job name)");
  if (!j["measured"].is_object()) f.Fail("measured", "an object");
  if (!j["predicted"].is_object()) f.Fail("predicted", "an object");
  if (!j["cost_per_epoch"].is_array()) f.Fail("cost_per_epoch", "an array");
  TC_RETURN_IF_ERROR(f.status());
  r->job = j["job"].get<std::string>();
  ReadRunSections(f, j, r);
  ReadMeasuredPredicted(f, j, r);
  ReadCostRows(f, j["cost_per_epoch"], &r->costs);
  if (j.contains("nodes")) r->node_figures = j["nodes"];
  return f.status();
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
std::vector<const CostRow*> FeasibleByCost(const RunReport& r) {
  std::vector<const CostRow*> out;
  for (const CostRow& c : r.costs) {
    if (c.feasible) out.push_back(&c);
  }
  std::stable_sort(out.begin(), out.end(), [](const CostRow* a, const CostRow* b) {
    Opt x = a->SortCost(), y = b->SortCost();
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
std::string LinkName(const RunReport& r, int l) {
  const bool device = Link(l) == Link::kH2D || Link(l) == Link::kD2H;
  return std::string(NamesOf(Link(l)).title) + (r.simulated_device && device ? " (simulated device)" : "");
}

// What was measured against what the planner predicted, with the prediction
// error; with `tiers`, also the hit rate and bytes per link (report.md has
// those in its tier tables).
std::vector<std::vector<std::string>> MeasuredRows(const RunReport& r, bool tiers) {
  Opt step_error = r.prediction_error ? r.prediction_error : Error(r.m_step_time, r.p_step_time);
  std::vector<std::vector<std::string>> rows = {
      {"step time", Secs(r.m_step_time), Secs(r.p_step_time), SignedPct(step_error)}};
  if (r.p_cal_step_time) {
    rows.push_back({"step time, calibrated", Secs(r.m_step_time), Secs(r.p_cal_step_time),
                    SignedPct(r.cal_error ? r.cal_error : Error(r.m_step_time, r.p_cal_step_time))});
  }
  rows.insert(rows.end(), {
      {"tokens/s", Rate(r.m_tokens), Rate(r.p_tokens), SignedPct(Error(r.m_tokens, r.p_tokens))},
      {"stall per step", Secs(r.m_stall), Secs(r.p_stall), SignedPct(Error(r.m_stall, r.p_stall))}});
  if (tiers) rows.push_back({"device hit rate", Pct(r.m_hit), kNone, kNone});
  for (int l = 0; tiers && l < kLinks; ++l) {
    rows.push_back({LinkName(r, l) + " per step", Bytes(r.m_bytes[l]), Bytes(r.p_bytes[l]),
                    SignedPct(Error(r.m_bytes[l], r.p_bytes[l]))});
  }
  return rows;
}

// ------------------------------------------------------------------ report.md

struct Pictures {
  std::vector<std::pair<std::string, std::string>> drawn;  // file, caption
  std::vector<std::string> notes;                           // why some are missing
  Status status;                                            // first gnuplot failure
};

std::string WhatRan(const RunReport& r, const Metrics& m) {
  std::vector<std::vector<std::string>> rows = {{"", ""}};
  if (!r.target.empty()) rows.push_back({"target", r.target});
  if (!r.hostname.empty() || r.cores) {
    std::string machine = r.hostname.empty() ? "this machine" : r.hostname;
    if (r.cores) machine += ", " + Plural(std::llround(*r.cores), "core");
    if (r.ram_bytes) machine += ", " + FormatBytes(*r.ram_bytes) + " RAM";
    if (r.gpus) machine += ", " + Plural(std::llround(*r.gpus), "GPU");
    rows.push_back({"machine", machine});
  }
  if (!r.device.empty()) rows.push_back({"device tier", r.device});
  if (!r.probe.empty()) rows.push_back({"probe", r.probe});
  if (!r.instance_type.empty()) rows.push_back({"instance type", r.instance_type});
  if (r.nodes) rows.push_back({"nodes", Int(r.nodes)});
  if (r.ranks) rows.push_back({"ranks", Int(r.ranks)});
  std::string steps = (r.m_steps ? Int(r.m_steps) + " measured" : "") + (r.m_steps && r.steps ? " of " : "") +
                      (r.steps ? Int(r.steps) + " planned" : "");
  steps += (steps.empty() ? "" : "; ") + Plural(long(m.rows.size()), "step") + " in metrics.jsonl";
  if (r.m_warmup && *r.m_warmup > 0) {
    steps += "; measured values are medians after " + Plural(std::llround(*r.m_warmup), "warm-up step");
  }
  rows.push_back({"steps", steps});
  if (!r.dtype.empty()) rows.push_back({"dtype", r.dtype});
  if (!r.policy.empty()) rows.push_back({"cache policy", r.policy});
  for (int t = 0; t < kTiers; ++t) {
    if (r.budget[t]) rows.push_back({std::string(kTierNames[t]) + " budget", Bytes(r.budget[t])});
  }
  if (r.loss_first && r.loss_last) rows.push_back({"loss", Loss(*r.loss_first) + " -> " + Loss(*r.loss_last)});
  if (r.evaluations && r.eval_loss_first && r.eval_loss_last) {
    rows.push_back({"validation loss", Loss(*r.eval_loss_first) + " -> " + Loss(*r.eval_loss_last) + " (" +
                                           Plural(std::llround(*r.evaluations), "evaluation") + ")"});
  }
  if (r.skipped_steps) {
    rows.push_back({"skipped steps", Int(r.skipped_steps) + " (fp16 loss scaling: the gradient overflowed, no update)"});
  }
  return "## What ran\n\n" + MdTable(rows, /*text_columns=*/2);
}

constexpr const char* kSimulatedLinks =
    "The device tier is simulated in host memory (no GPU): host->device is a memcpy into it, and the worker "
    "computes on the CPU, so its reduce-scatters write every gradient straight into host memory and nothing "
    "moves device->host (none is predicted).";

std::string TierTables(const RunReport& r, const Metrics& m) {
  std::vector<std::vector<std::string>> tiers = {{"tier", "budget", "peak held", "hit rate"}};
  for (int t = 0; t < kTiers; ++t) {
    tiers.push_back({kTierNames[t], Bytes(r.budget[t]), Bytes(r.m_peak[t]), t == 0 ? Pct(r.m_hit) : kNone});
  }
  const std::string all = "all " + Plural(long(m.rows.size()), "logged step");
  std::vector<std::vector<std::string>> links = {
      {"link", "measured per step", "predicted per step", "prediction error", all}};
  for (int l = 0; l < kLinks; ++l) {
    links.push_back({LinkName(r, l), Bytes(r.m_bytes[l]), Bytes(r.p_bytes[l]),
                     SignedPct(Error(r.m_bytes[l], r.p_bytes[l])), FormatBytes(Total(m, l))});
  }
  return "## Tiers\n\n" + MdTable(tiers) + "\nHit rate: device parameter-shard accesses that found the shard "
         "still on the device (docs/worker.md).\n\n" + MdTable(links) +
         "\nBytes per step are summed over ranks." + (r.simulated_device ? " " + std::string(kSimulatedLinks) : "") +
         "\n";
}

// Each lane's busy time per step against the step time, and the overlap
// efficiency they bound (docs/worker.md "Lanes").
std::string LaneTable(const RunReport& r) {
  if (!r.m_overlap) return "";
  std::vector<std::vector<std::string>> rows = {{"lane", "busy per step", "share of the step"}};
  for (int l = 0; l < kStepLanes; ++l) {
    const Opt share = r.m_lanes[l] && r.m_step_time && *r.m_step_time > 0 ? Opt(*r.m_lanes[l] / *r.m_step_time)
                                                                          : std::nullopt;
    rows.push_back({StepLaneName(StepLane(l)), Secs(r.m_lanes[l]), Pct(share)});
  }
  char eff[32];
  std::snprintf(eff, sizeof eff, "%.2f", *r.m_overlap);
  return "## Lanes\n\nOverlap efficiency " + std::string(eff) + (r.m_bound_lane.empty() ? "" : ", bound by " + r.m_bound_lane) +
         ": the busiest lane's time over the step time (1.00: the step is as short as its slowest resource "
         "allows). Medians per step after warm-up; each lane the busiest rank's.\n\n" + MdTable(rows) + "\n";
}

std::string CostTable(const RunReport& r) {
  std::ostringstream out;
  out << "## Cost per epoch\n\n";
  std::vector<const CostRow*> feasible = FeasibleByCost(r);
  if (feasible.empty()) out << "No instance type of the catalog can run this job.\n";
  std::vector<std::vector<std::string>> rows = {{"instance", "cloud", "nodes", "epoch time", "$/epoch model-only",
                                                 "$/epoch calibrated", "cost of this job's steps"}};
  bool any_non_candidate = false;
  for (const CostRow* c : feasible) {
    std::string name = c->type + (c->candidate ? "" : " †") + (c->type == r.instance_type ? " (this run)" : "");
    any_non_candidate |= !c->candidate;
    rows.push_back({name, c->provider, Int(c->nodes), Hours(c->cal_epoch_hours ? c->cal_epoch_hours : c->epoch_hours),
                    Usd(c->cost), Usd(c->cal_cost), Usd(c->cal_job_cost ? c->cal_job_cost : c->job_cost)});
  }
  if (!feasible.empty()) {
    out << "Feasible instance types, cheapest first by cost calibrated on this run. Model-only: the planner's "
           "prediction; calibrated: the same with what this run measured (see Calibration). Epoch time and "
           "job cost are calibrated where known.\n\n"
        << MdTable(rows, /*text_columns=*/2);
    if (any_non_candidate) out << "\n† not among this job's candidate instance types.\n";
  }
  bool header = false;
  for (const CostRow& c : r.costs) {
    if (c.feasible) continue;
    if (!header) out << "\nInfeasible:\n\n";
    header = true;
    out << "- " << c.type << (c.provider.empty() ? "" : " (" + c.provider + ")") << ": "
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

std::string RenderMarkdown(const RunReport& r, const Metrics& m, const Pictures& p) {
  std::ostringstream out;
  out << "# Run report: " << r.job << (r.status.empty() ? "" : " (" + r.status + ")") << "\n\n";
  out << WhatRan(r, m) << "\n";
  out << "## Measured vs predicted\n\n";
  std::vector<std::vector<std::string>> rows = {{"", "measured", "predicted", "prediction error"}};
  for (auto& row : MeasuredRows(r, /*tiers=*/false)) rows.push_back(row);
  out << MdTable(rows) << "\nPrediction error: (predicted - measured) / measured.";
  if (r.cal_factor) {
    char factor[32];
    std::snprintf(factor, sizeof factor, "%.2f", *r.cal_factor);
    out << " Calibrated: the prediction with every speed divided by " << factor
        << ", what the first steps past warm-up took over what was predicted (see Calibration).";
  }
  out << "\n\n";
  if (const auto nodes = NodeRows(r.node_figures); nodes.size() > 2 || (nodes.size() == 2 && r.target == "hosts")) {
    out << "## Per node\n\nMedians per step after warm-up; stall and bytes summed over the node's ranks.\n\n"
        << MdTable(nodes, 2) << "\n";
  }
  out << TierTables(r, m) << "\n" << LaneTable(r) << CostTable(r) << "\n" << Calibration(r);
  out << "## Pictures\n\n";
  for (const auto& [file, caption] : p.drawn) out << "![" << caption << "](" << file << ")\n\n";
  for (const std::string& n : p.notes) out << n << "\n\n";
  out << MetricsNote(m);
  return out.str();
}

// -------------------------------------------------------------------- summary

std::string RenderSummary(const RunReport& r) {
  std::ostringstream out;
  out << "run " << r.job << (r.status.empty() ? "" : " (" + r.status + ")");
  if (r.m_steps) out << ": " << Int(r.m_steps) << " steps";
  if (!r.instance_type.empty()) out << " on " << r.instance_type;
  if (r.ranks) out << ", " << Plural(std::llround(*r.ranks), "rank");
  if (!r.dtype.empty()) out << ", " << r.dtype;
  out << "\n";
  std::vector<std::vector<std::string>> rows = {{"", "MEASURED", "PREDICTED", "PREDICTION ERROR"}};
  for (auto& row : MeasuredRows(r, /*tiers=*/true)) rows.push_back(row);
  out << FormatTable(rows);
  if (r.m_overlap) {
    char eff[96];
    std::snprintf(eff, sizeof eff, "overlap efficiency %.2f (busiest lane: %s)\n", *r.m_overlap,
                  r.m_bound_lane.empty() ? "-" : r.m_bound_lane.c_str());
    out << eff;
  }
  std::vector<const CostRow*> feasible = FeasibleByCost(r);
  if (feasible.empty()) {
    out << "\nno feasible instance type in the catalog\n";
  } else {
    out << "\ncheapest feasible instance types, per epoch:\n";
    std::vector<std::vector<std::string>> cost = {
        {"INSTANCE", "CLOUD", "NODES", "CALIBRATED", "MODEL-ONLY", "EPOCH TIME"}};
    for (size_t i = 0; i < feasible.size() && i < kSummaryInstances; ++i) {
      const CostRow& c = *feasible[i];
      cost.push_back({c.type, c.provider, Int(c.nodes), Usd(c.cal_cost), Usd(c.cost),
                      Hours(c.cal_epoch_hours ? c.cal_epoch_hours : c.epoch_hours)});
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
     << "plot 'loss_step_time.dat' using 1:2 axes x1y1 with " << Points(m) << " lw 2 title 'loss', \\\n"
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
     << "set key outside right\n"
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
  std::vector<const CostRow*> feasible = FeasibleByCost(r);
  std::string data = "# instance model_only_usd calibrated_usd\n";
  double lo = INFINITY, hi = 0;
  for (const CostRow* c : feasible) {
    std::string label = c->type + (c->nodes && *c->nodes > 1 ? " x" + Int(c->nodes) : "");
    data += "\"" + label + "\" " + GnuplotNumber(c->cost.value_or(NAN)) + " " + GnuplotNumber(c->cal_cost.value_or(NAN)) + "\n";
    for (Opt v : {c->cost, c->cal_cost}) {
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
    if (r.m_overlap) DrawLanes(g, run_dir, r, m, &p, warnings);
  }
  if (costs) DrawCostPerEpoch(g, run_dir, r, &p, warnings);
  return p;
}

}  // namespace

Status RenderReport(const std::string& run_dir, std::string* summary, std::vector<std::string>* warnings) {
  RunReport r;
  TC_RETURN_IF_ERROR(ReadReport(run_dir + "/report.json", &r));
  const Metrics m = ReadMetrics(run_dir + "/metrics.jsonl");
  if (warnings != nullptr) {
    if (!m.skipped.empty()) {
      warnings->push_back(run_dir + "/metrics.jsonl: skipped " + Plural(long(m.skipped.size()), "line") +
                          " that did not parse (first: " + m.skipped.front() + ")");
    }
    if (m.rows.empty()) warnings->push_back(run_dir + "/metrics.jsonl: no steps, so no pictures of steps");
  }
  const Pictures p = DrawPictures(run_dir, r, m, warnings);
  TC_RETURN_IF_ERROR(WriteFileAtomically(run_dir + "/report.md", RenderMarkdown(r, m, p)));
  if (summary != nullptr) *summary = RenderSummary(r);
  return p.status;
}

}  // namespace tencache
