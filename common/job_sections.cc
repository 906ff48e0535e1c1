#include "common/job_sections.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include "common/human_format.h"
#include "common/image_reference.h"
#include "common/job_keys.h"
#include "common/text_file.h"

namespace tencache {

namespace fs = std::filesystem;

Status ReadKeys(JobReader& r, const std::string& section, JobSpec* job) {
  for (const JobKey& k : JobKeys()) {
    if (k.section() == section) TC_RETURN_IF_ERROR(k.read(r, job));
  }
  return Status::Ok();
}

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

namespace {

constexpr uint64_t kMaxHostfileBytes = 1ull << 20;

// cluster.target hosts: the machines from cluster.hosts or cluster.hostfile,
// which fix cluster.nodes and cluster.ranks_per_node.
Status ReadHosts(JobReader& r, JobSpec* job) {
  ClusterSpec& c = job->cluster;
  HostsSpec& h = c.hosts;
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
  // cluster.hosts's entries are in h.list already (JobKeys reads them for this target).
  const bool listed = !h.list.empty();
  if (listed != h.hostfile.empty()) {
    return Status::InvalidArgument(job->Where("cluster.target") + ": cluster.target hosts needs " +
                                   (!listed ? "cluster.hosts (a list such as [node1:2, node2:2], HOST:SLOTS) or "
                                              "cluster.hostfile"
                                            : "cluster.hosts or cluster.hostfile, not both"));
  }
  if (h.rsh_agent.empty()) return Status::InvalidArgument(job->Where("cluster.rsh_agent") + ": expected a program, e.g. ssh");
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

// cluster.image's grammar and the Kubernetes scheduling keys: the queue and
// priority class are names, the queue's gang scheduler (kueue by default) takes one.
Status CheckK8s(JobReader& r, JobSpec* job) {
  KubernetesSpec& k = job->cluster.k8s;
  if (!k.image.empty()) {
    if (std::string problem = ImageReferenceProblem(k.image); !problem.empty()) {
      return Status::InvalidArgument(job->Where("cluster.image") + ": '" + Excerpt(k.image) + "' is not an image "
                                     "reference (" + Excerpt(problem, 160) + "); expected [REGISTRY[:PORT]/]PATH[:TAG]"
                                     "[@sha256:DIGEST] with lower-case path components, e.g. ghcr.io/acme/tencache-worker:0.1.0");
    }
  }
  if (!k.queue.empty() && !r.Has("cluster.gang_scheduler")) k.gang_scheduler = GangScheduler::kKueue;
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

}  // namespace

Status ReadModel(JobReader& r, JobSpec* job) {
  TC_RETURN_IF_ERROR(ReadKeys(r, "model", job));
  ModelShape& m = job->model;
  // kv_heads follows heads where the preset has as many (multi-head attention)
  // and the job names heads but not kv_heads; max_positions follows seq_len
  // in a model without a preset.
  if (!r.Has("model.kv_heads")) {
    const StatusOr<ModelShape> preset = FindPreset(m.name);
    if (!preset.ok() || preset->kv_heads == preset->heads) m.kv_heads = m.heads;
  }
  if (m.name == "custom" && !r.Has("model.max_positions")) m.max_positions = m.seq_len;
  Status shape = ValidateModelShape(m, "model");
  if (!shape.ok()) {
    // Name the key the user wrote if the divisibility or range check failed on it.
    std::string msg = shape.message();
    std::string key = msg.substr(0, msg.find(':'));
    auto it = r.locations().find(key);
    std::string where = it != r.locations().end() ? it->second : job->source;
    return Status::InvalidArgument(where + ": key '" + key + "'" + msg.substr(key.size()));
  }
  return Status::Ok();
}

Status ReadTrain(JobReader& r, JobSpec* job) {
  const std::string& source = job->source;
  TC_RETURN_IF_ERROR(ReadKeys(r, "train", job));
  TrainSpec& t = job->train;
  for (const auto& [key, beta] : {std::pair<const char*, double>{"train.beta1", t.beta1}, {"train.beta2", t.beta2}}) {
    if (beta >= 1.0) {
      return Status::InvalidArgument(job->Where(key) + ": expected a number in [0, 1), got " + std::to_string(beta));
    }
  }
  if (t.min_lr > t.lr) {
    return Status::InvalidArgument(job->Where("train.min_lr") + ": " + std::to_string(t.min_lr) +
                                   " is above train.lr (" + std::to_string(t.lr) + "); expected at most train.lr");
  }
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

Status ReadCluster(JobReader& r, JobSpec* job) {
  TC_RETURN_IF_ERROR(ReadKeys(r, "cluster", job));
  ClusterSpec& c = job->cluster;
  if (c.nodes > c.max_nodes) c.max_nodes = c.nodes;
  job->locations = r.locations();  // so that Where names a --set
  TC_RETURN_IF_ERROR(CheckK8s(r, job));
  if (!c.catalog.empty() && fs::path(c.catalog).is_relative()) {
    c.catalog = (fs::path(job->source).parent_path() / c.catalog).lexically_normal().string();
  }
  return ReadHosts(r, job);
}

Status ReadCache(JobReader& r, JobSpec* job) { return ReadKeys(r, "cache", job); }

}  // namespace tencache
