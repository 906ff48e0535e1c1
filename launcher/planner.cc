#include "launcher/planner.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>
#include <sstream>

#include "common/byte_size.h"
#include "common/human_format.h"
#include "launcher/local_machine.h"

namespace tencache {
namespace {

// Lower is better.
double Score(const Candidate& c, Objective objective) {
  return objective == Objective::kCost ? c.cost_per_epoch_usd : c.epoch_hours;
}

bool Better(const Candidate& a, const Candidate& b, Objective objective) {
  if (a.feasible != b.feasible) return a.feasible;
  if (!a.feasible) return false;
  double sa = Score(a, objective), sb = Score(b, objective);
  if (sa != sb) return sa < sb;
  return a.nodes < b.nodes;
}

StatusOr<std::vector<const InstanceSpec*>> SelectInstances(const JobSpec& job, const Catalog& catalog) {
  std::vector<const InstanceSpec*> out;
  if (job.cluster.instance_types.empty()) {
    for (const InstanceSpec& s : catalog.instances()) out.push_back(&s);
    return out;
  }
  for (const std::string& type : job.cluster.instance_types) {
    StatusOr<const InstanceSpec*> found = catalog.FindInstance(type);
    if (!found.ok()) {
      return Status::InvalidArgument(job.Where("cluster.instance_types") + ": " + found.status().message() +
                                     "; expected instance types from the catalog (configs/instances)");
    }
    out.push_back(*found);
  }
  return out;
}

// "cache.host_budget 8GB = 7.45 GiB": the text as written, and the parsed
// value in binary units unless the text already says that ("8GiB", "512 MiB").
std::string BudgetAsWritten(const std::string& key, const std::string& written, uint64_t bytes) {
  auto squeeze = [](const std::string& s) {
    std::string out;
    for (char c : s) {
      if (c != ' ' && c != '\t') out += char(std::tolower(static_cast<unsigned char>(c)));
    }
    return out;
  };
  const std::string text = written.size() > 64 ? written.substr(0, 64) + "..." : written;
  std::string binary = FormatBytes(bytes);  // "8.00 GiB": drop the fraction's trailing zeros
  if (const size_t dot = binary.find('.'); dot != std::string::npos) {
    const size_t space = binary.find(' ', dot);
    size_t keep = binary.find_last_not_of('0', space - 1);
    if (keep == dot) --keep;
    binary.erase(keep + 1, space - keep - 1);
  }
  if (bytes == 0 || squeeze(text) == squeeze(binary)) return key + " " + text;
  return key + " " + text + " = " + FormatBytes(bytes);
}

// Of the infeasible node counts, the one to report: the largest that passed the
// batch check (more nodes shrink the per-rank states), else the first.
const Candidate& ClosestInfeasible(const std::vector<Candidate>& tried) {
  for (auto it = tried.rbegin(); it != tried.rend(); ++it) {
    if (it->reason.rfind("train.global_batch", 0) != 0) return *it;
  }
  return tried.front();
}

}  // namespace

Candidate EvaluateWithMicroBatch(const JobSpec& job, const InstanceSpec& inst, const GpuSpec& gpu, int nodes,
                                 const ModelAssumptions& a) {
  const int ranks = nodes * inst.gpu_count;
  if (job.cluster.ranks_per_node > 0 && job.cluster.ranks_per_node != inst.gpu_count && inst.type != "local") {
    JobSpec one = job;
    one.train.micro_batch = std::max(1, job.train.micro_batch);
    Candidate c = EvaluateCandidate(one, inst, gpu, nodes, a);
    c.feasible = false;
    c.reason = "cluster.ranks_per_node " + std::to_string(job.cluster.ranks_per_node) + " differs from its " +
               std::to_string(inst.gpu_count) + " GPU(s) per node (one rank per GPU)";
    return c;
  }
  if (job.train.micro_batch > 0) return EvaluateCandidate(job, inst, gpu, nodes, a);
  // The largest micro-batch that divides the rank's share and fits. A smaller
  // one needs less memory, so feasibility only grows as the micro-batch
  // shrinks: a binary search over the share's divisors finds it.
  JobSpec trial = job;
  const int per_rank = job.train.global_batch / ranks;
  std::vector<int> divisors;  // of the share (1 where the ranks outnumber the batch), descending, ending in 1
  const int share = std::max(per_rank, 1);
  for (int d = 1; int64_t(d) * d <= share; ++d) {
    if (share % d != 0) continue;
    divisors.push_back(d);
    if (d != share / d) divisors.push_back(share / d);
  }
  std::sort(divisors.rbegin(), divisors.rend());
  auto evaluate = [&](size_t i) {
    trial.train.micro_batch = divisors[i];
    return EvaluateCandidate(trial, inst, gpu, nodes, a);
  };
  size_t lo = 0, hi = divisors.size() - 1;  // divisors[hi] == 1
  Candidate best = evaluate(hi);
  if (!best.feasible) return best;  // not even one sequence fits: say why at 1
  while (lo < hi) {                 // divisors[hi] fits; those before lo do not
    const size_t mid = lo + (hi - lo) / 2;
    Candidate c = evaluate(mid);
    if (c.feasible) {
      best = std::move(c);
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  return best;
}

StatusOr<PlanResult> PlanJob(const JobSpec& job, const Catalog& catalog, const ModelAssumptions& a,
                             const LocalCandidate* local) {
  TC_ASSIGN_OR_RETURN(std::vector<const InstanceSpec*> instances, SelectInstances(job, catalog));
  // Spot pricing needs spot prices: refuse up front when no candidate has one,
  // rather than list every instance type as infeasible. Candidates without one
  // (when some have one) stay infeasible with their reason.
  if (job.cluster.use_spot &&
      std::none_of(instances.begin(), instances.end(), [](const InstanceSpec* s) { return s->price_spot.has_value(); })) {
    return Status::InvalidArgument(job.Where("cluster.use_spot") + ": the catalog at " + catalog.path() +
                                   " has no spot price for any candidate; expected cluster.use_spot: false, or a "
                                   "catalog whose instances carry price.spot (USD/h, with its source)");
  }
  PlanResult r;
  r.job_name = job.name;
  r.model = job.model;
  r.dtype = job.dtype;
  r.params = job.model.ParamCount();
  r.model_state_bytes = ShardBytesPerRank(job.model, job.dtype, 1).total();
  r.tokens_per_epoch = job.train.tokens_per_epoch;
  r.objective = job.cluster.objective;
  r.spot_restart_s = job.cluster.spot_restart_s;
  r.spot_restart_assumed = job.locations.count("cluster.spot_restart_s") == 0;
  for (const auto& [key, budget] : {std::pair<const char*, std::optional<uint64_t>>{"cache.device_budget",
                                                                                    job.cache.device_budget},
                                    {"cache.host_budget", job.cache.host_budget},
                                    {"cache.nvme_budget", job.cache.nvme_budget}}) {
    if (!budget) continue;
    auto text = job.size_texts.find(key);
    r.budgets.push_back(BudgetAsWritten(key, text != job.size_texts.end() ? text->second : std::to_string(*budget),
                                        *budget));
  }
  std::vector<Candidate> feasible, infeasible;
  for (const InstanceSpec* inst : instances) {
    const GpuSpec* gpu = catalog.FindGpu(inst->gpu);
    std::vector<Candidate> tried;
    const int lo = job.cluster.nodes > 0 ? job.cluster.nodes : 1;
    // A node count whose ranks do not divide the batch cannot train (each rank
    // takes an equal share of whole sequences): past the first, such counts
    // are not evaluated, which bounds the work by the batch's divisors.
    const int gpus = std::max(1, inst->gpu_count);
    const int hi = job.cluster.nodes > 0 ? job.cluster.nodes
                                         : std::min(job.cluster.max_nodes, std::max(lo, job.train.global_batch / gpus));
    for (int nodes = lo; nodes <= hi; ++nodes) {
      if (nodes > lo && job.train.global_batch % (int64_t(nodes) * gpus) != 0) continue;
      tried.push_back(EvaluateWithMicroBatch(job, *inst, *gpu, nodes, a));
      r.evaluated.push_back(tried.back());
    }
    auto best = std::min_element(tried.begin(), tried.end(),
                                 [&](const Candidate& x, const Candidate& y) { return Better(x, y, r.objective); });
    if (best->feasible) feasible.push_back(*best);
    else infeasible.push_back(ClosestInfeasible(tried));
  }
  std::stable_sort(feasible.begin(), feasible.end(),
                   [&](const Candidate& x, const Candidate& y) { return Better(x, y, r.objective); });
  r.candidates = feasible;
  r.candidates.insert(r.candidates.end(), infeasible.begin(), infeasible.end());
  r.chosen = feasible.empty() ? -1 : 0;
  if (local != nullptr) {
    r.local = EvaluateWithMicroBatch(job, local->instance, local->gpu, local->nodes, local->assumptions);
    r.local_notes = local->notes;
    for (const std::string& n : r.local->assumptions) r.local_notes.push_back(n);
  }
  if (r.local && r.local->feasible) r.checkpoints = CheckpointPlan(job, *r.local);
  else if (r.chosen >= 0) r.checkpoints = CheckpointPlan(job, r.candidates[size_t(r.chosen)]);
  return r;
}

std::string CheckpointPlan(const JobSpec& job, const Candidate& c) {
  const TrainSpec& t = job.train;
  const bool automatic = t.checkpoint_every == kCheckpointEveryAuto;
  const int every = automatic ? c.checkpoint_every : t.checkpoint_every;
  std::string when = every > 0 ? "every " + std::to_string(every) + " steps" : "";
  if (t.checkpoint_on_stop) when += when.empty() ? "on a stop (SIGINT / SIGTERM)" : " and on a stop";
  if (automatic) when += " (train.checkpoint_every auto, " + c.checkpoint_every_why + ")";
  if (every == 0 && !t.checkpoint_on_stop) {
    return "checkpoints: none (train.checkpoint_every 0, train.checkpoint_on_stop false)";
  }
  const bool k8s = job.cluster.target == Target::kK8s;
  std::string where;
  const std::string dir = job.locations.count("train.checkpoint_dir") != 0 ? t.checkpoint_dir : "";
  if (k8s && !job.cluster.k8s.checkpoint_claim.empty()) {
    where = (dir.empty() ? "" : dir + " on ") + "the PersistentVolumeClaim " + job.cluster.k8s.checkpoint_claim +
            " (cluster.checkpoint_claim)";
  } else if (k8s) {
    where = (dir.empty() ? "" : dir + " on ") + "the nodes' own disk (not durable: name a volume in "
                                                "cluster.checkpoint_claim)";
  } else {
    where = dir.empty() ? "the run folder's checkpoints/" : dir + " (train.checkpoint_dir)";
  }
  const CheckpointTiming& ck = c.checkpoint;
  std::string line = "checkpoints: " + when + ", to " + where + ": " + FormatBytes(ck.bytes_per_rank) + " a rank, " +
                     FormatBytes(ck.bytes_per_node) + " a node";
  if (ck.known()) {
    char rate[32];
    std::snprintf(rate, sizeof rate, "%.2f", ck.write_gbps);
    line += ", written in " + FormatDuration(ck.write_s) + " at " + rate + " GB/s (" + ck.bandwidth + ")";
    if (c.checkpoint_hours > 0) line += "; on demand they add " + FormatDuration(c.checkpoint_hours * 3600) + " an epoch";
  } else {
    line += "; the disk's write bandwidth is unknown, so how long one takes is not predicted";
  }
  return line;
}

namespace {

std::string Placement3(const Candidate& c) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "G%.0f/C%.0f/N%.0f", 100 * c.placement.TierFraction(kGpu),
                100 * c.placement.TierFraction(kCpu), 100 * c.placement.TierFraction(kNvme));
  return buf;
}

std::string Num(const char* fmt, double v) {
  char buf[48];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

std::string Count(double n) {
  if (n >= 1e9) return Num("%.2fB", n / 1e9);
  if (n >= 1e6) return Num("%.1fM", n / 1e6);
  if (n >= 1e3) return Num("%.1fK", n / 1e3);
  return Num("%.0f", n);
}

std::vector<std::string> Row(const Candidate& c, bool chosen) {
  const bool priced = c.instance->provider != "local";
  return {c.instance->type,
          c.instance->provider,
          std::to_string(c.nodes) + "x" + std::to_string(c.instance->gpu_count) + " " + c.instance->gpu,
          priced ? Num("%.2f", c.price_per_node_hour * c.nodes) : "-",
          FormatBytes(c.budgets.device),
          FormatBytes(c.budgets.host),
          FormatBytes(c.budgets.nvme),
          Placement3(c),
          FormatDuration(c.step.step_s),
          Count(c.tokens_per_s),
          FormatDuration(c.epoch_hours * 3600),
          priced ? FormatUsd(c.on_demand_cost_per_epoch_usd) : "-",
          priced && c.spot_estimate.known ? FormatUsd(c.spot_estimate.cost_per_epoch_usd) : "-",
          chosen ? "*" : ""};
}

}  // namespace

std::string RenderPlanTable(const PlanResult& plan, bool all_nodes) {
  std::ostringstream out;
  out << "job " << plan.job_name << ": model " << plan.model.name << ", " << Count(double(plan.params))
      << " parameters, " << DTypeName(plan.dtype) << ", model states " << FormatBytes(plan.model_state_bytes)
      << ", " << plan.tokens_per_epoch << " tokens per epoch; objective "
      << (plan.objective == Objective::kCost ? "cost" : "time") << "\n";
  if (!plan.budgets.empty()) {
    out << "budgets per rank from the job:";
    for (size_t i = 0; i < plan.budgets.size(); ++i) out << (i ? ", " : " ") << plan.budgets[i];
    out << "\n";
  }
  out << "\n";
  std::vector<std::vector<std::string>> rows = {{"INSTANCE", "CLOUD", "NODES x GPUs", "$/h", "GPU/rank",
                                                 "CPU/rank", "NVMe/rank", "PLACEMENT", "STEP", "TOKENS/S",
                                                 "EPOCH", "$/EPOCH", "SPOT $/EPOCH", "CHOSEN"}};
  const std::vector<Candidate>& list = all_nodes ? plan.evaluated : plan.candidates;
  std::vector<std::pair<std::string, std::string>> infeasible;
  for (size_t i = 0; i < list.size(); ++i) {
    const Candidate& c = list[i];
    if (!c.feasible) {
      infeasible.push_back({c.instance->type + (all_nodes ? " x" + std::to_string(c.nodes) : ""), c.reason});
      continue;
    }
    bool chosen = plan.chosen >= 0 && c.instance == plan.candidates[plan.chosen].instance &&
                  c.nodes == plan.candidates[plan.chosen].nodes;
    rows.push_back(Row(c, chosen));
  }
  if (rows.size() > 1) out << FormatTable(rows);
  else out << "No feasible plan.\n";
  out << "GPU/rank, CPU/rank, NVMe/rank: what the worker's cache gets on each rank (cache.device_budget, pinned\n"
         "cache.host_budget, cache.nvme_budget in job.resolved.yaml; the host tier holds every shard that fits).\n"
         "PLACEMENT: share of model states the model keeps on GPU / pinned CPU / NVMe for its step time.\n"
         "$/EPOCH: on-demand nodes, training alone. SPOT $/EPOCH: expected on spot nodes, with the work\n"
         "preemptions lose, checkpoints and restarts (docs/launcher.md, \"Spot pricing\"); EPOCH and the\n"
         "ranking use it with cluster.use_spot.\n";
  if (!infeasible.empty()) {
    out << "\nInfeasible:\n";
    for (const auto& [type, reason] : infeasible) out << "  " << type << ": " << reason << "\n";
  }
  // Each assumption once, with the instance types it applies to (once each:
  // an assumed spot rate is also among a spot candidate's assumptions).
  std::map<std::string, std::vector<std::string>> notes;
  for (const Candidate& c : plan.candidates) {
    if (!c.feasible) continue;
    auto note = [&](const std::string& text) {
      std::vector<std::string>& types = notes[text];
      if (types.empty() || types.back() != c.instance->type) types.push_back(c.instance->type);
    };
    note("price: " + c.instance->price_source + ", recorded " + c.instance->price_recorded +
         "; refresh before trusting");
    for (const std::string& n : c.assumptions) note(n);
    const SpotEstimate& s = c.spot_estimate;
    if (c.instance->price_spot) {
      note("spot price: " + (c.instance->spot_source.empty() ? c.instance->price_source : c.instance->spot_source));
    }
    if (s.known) {
      note(s.rate_source);
      note("spot restart: " + FormatDuration(plan.spot_restart_s) + " after a preemption" +
           (plan.spot_restart_assumed ? " assumed (cluster.spot_restart_s)" : " (cluster.spot_restart_s)") +
           ", plus cluster.restart_backoff_s and the checkpoint's read");
    } else if (c.instance->price_spot) {
      note("spot cost unknown: " + s.missing);
    }
  }
  if (!notes.empty()) {
    out << "\nAssumptions (and the instances they apply to):\n";
    for (const auto& [note, types] : notes) {
      out << "  " << note << ":";
      for (const std::string& t : types) out << " " << t;
      out << "\n";
    }
  }
  if (plan.local) {
    const Candidate& c = *plan.local;
    out << (c.instance->provider != "local"
                ? "\nThe hosts (cluster.target hosts runs there; each a " + c.instance->type + " from the catalog):\n"
            : c.nodes > 1 ? "\nThe hosts (cluster.target hosts runs there; each measured like this machine):\n"
                          : "\nThis machine (cluster.target local runs here):\n");
    if (c.feasible) {
      std::vector<std::vector<std::string>> local_rows = {rows.front(), Row(c, false)};
      local_rows[1].back() = "run";
      out << FormatTable(local_rows);
    } else {
      out << "  infeasible: " << c.reason << "\n";
    }
    for (const std::string& n : plan.local_notes) out << "  " << n << "\n";
  }
  if (!plan.checkpoints.empty()) out << "\n" << plan.checkpoints << "\n";
  if (plan.chosen >= 0) {
    const Candidate& c = plan.candidates[plan.chosen];
    out << "\nChosen: " << c.nodes << " x " << c.instance->type << " (" << c.ranks << " rank" << (c.ranks == 1 ? "" : "s") << "), "
        << FormatUsd(c.cost_per_epoch_usd) << " and " << FormatDuration(c.epoch_hours * 3600) << " per epoch\n";
    const SpotEstimate& s = c.spot_estimate;
    if (s.known) {
      char buf[512];
      std::snprintf(buf, sizeof buf,
                    "  on spot: %s expected (on-demand %s): %.2g preemption(s) an epoch, one every %s; "
                    "checkpoint every %d step(s)%s; adds %s of checkpoints, %s of lost work, %s of restarts\n",
                    FormatUsd(s.cost_per_epoch_usd).c_str(), FormatUsd(c.on_demand_cost_per_epoch_usd).c_str(),
                    s.preemptions, FormatDuration(s.mtbp_s).c_str(), s.checkpoint_every,
                    s.notice_saves ? " and in the preemption notice" : "",
                    FormatDuration(s.checkpoint_hours * 3600).c_str(), FormatDuration(s.lost_hours * 3600).c_str(),
                    FormatDuration(s.restart_hours * 3600).c_str());
      out << buf;
    }
    if (c.step.optimizer_hidden_s > 0) {
      out << "  optimizer lane (train.optimizer_overlap): " << FormatDuration(c.step.optimizer_hidden_s)
          << " of the updates hidden per step, " << FormatDuration(c.step.optimizer_exposed_s) << " on the step\n";
    }
  }
  return out.str();
}

namespace {

nlohmann::ordered_json CandidateJson(const Candidate& c) {
  nlohmann::ordered_json j;
  j["instance_type"] = c.instance->type;
  j["provider"] = c.instance->provider;
  j["gpu"] = c.instance->gpu;
  j["nodes"] = c.nodes;
  j["gpus_per_node"] = c.instance->gpu_count;
  j["ranks"] = c.ranks;
  j["micro_batch"] = c.micro_batch;
  j["spot"] = c.spot;
  j["price_per_hour_usd"] = c.price_per_node_hour * c.nodes;
  j["feasible"] = c.feasible;
  j["reason"] = c.reason;
  j["budgets"] = {{"device", c.budgets.device}, {"host", c.budgets.host}, {"nvme", c.budgets.nvme}};
  j["per_rank"] = {{"gpu_bytes", c.placement.bytes[kGpu]},
                   {"cpu_bytes", c.placement.bytes[kCpu]},
                   {"nvme_bytes", c.placement.bytes[kNvme]},
                   {"gpu_fixed_bytes", c.gpu_fixed.total()},
                   {"activation_bytes", c.gpu_fixed.activations},
                   {"state_bytes", c.states.total()},
                   {"host_overhead_bytes", c.host_overhead_bytes}};
  nlohmann::ordered_json placement;
  for (int s = 0; s < kNumStateClasses; ++s) {
    placement[StateClassName(s)] = {{"gpu", c.placement.fraction[s][kGpu]},
                                    {"cpu", c.placement.fraction[s][kCpu]},
                                    {"nvme", c.placement.fraction[s][kNvme]}};
  }
  j["placement"] = placement;
  j["step_time_s"] = c.step.step_s;
  j["step"] = {{"accum_steps", c.step.accum_steps},   {"compute_s", c.step.compute_s},
               {"h2d_s", c.step.h2d_s},               {"d2h_s", c.step.d2h_s},
               {"nvme_s", c.step.nvme_s},             {"collective_s", c.step.collective_s},
               {"micro_step_s", c.step.micro_step_s}, {"optimizer_s", c.step.optimizer_s},
               {"optimizer_hidden_s", c.step.optimizer_hidden_s}, {"optimizer_exposed_s", c.step.optimizer_exposed_s}};
  for (Link l : kLinks) j["step"][std::string("bytes_") + LinkName(l)] = c.step.bytes[l];
  j["tokens_per_s"] = c.tokens_per_s;
  j["epoch_hours"] = c.epoch_hours;
  j["cost_per_epoch_usd"] = c.cost_per_epoch_usd;
  j["on_demand_cost_per_epoch_usd"] = c.on_demand_cost_per_epoch_usd;
  j["checkpoint_hours"] = c.checkpoint_hours;
  j["checkpoint_every"] = c.checkpoint_every;
  j["checkpoint_write_s"] = c.checkpoint.write_s;
  const SpotEstimate& s = c.spot_estimate;
  nlohmann::ordered_json spot = {{"known", s.known}, {"missing", s.missing}};
  if (s.known) {
    spot["price_per_node_hour"] = s.price_per_node_hour;
    spot["monthly_interruption_share"] = s.monthly_share;
    spot["rate_source"] = s.rate_source;
    spot["rate_assumed"] = s.rate_assumed;
    spot["mtbp_s"] = s.mtbp_s;
    spot["restart_s"] = s.restart_s;
    spot["notice_s"] = s.notice_s;
    spot["notice_saves"] = s.notice_saves;
    spot["checkpoint_every"] = s.checkpoint_every;
    spot["preemptions"] = s.preemptions;
    spot["epoch_hours"] = s.epoch_hours;
    spot["checkpoint_hours"] = s.checkpoint_hours;
    spot["lost_hours"] = s.lost_hours;
    spot["restart_hours"] = s.restart_hours;
    spot["cost_per_epoch_usd"] = s.cost_per_epoch_usd;
  }
  j["spot_estimate"] = spot;
  j["price_source"] = c.instance->price_source;
  j["assumptions"] = c.assumptions;
  return j;
}

}  // namespace

nlohmann::ordered_json PlanToJson(const PlanResult& plan, bool all_nodes) {
  nlohmann::ordered_json j;
  j["job"] = plan.job_name;
  j["model"] = {{"name", plan.model.name},
                {"params", plan.params},
                {"model_state_bytes", plan.model_state_bytes},
                {"dtype", DTypeName(plan.dtype)},
                {"train_flops_per_sequence", MicroStepFlops(plan.model, 1)}};
  j["tokens_per_epoch"] = plan.tokens_per_epoch;
  j["objective"] = plan.objective == Objective::kCost ? "cost" : "time";
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const Candidate& c : all_nodes ? plan.evaluated : plan.candidates) list.push_back(CandidateJson(c));
  j["candidates"] = list;
  j["chosen"] = plan.chosen >= 0 ? nlohmann::ordered_json(plan.candidates[plan.chosen].instance->type)
                                 : nlohmann::ordered_json(nullptr);
  if (plan.chosen >= 0) j["chosen_nodes"] = plan.candidates[plan.chosen].nodes;
  if (plan.local) {
    j["local"] = CandidateJson(*plan.local);
    j["local_notes"] = plan.local_notes;
  }
  if (!plan.checkpoints.empty()) j["checkpoints"] = plan.checkpoints;
  return j;
}

}  // namespace tencache
