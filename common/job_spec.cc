#include "common/job_spec.h"

#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>
#include <tuple>

#include "common/byte_size.h"
#include "common/job_keys.h"
#include "common/job_reader.h"
#include "common/job_sections.h"
#include "common/text_file.h"
#include "common/suggest.h"

namespace tencache {

const char* CachePolicyName(CachePolicy p) {
  switch (p) {
    case CachePolicy::kTencache: return "tencache";
    case CachePolicy::kZeroInfinity: return "zero-infinity";
    case CachePolicy::kTenCacheWindow: return "10cache-window";
    case CachePolicy::kLru: return "lru";
    case CachePolicy::kNone: return "none";
  }
  return "?";
}

const char* GangSchedulerName(GangScheduler g) {
  switch (g) {
    case GangScheduler::kNone: return "none";
    case GangScheduler::kKueue: return "kueue";
    case GangScheduler::kVolcano: return "volcano";
    case GangScheduler::kSchedulerPlugins: return "scheduler-plugins";
  }
  return "?";
}

const char* NvmeVolumeName(NvmeVolume v) {
  switch (v) {
    case NvmeVolume::kLocalPv: return "local-pv";
    case NvmeVolume::kEphemeral: return "ephemeral";
    case NvmeVolume::kHostPath: return "host-path";
  }
  return "?";
}

// Each compares every field of its struct, in declaration order.
bool operator==(const TrainSpec& a, const TrainSpec& b) {
  auto fields = [](const TrainSpec& t) {
    return std::tie(t.data, t.tokens_per_epoch, t.micro_batch, t.global_batch, t.steps, t.lr, t.lr_schedule,
                    t.warmup_steps, t.min_lr, t.beta1, t.beta2, t.eps, t.weight_decay, t.grad_clip,
                    t.initial_loss_scale, t.loss_scale_window, t.eval_every, t.eval_data, t.eval_split,
                    t.eval_sequences, t.seed, t.compute_threads, t.optimizer_overlap, t.checkpoint_every,
                    t.checkpoint_on_stop,
                    t.checkpoint_dir, t.keep_checkpoints);
  };
  return fields(a) == fields(b);
}

bool operator==(const VolumeSpec& a, const VolumeSpec& b) {
  return std::tie(a.size, a.read_gbps, a.write_gbps) == std::tie(b.size, b.read_gbps, b.write_gbps);
}

bool operator==(const HostSlots& a, const HostSlots& b) { return a.host == b.host && a.slots == b.slots; }

bool operator==(const HostsSpec& a, const HostsSpec& b) {
  return std::tie(a.list, a.hostfile, a.rsh_agent, a.network_interface, a.instance_type) ==
         std::tie(b.list, b.hostfile, b.rsh_agent, b.network_interface, b.instance_type);
}

bool operator==(const KubernetesSpec& a, const KubernetesSpec& b) {
  auto fields = [](const KubernetesSpec& k) {
    return std::tie(k.image, k.namespace_, k.nvme_volume, k.nvme_storage_class, k.nvme_host_path,
                    k.checkpoint_claim, k.data_claim, k.gang_scheduler, k.queue, k.priority_class,
                    k.checkpoint_write_gbps);
  };
  return fields(a) == fields(b);
}

bool operator==(const ClusterSpec& a, const ClusterSpec& b) {
  auto fields = [](const ClusterSpec& c) {
    return std::tie(c.target, c.nodes, c.ranks_per_node, c.max_nodes, c.instance_types, c.objective, c.use_spot,
                    c.max_price_per_hour, c.max_restarts, c.restart_backoff_s, c.spot_interruption_rate,
                    c.spot_restart_s, c.volume, c.catalog, c.k8s, c.hosts);
  };
  return fields(a) == fields(b);
}

bool operator==(const CacheSpec& a, const CacheSpec& b) {
  return std::tie(a.policy, a.device_budget, a.host_budget, a.nvme_budget, a.nvme_path, a.prefetch) ==
         std::tie(b.policy, b.device_budget, b.host_budget, b.nvme_budget, b.nvme_path, b.prefetch);
}

bool operator==(const JobSpec& a, const JobSpec& b) {
  return std::tie(a.name, a.model, a.dtype, a.init, a.train, a.cluster, a.cache) ==
         std::tie(b.name, b.model, b.dtype, b.init, b.train, b.cluster, b.cache);
}

std::string JobSpec::Where(const std::string& key) const {
  auto it = locations.find(key);
  std::string where = it != locations.end() ? it->second : source;
  return where + ": key '" + key + "'";
}

namespace {

namespace fs = std::filesystem;

bool IsLeaf(const std::string& key) { return FindJobKey(key) != nullptr; }

bool IsSection(const std::string& key) {
  for (const JobKey& leaf : JobKeys()) {
    const std::string& k = leaf.path;
    if (k.size() > key.size() && k.compare(0, key.size(), key) == 0 && k[key.size()] == '.') {
      return true;
    }
  }
  return false;
}

// Names valid directly under `section` ("" for the top level).
std::vector<std::string> ChildNames(const std::string& section) {
  std::set<std::string> names;
  const std::string prefix = section.empty() ? "" : section + ".";
  for (const JobKey& leaf : JobKeys()) {
    const std::string& k = leaf.path;
    if (k.compare(0, prefix.size(), prefix) != 0) continue;
    std::string rest = k.substr(prefix.size());
    names.insert(rest.substr(0, rest.find('.')));
  }
  return {names.begin(), names.end()};
}

}  // namespace

const char* OptimizerOverlapName(OptimizerOverlap o) {
  switch (o) {
    case OptimizerOverlap::kAuto: return "auto";
    case OptimizerOverlap::kOn: return "on";
    case OptimizerOverlap::kOff: return "off";
  }
  return "?";
}

int LaneCores(const RankCompute& r) {
  return r.gpu ? r.rank_cores : std::max(0, r.rank_cores - r.compute_threads);
}

bool OptimizerLaneOn(const TrainSpec& t, const RankCompute& r) {
  switch (t.optimizer_overlap) {
    case OptimizerOverlap::kOn: return true;
    case OptimizerOverlap::kOff: return false;
    case OptimizerOverlap::kAuto: return LaneCores(r) > 0;
  }
  return false;
}

const char* LrScheduleName(LrSchedule s) {
  switch (s) {
    case LrSchedule::kConstant: return "constant";
    case LrSchedule::kCosine: return "cosine";
    case LrSchedule::kLinear: return "linear";
  }
  return "?";
}

double LearningRateAt(const TrainSpec& t, int64_t step) {
  if (step < t.warmup_steps) return t.lr * double(step + 1) / double(t.warmup_steps);
  if (t.lr_schedule == LrSchedule::kConstant) return t.lr;
  const double span = std::max(1, t.steps - t.warmup_steps);
  const double p = std::min(1.0, double(step - t.warmup_steps) / span);
  if (t.lr_schedule == LrSchedule::kLinear) return t.lr - (t.lr - t.min_lr) * p;
  return t.min_lr + 0.5 * (t.lr - t.min_lr) * (1.0 + std::cos(M_PI * p));
}

const char* TargetName(Target t) {
  switch (t) {
    case Target::kLocal: return "local";
    case Target::kK8s: return "k8s";
    case Target::kHosts: return "hosts";
  }
  return "?";
}

Status JobReader::CheckKeys(const YAML::Node& node, const std::string& section) {
  if (!node.IsMap()) {
    return Error(section.empty() ? "(top level)" : section, node, "a mapping of keys to values");
  }
  std::map<std::string, std::string> seen;  // name -> where it was first
  for (const auto& entry : node) {
    std::string name = entry.first.Scalar();
    std::string key = section.empty() ? name : section + "." + name;
    const std::string here = Location(key, entry.first);
    if (auto [first, fresh] = seen.emplace(name, here); !fresh) {  // yaml-cpp keeps both; its lookups take the first
      return Status::InvalidArgument(here + ": key '" + Excerpt(key) + "' appears twice (first at " + first->second +
                                     "); expected each key once");
    }
    if (IsLeaf(key)) {
      if (entry.second.IsNull()) {
        return Status::InvalidArgument(here + ": key '" + Excerpt(key) +
                                       "' has no value; give it one, or remove the key for its default");
      }
      continue;
    }
    if (IsSection(key)) {
      TC_RETURN_IF_ERROR(CheckKeys(entry.second, key));
      continue;
    }
    std::string hint = DidYouMean(name, ChildNames(section));
    return Status::InvalidArgument(here + ": unknown key '" + Excerpt(key) + "'" + hint +
                                   "; expected one of: " + JoinNames(ChildNames(section)));
  }
  return Status::Ok();
}

int DataBytesPerToken(const std::string& path) {
  const std::string ext = fs::path(path).extension().string();
  return (ext == ".bin" || ext == ".u16") ? 2 : ext == ".u32" ? 4 : 1;
}

namespace {

Status ApplyOverride(const std::string& spec, YAML::Node root, std::map<std::string, std::string>* origins) {
  const std::string where = "--set " + Excerpt(spec);  // in messages: a long value is cut
  const size_t eq = spec.find('=');
  if (eq == std::string::npos || eq == 0) {
    return Status::InvalidArgument(where + ": expected KEY=VALUE, e.g. --set train.steps=20");
  }
  const std::string key = spec.substr(0, eq);
  const std::string value = spec.substr(eq + 1);
  if (!IsLeaf(key)) {
    return Status::InvalidArgument(where + ": unknown key '" + Excerpt(key) + "'" + DidYouMean(key, KnownJobKeys()) +
                                   "; see docs/job-yaml.md for every key");
  }
  YAML::Node parsed;
  try {
    parsed = YAML::Load(value);
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(where + ": value is not valid YAML: " + e.msg);
  }
  if (!parsed.IsDefined() || parsed.IsNull()) parsed.reset(YAML::Node(value));
  std::vector<std::string> parts;
  std::stringstream ss(key);
  for (std::string part; std::getline(ss, part, '.');) parts.push_back(part);
  YAML::Node node;
  node.reset(root);
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    YAML::Node child = node[parts[i]];
    if (!child.IsMap()) {
      node[parts[i]] = YAML::Node(YAML::NodeType::Map);
      child.reset(node[parts[i]]);
    }
    node.reset(child);
  }
  node[parts.back()] = parsed;
  (*origins)[key] = where;
  return Status::Ok();
}

}  // namespace

std::vector<std::string> KnownJobKeys() {
  std::vector<std::string> keys;
  for (const JobKey& k : JobKeys()) keys.push_back(k.path);
  return keys;
}

std::string SwapFolder(const JobSpec& job, int64_t rank0_pid) {
  std::string name = job.name.empty() ? "job" : job.name.substr(0, 64);
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') c = '_';
  }
  return (std::filesystem::path(job.cache.nvme_path) / (name + "-" + std::to_string(rank0_pid))).string();
}

namespace {

// The first line (1-based) whose indentation holds a tab, or 0.
int TabIndentedLine(const std::string& text) {
  int line = 1;
  bool indent = true;  // still in the line's leading whitespace
  for (char c : text) {
    if (c == '\n') {
      ++line;
      indent = true;
    } else if (indent && c == '\t') {
      return line;
    } else if (c != ' ') {
      indent = false;
    }
  }
  return 0;
}

constexpr size_t kMaxJobFileBytes = size_t(1) << 20;  // a job file is a few hundred lines

}  // namespace

StatusOr<JobSpec> ParseJobText(const std::string& text, const std::string& source,
                               const std::vector<std::string>& overrides) {
  YAML::Node root;
  try {
    std::vector<YAML::Node> documents = YAML::LoadAll(text);
    int given = 0;
    for (const YAML::Node& d : documents) given += d.IsDefined() && !d.IsNull();
    if (given > 1) {
      return Status::InvalidArgument(source + ": holds " + std::to_string(given) +
                                     " YAML documents (separated by '---'); a job file is one document");
    }
    for (const YAML::Node& d : documents) {
      if (d.IsDefined() && !d.IsNull()) root = d;
    }
  } catch (const YAML::DeepRecursion& e) {
    return Status::InvalidArgument(source + ":" + std::to_string(e.mark.line + 1) + ":" +
                                   std::to_string(e.mark.column + 1) + ": malformed YAML: nested more than " +
                                   std::to_string(e.depth()) + " levels deep; a job file is a few levels of "
                                   "mappings");
  } catch (const YAML::ParserException& e) {
    if (int line = TabIndentedLine(text); line > 0) {
      return Status::InvalidArgument(source + ":" + std::to_string(line) +
                                     ": a tab indents this line; YAML indents with spaces only");
    }
    return Status::InvalidArgument(source + ":" + std::to_string(e.mark.line + 1) + ":" +
                                   std::to_string(e.mark.column + 1) + ": malformed YAML: " + Excerpt(e.msg, 512));
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(source + ": malformed YAML: " + Excerpt(e.msg, 512));
  }
  if (root.IsNull() || !root.IsDefined()) {
    if (overrides.empty()) {
      return Status::InvalidArgument(source + ": the job file is empty (or only comments); expected a mapping with "
                                     "the sections name, model, train, cluster and cache (see configs/examples/)");
    }
    root = YAML::Node(YAML::NodeType::Map);
  }
  if (!root.IsMap()) {
    return Status::InvalidArgument(source + ": expected a mapping with the sections name, model, "
                                   "train, cluster and cache");
  }
  std::map<std::string, std::string> origins;
  for (const std::string& spec : overrides) TC_RETURN_IF_ERROR(ApplyOverride(spec, root, &origins));

  JobReader reader(source, root, origins);
  TC_RETURN_IF_ERROR(reader.CheckKeys(root, ""));
  JobSpec job;
  job.source = source;
  job.name = fs::path(source).stem().string();
  TC_RETURN_IF_ERROR(ReadKeys(reader, "", &job));
  // The name names Kubernetes objects (a DNS label: at most 63) and run folders.
  const auto name_char = [](char c) {
    return std::islower(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c));
  };
  if (job.name.size() > kMaxJobName || !name_char(job.name.front()) || !name_char(job.name.back()) ||
      !std::all_of(job.name.begin(), job.name.end(), [&](char c) { return name_char(c) || c == '-'; })) {
    return Status::InvalidArgument((reader.Has("name") ? reader.locations().at("name") : source) +
                                   ": key 'name': expected at most " + std::to_string(kMaxJobName) +
                                   " lower-case letters, digits and '-', starting and ending with a letter or digit "
                                   "(it names Kubernetes objects and the run folder), got '" + Excerpt(job.name) +
                                   "'" + (reader.Has("name") ? "" : " (from the file's name; set name: to choose one)"));
  }
  TC_RETURN_IF_ERROR(ReadModel(reader, &job));
  job.locations = reader.locations();
  TC_RETURN_IF_ERROR(ReadTrain(reader, &job));
  job.locations = reader.locations();
  TC_RETURN_IF_ERROR(ReadCluster(reader, &job));
  TC_RETURN_IF_ERROR(ReadCache(reader, &job));
  job.locations = reader.locations();
  job.size_texts = reader.size_texts();
  return job;
}

StatusOr<JobSpec> LoadJobFile(const std::string& path, const std::vector<std::string>& overrides) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (const std::string problem = PathProblem(path); !problem.empty()) {
    return Status::NotFound(path + ": job file " + (problem == "not found" ? problem : "is " + problem) +
                            "; expected a path to a job.yaml (see configs/examples/)");
  }
  if (fs::is_directory(st)) {
    return Status::InvalidArgument(path + ": is a folder; expected a job.yaml file (see configs/examples/)");
  }
  // A pipe (<(envsubst < job.yaml)) is read like a file: at most the cap, never to its end.
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::InvalidArgument(path + ": cannot read the job file: " + std::strerror(errno));
  std::string text(kMaxJobFileBytes + 1, '\0');
  in.read(text.data(), std::streamsize(text.size()));
  text.resize(size_t(in.gcount()));
  if (text.size() > kMaxJobFileBytes) {
    return Status::InvalidArgument(path + ": larger than " + std::to_string(kMaxJobFileBytes >> 10) +
                                   " KiB; a job file is a few hundred lines");
  }
  if (in.bad()) return Status::InvalidArgument(path + ": cannot read the job file: " + std::strerror(errno));
  return ParseJobText(text, path, overrides);
}

}  // namespace tencache
