#include "common/job_spec.h"

#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/yaml.h>

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

#include "common/byte_size.h"
#include "common/image_reference.h"
#include "common/job_reader.h"
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

std::string JobSpec::Where(const std::string& key) const {
  auto it = locations.find(key);
  std::string where = it != locations.end() ? it->second : source;
  return where + ": key '" + key + "'";
}

namespace {

namespace fs = std::filesystem;

// Every leaf key. Sections are the prefixes before a dot.
const std::vector<std::string>& LeafKeys() {
  static const std::vector<std::string> keys = {
      "name",
      "model.preset", "model.dtype", "model.layers", "model.hidden", "model.heads",
      "model.kv_heads", "model.ffn_hidden", "model.seq_len", "model.vocab",
      "model.max_positions", "model.mlp", "model.norm", "model.position", "model.bias",
      "model.tied_embeddings", "model.fused_qkv", "model.parallel_block", "model.embedding_norm",
      "model.rope_theta", "model.norm_eps", "model.init",
      "train.data", "train.tokens_per_epoch", "train.micro_batch", "train.global_batch",
      "train.steps", "train.lr", "train.lr_schedule", "train.warmup_steps", "train.min_lr", "train.beta1",
      "train.beta2", "train.eps", "train.weight_decay", "train.grad_clip", "train.initial_loss_scale",
      "train.loss_scale_window", "train.eval_every", "train.eval_data", "train.eval_split",
      "train.eval_sequences", "train.seed", "train.compute_threads", "train.checkpoint_every", "train.checkpoint_on_stop", "train.checkpoint_dir",
      "train.keep_checkpoints",
      "cluster.target", "cluster.nodes", "cluster.ranks_per_node", "cluster.max_nodes", "cluster.instance_types", "cluster.objective",
      "cluster.use_spot", "cluster.max_price_per_hour", "cluster.catalog",
      "cluster.volume.size", "cluster.volume.read_gbps", "cluster.volume.write_gbps",
      "cluster.image", "cluster.namespace", "cluster.nvme_volume", "cluster.nvme_storage_class",
      "cluster.nvme_host_path", "cluster.checkpoint_claim", "cluster.data_claim",
      "cluster.gang_scheduler", "cluster.queue", "cluster.priority_class", "cluster.checkpoint_write_gbps",
      "cluster.hosts", "cluster.hostfile", "cluster.rsh_agent", "cluster.network_interface",
      "cluster.instance_type",
      "cache.policy", "cache.device_budget", "cache.host_budget", "cache.nvme_budget",
      "cache.nvme_path", "cache.prefetch",
  };
  return keys;
}

bool IsLeaf(const std::string& key) {
  for (const std::string& k : LeafKeys()) {
    if (k == key) return true;
  }
  return false;
}

bool IsSection(const std::string& key) {
  for (const std::string& k : LeafKeys()) {
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
  for (const std::string& k : LeafKeys()) {
    if (k.compare(0, prefix.size(), prefix) != 0) continue;
    std::string rest = k.substr(prefix.size());
    names.insert(rest.substr(0, rest.find('.')));
  }
  return {names.begin(), names.end()};
}

}  // namespace

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

Status ReadModel(JobReader& r, const std::string& source, JobSpec* job) {
  std::string preset;
  TC_RETURN_IF_ERROR(r.GetString("model.preset", &preset));
  ModelShape& m = job->model;
  if (!preset.empty()) {
    StatusOr<ModelShape> found = FindPreset(Excerpt(preset));  // every preset's name is short: cut for the message
    if (!found.ok()) {
      return Status::InvalidArgument(r.locations().at("model.preset") + ": key 'model.preset': " +
                                     found.status().message() + DidYouMean(preset, PresetNames()));
    }
    m = *found;
  } else {
    m.name = "custom";
    for (const char* key : {"model.layers", "model.hidden", "model.heads", "model.ffn_hidden",
                            "model.seq_len", "model.vocab"}) {
      if (!r.Has(key)) {
        return Status::InvalidArgument(source + ": key '" + key +
                                       "' is required when model.preset is not set (or set "
                                       "model.preset to one of the presets)");
      }
    }
  }
  const bool kv_given = r.Has("model.kv_heads");
  const bool multi_head = m.kv_heads == m.heads;  // the preset's: kv_heads follows a new heads
  // Each dimension is bounded well above any published model (the largest have
  // ~130 layers, hidden 25,600, vocabularies of 256 Ki), so that a hostile job
  // cannot make planning take minutes or its byte counts overflow.
  TC_RETURN_IF_ERROR(r.GetInt("model.layers", 1, &m.layers, kMaxModelLayers));
  TC_RETURN_IF_ERROR(r.GetInt("model.hidden", 1, &m.hidden, kMaxModelWidth));
  TC_RETURN_IF_ERROR(r.GetInt("model.heads", 1, &m.heads, kMaxModelHeads));
  if (multi_head && !kv_given) m.kv_heads = m.heads;
  TC_RETURN_IF_ERROR(r.GetInt("model.kv_heads", 1, &m.kv_heads, kMaxModelHeads));
  TC_RETURN_IF_ERROR(r.GetInt("model.ffn_hidden", 1, &m.ffn_hidden, 4 * kMaxModelWidth));
  TC_RETURN_IF_ERROR(r.GetInt("model.seq_len", 1, &m.seq_len, kMaxModelPositions));
  TC_RETURN_IF_ERROR(r.GetInt("model.vocab", 1, &m.vocab, kMaxModelVocab));
  TC_RETURN_IF_ERROR(r.GetInt("model.max_positions", 1, &m.max_positions, kMaxModelPositions));
  if (preset.empty()) {
    if (!kv_given) m.kv_heads = m.heads;
    if (!r.Has("model.max_positions")) m.max_positions = m.seq_len;
  }
  TC_RETURN_IF_ERROR(r.GetEnum<MlpKind>("model.mlp",
                                        {{"gelu", MlpKind::kGelu}, {"gelu_exact", MlpKind::kGeluExact},
                                         {"relu", MlpKind::kRelu}, {"swiglu", MlpKind::kSwiGlu}},
                                        &m.mlp));
  TC_RETURN_IF_ERROR(r.GetEnum<NormKind>(
      "model.norm", {{"layernorm", NormKind::kLayerNorm}, {"rmsnorm", NormKind::kRmsNorm}}, &m.norm));
  TC_RETURN_IF_ERROR(r.GetEnum<PositionKind>(
      "model.position",
      {{"learned", PositionKind::kLearned}, {"rotary", PositionKind::kRotary}, {"alibi", PositionKind::kAlibi}},
      &m.position));
  TC_RETURN_IF_ERROR(r.GetBool("model.bias", &m.bias));
  TC_RETURN_IF_ERROR(r.GetBool("model.tied_embeddings", &m.tied_embeddings));
  TC_RETURN_IF_ERROR(r.GetBool("model.fused_qkv", &m.fused_qkv));
  TC_RETURN_IF_ERROR(r.GetBool("model.parallel_block", &m.parallel_block));
  TC_RETURN_IF_ERROR(r.GetBool("model.embedding_norm", &m.embedding_norm));
  TC_RETURN_IF_ERROR(r.GetDouble("model.rope_theta", 0.0, true, &m.rope_theta));
  TC_RETURN_IF_ERROR(r.GetDouble("model.norm_eps", 0.0, true, &m.norm_eps));
  TC_RETURN_IF_ERROR(r.GetString("model.init", &job->init));
  if (!job->init.empty()) {
    fs::path init(job->init);
    if (init.is_relative()) init = fs::path(source).parent_path() / init;
    job->init = init.lexically_normal().string();
    if (const std::string problem = PathProblem(init.string()); !problem.empty()) {
      return Status::InvalidArgument(job->Where("model.init") + ": '" + Excerpt(job->init, 512) + "' is " +
                                     (problem == "not found" ? "not there" : problem) +
                                     "; expected a .safetensors file or a folder holding "
                                     "model.safetensors or model.safetensors.index.json");
    }
  }
  TC_RETURN_IF_ERROR(r.GetEnum<DType>(
      "model.dtype", {{"bf16", DType::kBf16}, {"fp16", DType::kFp16}, {"fp32", DType::kFp32}}, &job->dtype));

  Status shape = ValidateModelShape(m, "model");
  if (!shape.ok()) {
    // Name the key the user wrote if the divisibility or range check failed on it.
    std::string msg = shape.message();
    std::string key = msg.substr(0, msg.find(':'));
    auto it = r.locations().find(key);
    std::string where = it != r.locations().end() ? it->second : source;
    return Status::InvalidArgument(where + ": key '" + key + "'" + msg.substr(key.size()));
  }
  return Status::Ok();
}

Status ReadTrain(JobReader& r, const std::string& source, JobSpec* job) {
  TrainSpec& t = job->train;
  TC_RETURN_IF_ERROR(r.GetString("train.data", &t.data));
  TC_RETURN_IF_ERROR(r.GetUint64("train.tokens_per_epoch", 1, &t.tokens_per_epoch));
  TC_RETURN_IF_ERROR(r.GetCountOrAuto("train.micro_batch", &t.micro_batch));
  TC_RETURN_IF_ERROR(r.GetInt("train.global_batch", 1, &t.global_batch));
  TC_RETURN_IF_ERROR(r.GetInt("train.steps", 1, &t.steps));
  TC_RETURN_IF_ERROR(r.GetDouble("train.lr", 0.0, true, &t.lr));
  TC_RETURN_IF_ERROR(r.GetDouble("train.weight_decay", 0.0, false, &t.weight_decay));
  TC_RETURN_IF_ERROR(r.GetEnum<LrSchedule>(
      "train.lr_schedule",
      {{"constant", LrSchedule::kConstant}, {"cosine", LrSchedule::kCosine}, {"linear", LrSchedule::kLinear}},
      &t.lr_schedule));
  TC_RETURN_IF_ERROR(r.GetInt("train.warmup_steps", 0, &t.warmup_steps));
  TC_RETURN_IF_ERROR(r.GetDouble("train.min_lr", 0.0, false, &t.min_lr));
  TC_RETURN_IF_ERROR(r.GetDouble("train.beta1", 0.0, false, &t.beta1));
  TC_RETURN_IF_ERROR(r.GetDouble("train.beta2", 0.0, false, &t.beta2));
  TC_RETURN_IF_ERROR(r.GetDouble("train.eps", 0.0, true, &t.eps));
  for (const auto& [key, beta] : {std::pair<const char*, double>{"train.beta1", t.beta1}, {"train.beta2", t.beta2}}) {
    if (beta >= 1.0) {
      return Status::InvalidArgument(job->Where(key) + ": expected a number in [0, 1), got " + std::to_string(beta));
    }
  }
  if (t.min_lr > t.lr) {
    return Status::InvalidArgument(job->Where("train.min_lr") + ": " + std::to_string(t.min_lr) +
                                   " is above train.lr (" + std::to_string(t.lr) + "); expected at most train.lr");
  }
  TC_RETURN_IF_ERROR(r.GetDouble("train.grad_clip", 0.0, false, &t.grad_clip));
  TC_RETURN_IF_ERROR(r.GetDouble("train.initial_loss_scale", 0.0, true, &t.initial_loss_scale));
  TC_RETURN_IF_ERROR(r.GetInt("train.loss_scale_window", 1, &t.loss_scale_window));
  TC_RETURN_IF_ERROR(r.GetInt("train.eval_every", 0, &t.eval_every));
  TC_RETURN_IF_ERROR(r.GetString("train.eval_data", &t.eval_data));
  TC_RETURN_IF_ERROR(r.GetDouble("train.eval_split", 0.0, true, &t.eval_split));
  TC_RETURN_IF_ERROR(r.GetInt("train.eval_sequences", 1, &t.eval_sequences));
  if (t.eval_split > 0.5) {
    return Status::InvalidArgument(job->Where("train.eval_split") + ": expected a fraction in (0, 0.5] of "
                                   "train.data's sequences to hold out for validation, got " +
                                   std::to_string(t.eval_split));
  }
  if (!t.eval_data.empty()) {
    fs::path eval(t.eval_data);
    if (eval.is_relative()) eval = fs::path(source).parent_path() / eval;
    t.eval_data = eval.lexically_normal().string();
    // Absent is left to the run (it may be on the nodes only); anything else
    // that is not a file is refused now.
    std::error_code ec;
    const std::string problem = PathProblem(t.eval_data);
    if ((!problem.empty() && problem != "not found") || (problem.empty() && !fs::is_regular_file(eval, ec))) {
      return Status::InvalidArgument(job->Where("train.eval_data") + ": '" + Excerpt(t.eval_data, 512) + "' is " +
                                     (!problem.empty() ? problem
                                      : fs::is_directory(eval, ec) ? "a folder"
                                                                   : "not a regular file (a device, pipe or socket)") +
                                     "; expected a text corpus or uint16 token file");
    }
  }
  TC_RETURN_IF_ERROR(r.GetUint64("train.seed", 0, &t.seed));
  TC_RETURN_IF_ERROR(r.GetInt("train.compute_threads", 0, &t.compute_threads));
  TC_RETURN_IF_ERROR(r.GetInt("train.checkpoint_every", 0, &t.checkpoint_every));
  TC_RETURN_IF_ERROR(r.GetBool("train.checkpoint_on_stop", &t.checkpoint_on_stop));
  TC_RETURN_IF_ERROR(r.GetString("train.checkpoint_dir", &t.checkpoint_dir));
  TC_RETURN_IF_ERROR(r.GetInt("train.keep_checkpoints", 1, &t.keep_checkpoints));
  if (fs::path(t.checkpoint_dir).is_relative()) {
    t.checkpoint_dir = (fs::path(source).parent_path() / t.checkpoint_dir).lexically_normal().string();
  }
  if (t.micro_batch > 0 && t.global_batch % t.micro_batch != 0) {
    return Status::InvalidArgument(job->Where("train.global_batch") + ": expected a multiple of "
                                   "train.micro_batch (" + std::to_string(t.micro_batch) + "), got " +
                                   std::to_string(t.global_batch));
  }
  if (!t.data.empty()) {
    fs::path data(t.data);
    if (data.is_relative()) data = fs::path(source).parent_path() / data;
    t.data = data.lexically_normal().string();
    std::error_code ec;
    const bool exists = fs::is_regular_file(data, ec);
    if (const std::string problem = PathProblem(data.string()); !problem.empty() && problem != "not found") {
      return Status::InvalidArgument(job->Where("train.data") + ": '" + Excerpt(t.data, 512) + "' is " + problem +
                                     "; expected a text corpus or uint16 token file");
    }
    if (exists && t.tokens_per_epoch == 0) {
      t.tokens_per_epoch = fs::file_size(data, ec) / DataBytesPerToken(t.data);
      if (t.tokens_per_epoch == 0) {
        return Status::InvalidArgument(job->Where("train.data") + ": file '" + Excerpt(t.data, 512) +
                                       "' is empty; expected a text corpus or uint16 token file");
      }
    } else if (!exists && fs::exists(data, ec)) {
      return Status::InvalidArgument(job->Where("train.data") + ": '" + Excerpt(t.data, 512) + "' is " +
                                     (fs::is_directory(data, ec) ? "a folder" : "not a regular file (a device, pipe or socket)") +
                                     "; expected a text corpus or uint16 token file");
    } else if (!exists && t.tokens_per_epoch == 0) {
      return Status::InvalidArgument(job->Where("train.data") + ": file '" + Excerpt(t.data, 512) +
                                     "' not found (relative paths are read from the job file's "
                                     "folder); set train.tokens_per_epoch when the data is not at hand");
    }
  }
  if (t.tokens_per_epoch == 0) {
    return Status::InvalidArgument(source + ": key 'train.tokens_per_epoch': expected a positive "
                                   "integer, or train.data naming a file to count tokens in");
  }
  return Status::Ok();
}

constexpr uint64_t kMaxHostfileBytes = 1ull << 20;

// "HOST" or "HOST:SLOTS" (cluster.hosts), "HOST [slots=N]" (a hostfile line).
bool ParseHostSlots(const std::string& text, bool hostfile, HostSlots* out) {
  std::string host = text, slots;
  if (hostfile) {
    std::istringstream in(text);
    std::string word;
    in >> host;
    while (in >> word) {
      if (word.rfind("slots=", 0) == 0) slots = word.substr(6);
      else if (word.rfind("max_slots=", 0) != 0) return false;
    }
  } else if (const size_t colon = text.rfind(':'); colon != std::string::npos) {
    host = text.substr(0, colon);
    slots = text.substr(colon + 1);
  }
  if (host.empty() || host[0] == '-' || host.find_first_of(" \t,;'\"$`") != std::string::npos) return false;
  for (unsigned char c : host) {
    if (c < 0x20 || c == 0x7f) return false;  // a line break or NUL would split or cut the name downstream
  }
  out->host = host;
  out->slots = 1;
  if (!slots.empty()) {
    if (slots.size() > 6 || slots.find_first_not_of("0123456789") != std::string::npos) return false;
    out->slots = std::stoi(slots);
    if (out->slots < 1) return false;
  }
  return true;
}

// cluster.target hosts: the machines from cluster.hosts or cluster.hostfile,
// which fix cluster.nodes and cluster.ranks_per_node.
Status ReadHosts(JobReader& r, JobSpec* job) {
  ClusterSpec& c = job->cluster;
  HostsSpec& h = c.hosts;
  std::vector<std::string> names;
  TC_RETURN_IF_ERROR(r.GetStringList("cluster.hosts", &names));
  TC_RETURN_IF_ERROR(r.GetString("cluster.hostfile", &h.hostfile));
  TC_RETURN_IF_ERROR(r.GetString("cluster.rsh_agent", &h.rsh_agent));
  TC_RETURN_IF_ERROR(r.GetString("cluster.network_interface", &h.network_interface));
  TC_RETURN_IF_ERROR(r.GetString("cluster.instance_type", &h.instance_type));
  const std::string where = job->source + ": key ";
  if (c.target != Target::kHosts) {
    for (const char* key :
         {"cluster.hosts", "cluster.hostfile", "cluster.rsh_agent", "cluster.network_interface", "cluster.instance_type"}) {
      if (r.Has(key)) {
        return Status::InvalidArgument(job->Where(key) + ": applies to cluster.target hosts, but the target is " +
                                       TargetName(c.target));
      }
    }
    return Status::Ok();
  }
  if (names.empty() == h.hostfile.empty()) {
    return Status::InvalidArgument(job->Where("cluster.target") + ": cluster.target hosts needs " +
                                   (names.empty() ? "cluster.hosts (a list such as [node1:2, node2:2], HOST:SLOTS) or "
                                                    "cluster.hostfile"
                                                  : "cluster.hosts or cluster.hostfile, not both"));
  }
  if (h.rsh_agent.empty()) return Status::InvalidArgument(job->Where("cluster.rsh_agent") + ": expected a program, e.g. ssh");
  for (const std::string& n : names) {
    HostSlots hs;
    if (!ParseHostSlots(n, false, &hs)) {
      return Status::InvalidArgument(job->Where("cluster.hosts") + ": expected HOST or HOST:SLOTS (slots >= 1), got '" +
                                     Excerpt(n) + "'");
    }
    h.list.push_back(hs);
  }
  if (!h.hostfile.empty()) {
    if (fs::path(h.hostfile).is_relative()) {
      h.hostfile = (fs::path(job->source).parent_path() / h.hostfile).lexically_normal().string();
    }
    const std::string file = Excerpt(h.hostfile, 512);  // for messages
    // Only a regular file of bounded size is opened: a pipe's open waits for a
    // writer, and a device may never end a line.
    std::error_code ec;
    if (fs::exists(h.hostfile, ec) &&
        (!fs::is_regular_file(h.hostfile, ec) || fs::file_size(h.hostfile, ec) > kMaxHostfileBytes)) {
      return Status::InvalidArgument(job->Where("cluster.hostfile") + ": '" + file + "' is not a regular file of at " +
                                     "most " + std::to_string(kMaxHostfileBytes >> 20) + " MiB; expected Open MPI's hostfile");
    }
    std::ifstream in(h.hostfile);
    if (!in) return Status::InvalidArgument(job->Where("cluster.hostfile") + ": cannot read '" + file + "'");
    int line_no = 0;
    for (std::string line; std::getline(in, line);) {
      ++line_no;
      if (const size_t hash = line.find('#'); hash != std::string::npos) line.resize(hash);
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      HostSlots hs;
      if (!ParseHostSlots(line, true, &hs)) {
        return Status::InvalidArgument(file + ":" + std::to_string(line_no) +
                                       ": expected 'HOST' or 'HOST slots=N' (Open MPI's hostfile), got '" +
                                       Excerpt(line) + "'");
      }
      h.list.push_back(hs);
    }
    if (h.list.empty()) return Status::InvalidArgument(job->Where("cluster.hostfile") + ": '" + file + "' names no host");
  }
  std::string all;
  for (const HostSlots& hs : h.list) all += (all.empty() ? "" : ", ") + hs.host + ":" + std::to_string(hs.slots);
  all = Excerpt(all, 512);  // for messages: a long list is cut
  const std::string key = h.hostfile.empty() ? "cluster.hosts" : "cluster.hostfile";
  for (const HostSlots& hs : h.list) {
    if (hs.slots != h.list[0].slots) {
      return Status::InvalidArgument(job->Where(key) + ": every host needs the same slots (ranks per node), got " + all);
    }
    int same = 0;
    for (const HostSlots& other : h.list) same += other.host == hs.host;
    if (same > 1) return Status::InvalidArgument(job->Where(key) + ": host '" + Excerpt(hs.host) + "' is named twice");
  }
  const int nodes = int(h.list.size()), per_node = h.list[0].slots;
  if (c.nodes > 0 && c.nodes != nodes) {
    return Status::InvalidArgument(job->Where("cluster.nodes") + ": " + std::to_string(c.nodes) + ", but " + key +
                                   " names " + std::to_string(nodes) + " host(s) (" + all + "); set it to auto");
  }
  if (c.ranks_per_node > 0 && c.ranks_per_node != per_node) {
    return Status::InvalidArgument(job->Where("cluster.ranks_per_node") + ": " + std::to_string(c.ranks_per_node) +
                                   ", but every host in " + key + " has " + std::to_string(per_node) +
                                   " slot(s); set it to auto");
  }
  c.nodes = nodes;
  c.ranks_per_node = per_node;
  c.max_nodes = std::max(c.max_nodes, nodes);
  if (job->train.global_batch % (nodes * per_node) != 0) {
    return Status::InvalidArgument(job->Where("train.global_batch") + ": " + std::to_string(job->train.global_batch) +
                                   " is not a multiple of the " + std::to_string(nodes * per_node) + " ranks of " +
                                   key + " (" + all + ")");
  }
  return Status::Ok();
}

// RFC 1123 label (Kueue LocalQueue, Volcano queue and PriorityClass names are object names).
bool IsDnsLabel(const std::string& s) {
  if (s.empty() || s.size() > 63) return false;
  for (char ch : s) {
    if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-')) return false;
  }
  return s.front() != '-' && s.back() != '-';
}

// cluster.image's grammar and the Kubernetes scheduling keys: the gang
// scheduler, its queue, the priority class, the checkpoint volume's bandwidth.
Status ReadK8sScheduling(JobReader& r, JobSpec* job) {
  KubernetesSpec& k = job->cluster.k8s;
  job->locations = r.locations();  // so that Where names a --set
  if (!k.image.empty()) {
    if (std::string problem = ImageReferenceProblem(k.image); !problem.empty()) {
      return Status::InvalidArgument(job->Where("cluster.image") + ": '" + Excerpt(k.image) + "' is not an image "
                                     "reference (" + Excerpt(problem, 160) + "); expected [REGISTRY[:PORT]/]PATH[:TAG]"
                                     "[@sha256:DIGEST] with lower-case path components, e.g. ghcr.io/acme/tencache-worker:0.1.0");
    }
  }
  TC_RETURN_IF_ERROR(r.GetString("cluster.queue", &k.queue));
  TC_RETURN_IF_ERROR(r.GetString("cluster.priority_class", &k.priority_class));
  if (!k.queue.empty()) k.gang_scheduler = GangScheduler::kKueue;
  TC_RETURN_IF_ERROR(r.GetEnum<GangScheduler>("cluster.gang_scheduler",
                                              {{"none", GangScheduler::kNone},
                                               {"kueue", GangScheduler::kKueue},
                                               {"volcano", GangScheduler::kVolcano},
                                               {"scheduler-plugins", GangScheduler::kSchedulerPlugins}},
                                              &k.gang_scheduler));
  TC_RETURN_IF_ERROR(r.GetDouble("cluster.checkpoint_write_gbps", 0.0, true, &k.checkpoint_write_gbps));
  job->locations = r.locations();
  for (const auto& [key, value] : {std::pair<const char*, const std::string*>{"cluster.queue", &k.queue},
                                   {"cluster.priority_class", &k.priority_class}}) {
    if (!value->empty() && !IsDnsLabel(*value)) {
      return Status::InvalidArgument(job->Where(key) + ": '" + Excerpt(*value) + "' is not a valid name; expected "
                                     "lower-case letters, digits and '-' (RFC 1123 label, at most 63)");
    }
  }
  if (k.gang_scheduler == GangScheduler::kKueue && k.queue.empty()) {
    return Status::InvalidArgument(job->Where("cluster.gang_scheduler") + ": kueue needs cluster.queue, the "
                                   "LocalQueue of the job's namespace that admits it");
  }
  if (!k.queue.empty() && (k.gang_scheduler == GangScheduler::kNone ||
                           k.gang_scheduler == GangScheduler::kSchedulerPlugins)) {
    return Status::InvalidArgument(job->Where("cluster.queue") + ": a queue applies to cluster.gang_scheduler kueue "
                                   "or volcano, but it is " + GangSchedulerName(k.gang_scheduler));
  }
  return Status::Ok();
}

Status ReadCluster(JobReader& r, JobSpec* job) {
  ClusterSpec& c = job->cluster;
  TC_RETURN_IF_ERROR(r.GetEnum<Target>("cluster.target",
                                       {{"local", Target::kLocal}, {"k8s", Target::kK8s}, {"hosts", Target::kHosts}},
                                       &c.target));
  TC_RETURN_IF_ERROR(r.GetCountOrAuto("cluster.nodes", &c.nodes, kMaxNodes));
  TC_RETURN_IF_ERROR(r.GetCountOrAuto("cluster.ranks_per_node", &c.ranks_per_node));
  TC_RETURN_IF_ERROR(r.GetInt("cluster.max_nodes", 1, &c.max_nodes, kMaxNodes));
  if (c.nodes > c.max_nodes) c.max_nodes = c.nodes;
  TC_RETURN_IF_ERROR(r.GetStringList("cluster.instance_types", &c.instance_types));
  TC_RETURN_IF_ERROR(r.GetEnum<Objective>(
      "cluster.objective", {{"cost", Objective::kCost}, {"time", Objective::kTime}}, &c.objective));
  TC_RETURN_IF_ERROR(r.GetBool("cluster.use_spot", &c.use_spot));
  TC_RETURN_IF_ERROR(r.GetDouble("cluster.max_price_per_hour", 0.0, false, &c.max_price_per_hour));
  TC_RETURN_IF_ERROR(r.GetString("cluster.catalog", &c.catalog));
  std::optional<uint64_t> volume;
  TC_RETURN_IF_ERROR(r.GetSize("cluster.volume.size", false, &volume));
  c.volume.size = volume.value_or(0);
  TC_RETURN_IF_ERROR(r.GetDouble("cluster.volume.read_gbps", 0.0, true, &c.volume.read_gbps));
  TC_RETURN_IF_ERROR(r.GetDouble("cluster.volume.write_gbps", 0.0, true, &c.volume.write_gbps));
  KubernetesSpec& k = c.k8s;
  TC_RETURN_IF_ERROR(r.GetString("cluster.image", &k.image));
  TC_RETURN_IF_ERROR(r.GetString("cluster.namespace", &k.namespace_));
  TC_RETURN_IF_ERROR(r.GetEnum<NvmeVolume>("cluster.nvme_volume",
                                           {{"local-pv", NvmeVolume::kLocalPv},
                                            {"ephemeral", NvmeVolume::kEphemeral},
                                            {"host-path", NvmeVolume::kHostPath}},
                                           &k.nvme_volume));
  TC_RETURN_IF_ERROR(r.GetString("cluster.nvme_storage_class", &k.nvme_storage_class));
  TC_RETURN_IF_ERROR(r.GetString("cluster.nvme_host_path", &k.nvme_host_path));
  TC_RETURN_IF_ERROR(r.GetString("cluster.checkpoint_claim", &k.checkpoint_claim));
  TC_RETURN_IF_ERROR(r.GetString("cluster.data_claim", &k.data_claim));
  TC_RETURN_IF_ERROR(ReadK8sScheduling(r, job));
  if (!c.catalog.empty() && fs::path(c.catalog).is_relative()) {
    c.catalog = (fs::path(job->source).parent_path() / c.catalog).lexically_normal().string();
  }
  return ReadHosts(r, job);
}

Status ReadCache(JobReader& r, JobSpec* job) {
  CacheSpec& c = job->cache;
  TC_RETURN_IF_ERROR(r.GetEnum<CachePolicy>("cache.policy",
                                            {{"tencache", CachePolicy::kTencache},
                                             {"zero-infinity", CachePolicy::kZeroInfinity},
                                             {"10cache-window", CachePolicy::kTenCacheWindow},
                                             {"lru", CachePolicy::kLru},
                                             {"none", CachePolicy::kNone}},
                                            &c.policy));
  TC_RETURN_IF_ERROR(r.GetSize("cache.device_budget", true, &c.device_budget));
  TC_RETURN_IF_ERROR(r.GetSize("cache.host_budget", true, &c.host_budget));
  TC_RETURN_IF_ERROR(r.GetSize("cache.nvme_budget", true, &c.nvme_budget, /*allow_zero=*/true));
  TC_RETURN_IF_ERROR(r.GetString("cache.nvme_path", &c.nvme_path));
  TC_RETURN_IF_ERROR(r.GetBool("cache.prefetch", &c.prefetch));
  return Status::Ok();
}

Status ApplyOverride(const std::string& spec, YAML::Node root, std::map<std::string, std::string>* origins) {
  const std::string where = "--set " + Excerpt(spec);  // in messages: a long value is cut
  const size_t eq = spec.find('=');
  if (eq == std::string::npos || eq == 0) {
    return Status::InvalidArgument(where + ": expected KEY=VALUE, e.g. --set train.steps=20");
  }
  const std::string key = spec.substr(0, eq);
  const std::string value = spec.substr(eq + 1);
  if (!IsLeaf(key)) {
    return Status::InvalidArgument(where + ": unknown key '" + Excerpt(key) + "'" + DidYouMean(key, LeafKeys()) +
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

std::vector<std::string> KnownJobKeys() { return LeafKeys(); }

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
  TC_RETURN_IF_ERROR(reader.GetString("name", &job.name));
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
  TC_RETURN_IF_ERROR(ReadModel(reader, source, &job));
  job.locations = reader.locations();
  TC_RETURN_IF_ERROR(ReadTrain(reader, source, &job));
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
