#include "launcher/resolved_job.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <sstream>

#include <nlohmann/json.hpp>

#include "common/byte_size.h"
#include "common/human_format.h"
#include "launcher/cache_budgets.h"

namespace tencache {
namespace {

std::string Quote(const std::string& s) { return nlohmann::json(s).dump(); }  // a YAML double-quoted scalar

std::string OptionalQuote(const std::string& s) { return s.empty() ? "" : Quote(s); }

std::string Size(uint64_t bytes) { return bytes == 0 ? "0" : std::to_string(bytes); }

// Per-rank budgets in the worker's accounting, as the plan computed them
// (launcher/cache_budgets.h).
Status ResolveBudgets(const JobSpec& job, const Candidate& c, ResolvedJob* r) {
  const CacheBudgets b = PlanCacheBudgets(job, c.ranks, c.capacity[kGpu], c.capacity[kCpu], c.capacity[kNvme]);
  if (!b.error.empty()) return Status::InvalidArgument(b.error);
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
  if (!job.locations.count("train.tokens_per_epoch") && !job.train.data.empty()) {
    const int per_token = DataBytesPerToken(job.train.data);
    r.why["train.tokens_per_epoch"] = "counted in train.data: its bytes" +
                                      (per_token == 1 ? std::string(", one token each")
                                                      : " / " + std::to_string(per_token) + " per token");
  }
  TC_RETURN_IF_ERROR(ResolveBudgets(job, run, &r));
  return r;
}

std::string RenderResolvedJob(const ResolvedJob& r, const std::vector<std::string>& header) {
  const JobSpec& j = r.job;
  const ModelShape& m = j.model;
  std::vector<std::pair<std::string, std::string>> kv = {
      {"name", Quote(j.name)},
      {"model.preset", m.name == "custom" ? "" : Quote(m.name)},
      {"model.dtype", DTypeName(j.dtype)},
      {"model.layers", std::to_string(m.layers)},
      {"model.hidden", std::to_string(m.hidden)},
      {"model.heads", std::to_string(m.heads)},
      {"model.kv_heads", std::to_string(m.kv_heads)},
      {"model.ffn_hidden", std::to_string(m.ffn_hidden)},
      {"model.seq_len", std::to_string(m.seq_len)},
      {"model.vocab", std::to_string(m.vocab)},
      {"model.max_positions", std::to_string(m.max_positions)},
      {"model.mlp", MlpKindName(m.mlp)},
      {"model.norm", NormKindName(m.norm)},
      {"model.position", PositionKindName(m.position)},
      {"model.bias", m.bias ? "true" : "false"},
      {"model.tied_embeddings", m.tied_embeddings ? "true" : "false"},
      {"model.fused_qkv", m.fused_qkv ? "true" : "false"},
      {"model.parallel_block", m.parallel_block ? "true" : "false"},
      {"model.embedding_norm", m.embedding_norm ? "true" : "false"},
      {"model.rope_theta", nlohmann::json(m.rope_theta).dump()},
      {"model.norm_eps", nlohmann::json(m.norm_eps).dump()},
      {"model.init", OptionalQuote(j.init)},
      {"train.data", j.train.data.empty() ? "" : Quote(std::filesystem::absolute(j.train.data).string())},
      {"train.tokens_per_epoch", std::to_string(j.train.tokens_per_epoch)},
      {"train.micro_batch", std::to_string(j.train.micro_batch)},
      {"train.global_batch", std::to_string(j.train.global_batch)},
      {"train.steps", std::to_string(j.train.steps)},
      {"train.lr", nlohmann::json(j.train.lr).dump()},
      {"train.lr_schedule", LrScheduleName(j.train.lr_schedule)},
      {"train.warmup_steps", std::to_string(j.train.warmup_steps)},
      {"train.min_lr", nlohmann::json(j.train.min_lr).dump()},
      {"train.beta1", nlohmann::json(j.train.beta1).dump()},
      {"train.beta2", nlohmann::json(j.train.beta2).dump()},
      {"train.eps", nlohmann::json(j.train.eps).dump()},
      {"train.weight_decay", nlohmann::json(j.train.weight_decay).dump()},
      {"train.grad_clip", nlohmann::json(j.train.grad_clip).dump()},
      {"train.initial_loss_scale", nlohmann::json(j.train.initial_loss_scale).dump()},
      {"train.loss_scale_window", std::to_string(j.train.loss_scale_window)},
      {"train.eval_every", std::to_string(j.train.eval_every)},
      {"train.eval_data",
       j.train.eval_data.empty() ? "" : Quote(std::filesystem::absolute(j.train.eval_data).string())},
      {"train.eval_split", nlohmann::json(j.train.eval_split).dump()},
      {"train.eval_sequences", std::to_string(j.train.eval_sequences)},
      {"train.seed", std::to_string(j.train.seed)},
      {"train.compute_threads", std::to_string(j.train.compute_threads)},
      {"train.checkpoint_every", std::to_string(j.train.checkpoint_every)},
      {"train.checkpoint_on_stop", j.train.checkpoint_on_stop ? "true" : "false"},
      {"train.checkpoint_dir", Quote(std::filesystem::absolute(j.train.checkpoint_dir).string())},
      {"train.keep_checkpoints", std::to_string(j.train.keep_checkpoints)},
      {"cluster.target", TargetName(j.cluster.target)},
      {"cluster.nodes", std::to_string(j.cluster.nodes)},
      {"cluster.ranks_per_node", std::to_string(j.cluster.ranks_per_node)},
      {"cluster.max_nodes", std::to_string(j.cluster.max_nodes)},
      {"cluster.instance_types", ""},
      {"cluster.objective", j.cluster.objective == Objective::kCost ? "cost" : "time"},
      {"cluster.use_spot", j.cluster.use_spot ? "true" : "false"},
      {"cluster.max_price_per_hour", nlohmann::json(j.cluster.max_price_per_hour).dump()},
      {"cluster.catalog", j.cluster.catalog.empty() ? "" : Quote(j.cluster.catalog)},
      {"cluster.volume.size", j.cluster.volume.size == 0 ? "" : std::to_string(j.cluster.volume.size)},
      {"cluster.volume.read_gbps", nlohmann::json(j.cluster.volume.read_gbps).dump()},
      {"cluster.volume.write_gbps", nlohmann::json(j.cluster.volume.write_gbps).dump()},
      {"cluster.image", OptionalQuote(j.cluster.k8s.image)},
      {"cluster.namespace", OptionalQuote(j.cluster.k8s.namespace_)},
      {"cluster.nvme_volume", NvmeVolumeName(j.cluster.k8s.nvme_volume)},
      {"cluster.nvme_storage_class", OptionalQuote(j.cluster.k8s.nvme_storage_class)},
      {"cluster.nvme_host_path", OptionalQuote(j.cluster.k8s.nvme_host_path)},
      {"cluster.checkpoint_claim", OptionalQuote(j.cluster.k8s.checkpoint_claim)},
      {"cluster.data_claim", OptionalQuote(j.cluster.k8s.data_claim)},
      {"cluster.hosts", ""},
      {"cluster.hostfile", ""},  // read into cluster.hosts
      {"cluster.rsh_agent", j.cluster.target == Target::kHosts ? Quote(j.cluster.hosts.rsh_agent) : ""},
      {"cluster.network_interface",
       j.cluster.target == Target::kHosts ? OptionalQuote(j.cluster.hosts.network_interface) : ""},
      {"cluster.instance_type", j.cluster.target == Target::kHosts ? OptionalQuote(j.cluster.hosts.instance_type) : ""},
      {"cache.policy", CachePolicyName(j.cache.policy)},
      {"cache.device_budget", Size(j.cache.device_budget.value_or(0))},
      {"cache.host_budget", Size(j.cache.host_budget.value_or(0))},
      {"cache.nvme_budget", Size(j.cache.nvme_budget.value_or(0))},
      {"cache.nvme_path", Quote(j.cache.nvme_path)},
      {"cache.prefetch", j.cache.prefetch ? "true" : "false"},
  };
  if (!j.cluster.instance_types.empty()) {
    std::string list = "[";
    for (size_t i = 0; i < j.cluster.instance_types.size(); ++i) {
      list += (i ? ", " : "") + Quote(j.cluster.instance_types[i]);
    }
    for (auto& entry : kv) {
      if (entry.first == "cluster.instance_types") entry.second = list + "]";
    }
  }
  if (j.cluster.target == Target::kHosts) {
    std::string list = "[";
    for (size_t i = 0; i < j.cluster.hosts.list.size(); ++i) {
      const HostSlots& h = j.cluster.hosts.list[i];
      list += (i ? ", " : "") + Quote(h.host + ":" + std::to_string(h.slots));
    }
    for (auto& entry : kv) {
      if (entry.first == "cluster.hosts") entry.second = list + "]";
    }
  }
  std::ostringstream out;
  for (const std::string& h : header) out << "# " << CommentText(h) << "\n";
  std::string section;
  for (const auto& [key, value] : kv) {
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
