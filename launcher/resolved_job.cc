#include "launcher/resolved_job.h"

#include <algorithm>
#include <sstream>

#include "common/byte_size.h"
#include "common/human_format.h"
#include "common/job_keys.h"
#include "launcher/cache_budgets.h"

namespace tencache {
namespace {

// Per-rank budgets in the worker's accounting, as the plan computed them
// (Candidate::budgets, launcher/cache_budgets.h).
Status ResolveBudgets(const Candidate& c, ResolvedJob* r) {
  const CacheBudgets& b = c.budgets;
  if (!b.error.empty()) return Status::InvalidArgument(b.error);
  if (!c.feasible) return Status::InvalidArgument("the planned candidate is infeasible: " + c.reason);
  CacheSpec& cache = r->job.cache;
  cache.device_budget = b.device;
  cache.host_budget = b.host;
  cache.nvme_budget = b.nvme;
  for (const auto& [key, why] : {std::pair<const char*, const std::string*>{"cache.device_budget", &b.device_why},
                                 {"cache.host_budget", &b.host_why}, {"cache.nvme_budget", &b.nvme_why}}) {
    if (!why->empty()) r->why[key] = *why;
  }
  return Status::Ok();
}

// `text` kept on one comment line (Excerpt, uncut).
std::string CommentText(const std::string& text) { return Excerpt(text, text.size()); }

}  // namespace

StatusOr<ResolvedJob> ResolveJob(const JobSpec& job, const Candidate& run) {
  ResolvedJob r;
  r.job = job;
  ClusterSpec& cl = r.job.cluster;
  if (cl.nodes == 0) r.why["cluster.nodes"] = "planned: " + std::to_string(run.nodes) + " x " + run.instance->type;
  if (cl.ranks_per_node == 0) {
    r.why["cluster.ranks_per_node"] =
        "planned: " + std::string(run.instance->type == "local" ? "this machine's cores and batch allow "
                                                                 : "one rank per GPU: ") +
        std::to_string(run.instance->gpu_count);
  }
  cl.nodes = run.nodes;
  cl.ranks_per_node = run.instance->gpu_count;
  cl.max_nodes = std::max(cl.max_nodes, cl.nodes);
  if (job.train.micro_batch == 0) {
    r.why["train.micro_batch"] = "planned: the largest micro-batch that fits (" +
                                 std::to_string(job.train.global_batch / (run.micro_batch * run.ranks)) +
                                 " accumulation step(s))";
  }
  r.job.train.micro_batch = run.micro_batch;
  if (job.train.checkpoint_every == kCheckpointEveryAuto) {
    r.why["train.checkpoint_every"] = run.checkpoint_every_why;
    r.job.train.checkpoint_every = run.checkpoint_every;
  }
  if (!job.locations.count("train.tokens_per_epoch") && !job.train.data.empty()) {
    const int per_token = DataBytesPerToken(job.train.data);
    r.why["train.tokens_per_epoch"] = "counted in train.data: its bytes" +
                                      (per_token == 1 ? std::string(", one token each")
                                                      : " / " + std::to_string(per_token) + " per token");
  }
  TC_RETURN_IF_ERROR(ResolveBudgets(run, &r));
  return r;
}

std::string RenderResolvedJob(const ResolvedJob& r, const std::vector<std::string>& header) {
  const JobSpec& j = r.job;
  const ModelShape& m = j.model;
  std::ostringstream out;
  for (const std::string& h : header) out << "# " << CommentText(h) << "\n";
  std::string section;
  for (const JobKey& k : JobKeys()) {
    const std::string& key = k.path;
    const std::string value = k.write(j);
    const size_t dot = key.rfind('.');
    const std::string parent = dot == std::string::npos ? "" : key.substr(0, dot);
    std::string comment;
    if (auto w = r.why.find(key); w != r.why.end()) comment = w->second;
    else if (auto l = j.locations.find(key); l != j.locations.end()) comment = "from " + l->second;
    else if (key.rfind("model.", 0) == 0 && m.name != "custom" && key != "model.preset" && key != "model.init") comment = "the preset's";
    else comment = "default";
    comment = CommentText(comment);
    if (value.empty()) {
      out << "# " << key << ": not set (" << comment << ")\n";
      continue;
    }
    // Open each enclosing mapping once (keys are listed section by section).
    if (parent != section) {
      std::stringstream parts(parent);
      std::string part, path;
      int depth = 0;
      while (std::getline(parts, part, '.')) {
        path += (path.empty() ? "" : ".") + part;
        if (section.compare(0, path.size(), path) != 0 || (section.size() > path.size() && section[path.size()] != '.')) {
          out << std::string(2 * depth, ' ') << part << ":\n";
        }
        ++depth;
      }
      section = parent;
    }
    const int depth = int(std::count(key.begin(), key.end(), '.'));
    out << std::string(2 * depth, ' ') << key.substr(dot == std::string::npos ? 0 : dot + 1) << ": " << value
        << "  # " << comment << "\n";
  }
  return out.str();
}

}  // namespace tencache
