#include "launcher/report_json.h"

#include <cerrno>
#include <cstring>
#include <fstream>

namespace tencache {
namespace {

using json = nlohmann::ordered_json;

// "bytes_h2d", ...: the key of a link's bytes a step (LinkNames' key behind "bytes_"),
// and the link's own key (bytes_per_rank.h2d, ...), in Link order.
struct LinkKeyTable {
  std::string bytes[kReportLinks];
  const char* per_rank[kReportLinks];
  LinkKeyTable() {
    for (Link l : kLinks) {
      bytes[int(l)] = std::string("bytes_") + LinkName(l);
      per_rank[int(l)] = LinkName(l);
    }
  }
};
const LinkKeyTable& LinkKeys() {
  static const LinkKeyTable keys;
  return keys;
}
const char* const kTierKeys[kReportTiers] = {"device", "host", "nvme"};
const char* const kPredictedLaneKeys[kReportPredictedLanes] = {"compute", "h2d", "d2h",
                                                               "nvme", "collectives", "optimizer"};

// Writes the set ones of `n` numbers under `keys`.
void PutNumbers(json* obj, const char* const* keys, const ReportNumber* n, int count) {
  for (int i = 0; i < count; ++i) {
    if (n[i]) (*obj)[keys[i]] = *n[i];
  }
}
void Put(json* obj, const char* key, const ReportNumber& n) {
  if (n) (*obj)[key] = *n;
}
// An integral number is written as one ("steps": 200, not 200.0).
void PutCount(json* obj, const char* key, const ReportNumber& n) {
  if (!n) return;
  if (*n == double(int64_t(*n))) (*obj)[key] = int64_t(*n);
  else (*obj)[key] = *n;
}

json PriceJson(const ReportPrice& p) {
  json j = json::object();
  Put(&j, "step_time_s", p.step_time_s);
  Put(&j, "epoch_hours", p.epoch_hours);
  Put(&j, "cost_per_epoch_usd", p.cost_per_epoch_usd);
  Put(&j, "job_cost_usd", p.job_cost_usd);
  return j;
}

ReportPrice ReadPrice(ReportFields& f, const json& j, const std::string& where) {
  return {f.Num(j, where, "step_time_s"), f.Num(j, where, "epoch_hours"), f.Num(j, where, "cost_per_epoch_usd"),
          f.Num(j, where, "job_cost_usd")};
}

json RunJson(const ReportRunSection& r) {
  json j = {{"instance_type", r.instance_type}};
  PutCount(&j, "nodes", r.nodes);
  PutCount(&j, "ranks", r.ranks);
  PutCount(&j, "steps", r.steps);
  PutCount(&j, "micro_batch", r.micro_batch);
  j["dtype"] = r.dtype;
  j["policy"] = r.policy;
  json budgets = json::object();
  for (int t = 0; t < kReportTiers; ++t) PutCount(&budgets, kTierKeys[t], r.budgets[t]);
  j["budgets"] = budgets;
  if (!r.hosts.empty()) {
    json list = json::array();
    for (const ReportHost& h : r.hosts) list.push_back({{"host", h.host}, {"ranks", h.ranks}});
    j["hosts"] = list;
  }
  return j;
}

void ReadRun(ReportFields& f, const json& j, ReportRunSection* r) {
  r->instance_type = f.Str(j, "run.", "instance_type");
  r->dtype = f.Str(j, "run.", "dtype");
  r->policy = f.Str(j, "run.", "policy");
  r->nodes = f.Num(j, "run.", "nodes");
  r->ranks = f.Num(j, "run.", "ranks");
  r->steps = f.Num(j, "run.", "steps");
  r->micro_batch = f.Num(j, "run.", "micro_batch");
  const json& budgets = f.Obj(j, "run.", "budgets");
  for (int t = 0; t < kReportTiers; ++t) r->budgets[t] = f.Num(budgets, "run.budgets.", kTierKeys[t]);
  const auto hosts = j.is_object() ? j.find("hosts") : j.end();
  if (hosts == j.end() || hosts->is_null()) return;
  if (!hosts->is_array()) return f.Fail("run.hosts", "an array of {host, ranks}");
  for (const json& h : *hosts) {
    if (!h.is_object() || !h.value("host", json()).is_string() || !h.value("ranks", json()).is_number_integer()) {
      return f.Fail("run.hosts", "an array of {host, ranks}");
    }
    r->hosts.push_back({h["host"].get<std::string>(), h["ranks"].get<int>()});
  }
}

json MeasuredJson(const ReportMeasured& m) {
  json j = json::object();
  PutCount(&j, "steps", m.steps);
  PutCount(&j, "warmup_steps", m.warmup_steps);
  Put(&j, "step_time_s", m.step_time_s);
  Put(&j, "tokens_per_s", m.tokens_per_s);
  Put(&j, "stall_s", m.stall_s);
  Put(&j, "device_hit_rate", m.device_hit_rate);
  for (int l = 0; l < kReportLinks; ++l) Put(&j, LinkKeys().bytes[l].c_str(), m.bytes[l]);
  json peak = json::object();
  PutNumbers(&peak, kTierKeys, m.peak_bytes, kReportTiers);
  j["peak_bytes"] = peak;
  Put(&j, "loss_first", m.loss_first);
  Put(&j, "loss_last", m.loss_last);
  PutCount(&j, "evaluations", m.evaluations);
  Put(&j, "eval_loss_first", m.eval_loss_first);
  Put(&j, "eval_loss_last", m.eval_loss_last);
  PutCount(&j, "skipped_steps", m.skipped_steps);
  json lanes = json::object();
  for (int l = 0; l < kStepLanes; ++l) Put(&lanes, StepLaneName(StepLane(l)), m.lane_busy_s[l]);
  if (!lanes.empty()) j["lane_busy_s"] = lanes;
  if (!m.bound_lane.empty()) j["bound_lane"] = m.bound_lane;
  Put(&j, "overlap_efficiency", m.overlap_efficiency);
  Put(&j, "optimizer_wait_s", m.optimizer_wait_s);
  return j;
}

void ReadMeasured(ReportFields& f, const json& m, ReportMeasured* r) {
  r->steps = f.Num(m, "measured.", "steps");
  r->warmup_steps = f.Num(m, "measured.", "warmup_steps");
  r->step_time_s = f.Num(m, "measured.", "step_time_s");
  r->tokens_per_s = f.Num(m, "measured.", "tokens_per_s");
  r->stall_s = f.Num(m, "measured.", "stall_s");
  r->device_hit_rate = f.Num(m, "measured.", "device_hit_rate");
  for (int l = 0; l < kReportLinks; ++l) r->bytes[l] = f.Num(m, "measured.", LinkKeys().bytes[l].c_str());
  const json& peak = f.Obj(m, "measured.", "peak_bytes");
  for (int t = 0; t < kReportTiers; ++t) r->peak_bytes[t] = f.Num(peak, "measured.peak_bytes.", kTierKeys[t]);
  r->loss_first = f.Num(m, "measured.", "loss_first");
  r->loss_last = f.Num(m, "measured.", "loss_last");
  r->evaluations = f.Num(m, "measured.", "evaluations");
  r->eval_loss_first = f.Num(m, "measured.", "eval_loss_first");
  r->eval_loss_last = f.Num(m, "measured.", "eval_loss_last");
  r->skipped_steps = f.Num(m, "measured.", "skipped_steps");
  const json& lanes = f.Obj(m, "measured.", "lane_busy_s");
  for (int l = 0; l < kStepLanes; ++l) {
    r->lane_busy_s[l] = f.Num(lanes, "measured.lane_busy_s.", StepLaneName(StepLane(l)));
  }
  r->bound_lane = f.Str(m, "measured.", "bound_lane");
  r->overlap_efficiency = f.Num(m, "measured.", "overlap_efficiency");
  r->optimizer_wait_s = f.Num(m, "measured.", "optimizer_wait_s");
}

json PredictedJson(const ReportPredicted& p) {
  json j = json::object();
  Put(&j, "step_time_s", p.step_time_s);
  Put(&j, "tokens_per_s", p.tokens_per_s);
  Put(&j, "stall_s", p.stall_s);
  json lanes = json::object();
  PutNumbers(&lanes, kPredictedLaneKeys, p.lanes_s, kReportPredictedLanes);
  if (!lanes.empty()) j["lanes_s"] = lanes;
  Put(&j, "optimizer_exposed_s", p.optimizer_exposed_s);
  Put(&j, "optimizer_hidden_s", p.optimizer_hidden_s);
  for (int l = 0; l < kReportLinks; ++l) Put(&j, LinkKeys().bytes[l].c_str(), p.bytes[l]);
  json per_rank = json::object();
  PutNumbers(&per_rank, LinkKeys().per_rank, p.bytes_per_rank, kReportLinks);
  if (!per_rank.empty()) j["bytes_per_rank"] = per_rank;
  if (p.calibrated) {
    json c = json::object();
    Put(&c, "step_time_s", p.calibrated->step_time_s);
    Put(&c, "tokens_per_s", p.calibrated->tokens_per_s);
    Put(&c, "factor", p.calibrated->factor);
    if (!p.calibrated->steps.empty()) c["steps"] = p.calibrated->steps;
    j["calibrated"] = c;
  }
  return j;
}

void ReadPredicted(ReportFields& f, const json& p, ReportPredicted* r) {
  r->step_time_s = f.Num(p, "predicted.", "step_time_s");
  r->tokens_per_s = f.Num(p, "predicted.", "tokens_per_s");
  r->stall_s = f.Num(p, "predicted.", "stall_s");
  const json& lanes = f.Obj(p, "predicted.", "lanes_s");
  for (int l = 0; l < kReportPredictedLanes; ++l) r->lanes_s[l] = f.Num(lanes, "predicted.lanes_s.", kPredictedLaneKeys[l]);
  r->optimizer_exposed_s = f.Num(p, "predicted.", "optimizer_exposed_s");
  r->optimizer_hidden_s = f.Num(p, "predicted.", "optimizer_hidden_s");
  const json& per_rank = f.Obj(p, "predicted.", "bytes_per_rank");
  for (int l = 0; l < kReportLinks; ++l) {
    r->bytes[l] = f.Num(p, "predicted.", LinkKeys().bytes[l].c_str());
    r->bytes_per_rank[l] = f.Num(per_rank, "predicted.bytes_per_rank.", LinkKeys().per_rank[l]);
  }
  const auto cal = p.find("calibrated");
  if (cal == p.end() || cal->is_null()) return;
  const json& c = f.Obj(p, "predicted.", "calibrated");
  ReportCalibratedStep s;
  s.step_time_s = f.Num(c, "predicted.calibrated.", "step_time_s");
  s.tokens_per_s = f.Num(c, "predicted.calibrated.", "tokens_per_s");
  s.factor = f.Num(c, "predicted.calibrated.", "factor");
  const auto steps = c.find("steps");
  if (steps != c.end() && !steps->is_null()) {
    if (!steps->is_array()) return f.Fail("predicted.calibrated.steps", "[first, last]");
    for (const json& n : *steps) {
      if (!n.is_number_integer()) return f.Fail("predicted.calibrated.steps", "[first, last]");
      s.steps.push_back(n.get<int64_t>());
    }
  }
  r->calibrated = s;
}

json CostRowJson(const ReportCostRow& c) {
  json e = {{"instance_type", c.instance_type}, {"provider", c.provider}};
  PutCount(&e, "nodes", c.nodes);
  e["feasible"] = c.feasible;
  e["reason"] = c.reason;
  e["candidate"] = c.candidate;
  Put(&e, "price_per_hour_usd", c.price_per_hour_usd);
  const json price = PriceJson(c.model);
  for (auto it = price.begin(); it != price.end(); ++it) e[it.key()] = it.value();
  if (c.calibrated) e["calibrated"] = PriceJson(*c.calibrated);
  return e;
}

void ReadCostRows(ReportFields& f, const json& list, std::vector<ReportCostRow>* out) {
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string where = "cost_per_epoch[" + std::to_string(i) + "].";
    const json& c = list[i];
    if (!c.is_object() || f.Str(c, where, "instance_type").empty()) {
      f.Fail(where + "instance_type", "an object with a non-empty instance_type");
      return;
    }
    ReportCostRow r;
    r.instance_type = f.Str(c, where, "instance_type");
    r.provider = f.Str(c, where, "provider");
    r.reason = f.Str(c, where, "reason");
    r.feasible = f.Bool(c, where, "feasible", false);
    r.candidate = f.Bool(c, where, "candidate", true);
    r.nodes = f.Num(c, where, "nodes");
    r.price_per_hour_usd = f.Num(c, where, "price_per_hour_usd");
    r.model = ReadPrice(f, c, where);
    const auto cal = c.find("calibrated");
    if (cal != c.end() && !cal->is_null()) r.calibrated = ReadPrice(f, f.Obj(c, where, "calibrated"), where + "calibrated.");
    out->push_back(std::move(r));
  }
}

}  // namespace

// ---- ReportFields ----

ReportNumber ReportFields::Num(const json& obj, const std::string& where, const char* key) {
  const json* v = Get(obj, where, key, &json::is_number, "a number");
  return v ? ReportNumber(v->get<double>()) : std::nullopt;
}

std::string ReportFields::Str(const json& obj, const std::string& where, const char* key) {
  const json* v = Get(obj, where, key, &json::is_string, "a string");
  return v ? v->get<std::string>() : "";
}

bool ReportFields::Bool(const json& obj, const std::string& where, const char* key, bool fallback) {
  const json* v = Get(obj, where, key, &json::is_boolean, "true or false");
  return v ? v->get<bool>() : fallback;
}

std::vector<std::string> ReportFields::Strings(const json& obj, const std::string& where, const char* key) {
  std::vector<std::string> out;
  const json* v = Get(obj, where, key, &json::is_array, "an array of strings");
  for (size_t i = 0; v != nullptr && i < v->size(); ++i) {
    if (!(*v)[i].is_string()) return Fail(where + key, "an array of strings"), out;
    out.push_back((*v)[i].get<std::string>());
  }
  return out;
}

const ReportFields::json& ReportFields::Obj(const json& obj, const std::string& where, const char* key) {
  static const json kEmpty = json::object();
  const json* v = Get(obj, where, key, &json::is_object, "an object");
  return v ? *v : kEmpty;
}

void ReportFields::Fail(const std::string& key, const char* expected) {
  if (status_.ok()) status_ = Status::InvalidArgument(file_ + ": key '" + key + "': expected " + expected);
}

const ReportFields::json* ReportFields::Get(const json& obj, const std::string& where, const char* key,
                                            bool (json::*is)() const noexcept, const char* expected) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  if (!((*it).*is)()) return Fail(where + key, expected), nullptr;
  return &*it;
}

// ---- RunReport ----

ReportNumber ReportPredicted::BytesAllRanks(int l, ReportNumber ranks) const {
  if (bytes[l]) return bytes[l];
  if (bytes_per_rank[l] && ranks) return *bytes_per_rank[l] * *ranks;
  return std::nullopt;
}

json RunReport::ToJson() const {
  json r = {{"job", job}, {"status", status}, {"target", target}};
  if (!machine.is_null()) r["machine"] = machine;
  r["run"] = RunJson(run);
  r["measured"] = MeasuredJson(measured);
  if (!nodes.is_null()) r["nodes"] = nodes;
  if (!attempts.is_null()) r["attempts"] = attempts;
  if (!spot.is_null()) r["spot"] = spot;
  r["predicted"] = PredictedJson(predicted);
  Put(&r, "prediction_error", prediction_error);
  Put(&r, "prediction_error_calibrated", prediction_error_calibrated);
  json costs = json::array();
  for (const ReportCostRow& c : cost_per_epoch) costs.push_back(CostRowJson(c));
  r["cost_per_epoch"] = costs;
  r["calibration"] = {{"carried", carried}, {"assumed", assumed}};
  r["assumptions"] = assumptions;
  return r;
}

StatusOr<RunReport> RunReport::FromJson(const json& j, const std::string& file) {
  const char* kExpected = "; expected the report.json tencache-launch writes at the end of a run";
  if (!j.is_object()) return Status::InvalidArgument(file + ": not a JSON object" + kExpected);
  for (const char* key : {"job", "measured", "predicted", "cost_per_epoch"}) {
    if (!j.contains(key)) return Status::InvalidArgument(file + ": key '" + key + "' missing" + kExpected);
  }
  ReportFields f(file);
  if (!j["job"].is_string()) f.Fail("job", "a string (the job name)");
  if (!j["measured"].is_object()) f.Fail("measured", "an object");
  if (!j["predicted"].is_object()) f.Fail("predicted", "an object");
  if (!j["cost_per_epoch"].is_array()) f.Fail("cost_per_epoch", "an array");
  TC_RETURN_IF_ERROR(f.status());
  RunReport r;
  r.job = j["job"].get<std::string>();
  r.status = f.Str(j, "", "status");
  r.target = f.Str(j, "", "target");
  if (j.contains("machine")) r.machine = j["machine"];
  ReadRun(f, f.Obj(j, "", "run"), &r.run);
  ReadMeasured(f, j["measured"], &r.measured);
  if (j.contains("nodes")) r.nodes = j["nodes"];
  if (j.contains("attempts")) {
    if (!j["attempts"].is_array()) f.Fail("attempts", "an array");
    r.attempts = j["attempts"];
  }
  if (j.contains("spot") && !j["spot"].is_null()) {
    if (!j["spot"].is_object()) f.Fail("spot", "an object");
    r.spot = j["spot"];
  }
  ReadPredicted(f, j["predicted"], &r.predicted);
  r.prediction_error = f.Num(j, "", "prediction_error");
  r.prediction_error_calibrated = f.Num(j, "", "prediction_error_calibrated");
  ReadCostRows(f, j["cost_per_epoch"], &r.cost_per_epoch);
  const json& cal = f.Obj(j, "", "calibration");
  r.carried = f.Strings(cal, "calibration.", "carried");
  r.assumed = f.Strings(cal, "calibration.", "assumed");
  r.assumptions = f.Strings(j, "", "assumptions");
  TC_RETURN_IF_ERROR(f.status());
  return r;
}

StatusOr<RunReport> RunReport::Read(const std::string& file) {
  const char* kExpected = "; expected the report.json tencache-launch writes at the end of a run";
  std::ifstream in(file);
  if (!in) return Status::NotFound(file + ": cannot open (" + std::strerror(errno) + ")" + kExpected);
  json j = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Status::InvalidArgument(file + ": not valid JSON" + kExpected);
  return FromJson(j, file);
}

}  // namespace tencache
