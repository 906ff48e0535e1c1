#include "launcher/catalog.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>

#include "common/suggest.h"
#include "common/text_file.h"

namespace tencache {
namespace {

namespace fs = std::filesystem;

// Reads fields of one catalog entry, naming file, line and entry on error.
class EntryReader {
 public:
  EntryReader(const std::string& file, const YAML::Node& node, std::string entry)
      : file_(file), node_(node), entry_(std::move(entry)) {}

  Status Error(const std::string& key, const std::string& expected) const {
    const YAML::Mark m = node_.Mark();
    return Status::InvalidArgument(file_ + ":" + std::to_string(m.line + 1) + ": " + entry_ +
                                   ": key '" + key + "': expected " + expected);
  }
  Status String(const std::string& key, bool required, std::string* out) const {
    YAML::Node v = node_[key];
    if (!v.IsDefined() || v.IsNull()) return required ? Error(key, "a string") : Status::Ok();
    if (!v.IsScalar()) return Error(key, "a string");
    *out = v.Scalar();
    return Status::Ok();
  }
  Status Number(const std::string& key, bool required, double* out) const {
    YAML::Node v = node_[key];
    if (!v.IsDefined() || v.IsNull()) return required ? Error(key, "a positive number") : Status::Ok();
    try {
      *out = v.as<double>();
    } catch (const YAML::Exception&) {
      return Error(key, "a positive number");
    }
    if (!(*out > 0)) return Error(key, "a positive number");
    return Status::Ok();
  }
  Status Int(const std::string& key, bool required, int* out) const {
    double v = 0;
    TC_RETURN_IF_ERROR(Number(key, required, &v));
    if (v != 0) *out = static_cast<int>(v);
    if (v != static_cast<double>(*out)) return Error(key, "a positive integer");
    return Status::Ok();
  }
  YAML::Node Child(const std::string& key) const { return node_[key]; }
  const std::string& file() const { return file_; }

 private:
  std::string file_;
  YAML::Node node_;
  std::string entry_;
};

// Every key of the mapping `node` is one of `allowed`.
Status CheckKeys(const EntryReader& r, const YAML::Node& node, const std::vector<std::string>& allowed) {
  std::string names;
  for (const std::string& k : allowed) names += (names.empty() ? "" : ", ") + k;
  for (const auto& kv : node) {
    const std::string key = kv.first.IsScalar() ? kv.first.Scalar() : std::string();
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
      return r.Error(key, "one of " + names + DidYouMean(key, allowed));
    }
  }
  return Status::Ok();
}

// `sources:` maps a fact's key (one of `keys`) or `spec` (every fact not named)
// to where it comes from: a non-empty string, typically URLs and what they say.
Status ReadSources(const std::string& file, const EntryReader& e, const std::string& entry,
                   const std::vector<std::string>& keys, std::map<std::string, std::string>* out) {
  YAML::Node sources = e.Child("sources");
  if (!sources.IsDefined() || sources.IsNull()) return Status::Ok();
  std::vector<std::string> allowed = {"spec"};
  allowed.insert(allowed.end(), keys.begin(), keys.end());
  std::string names;
  for (const std::string& k : allowed) names += (names.empty() ? "" : ", ") + k;
  if (!sources.IsMap()) return e.Error("sources", "a mapping of " + names + " to a source string");
  EntryReader r(file, sources, entry + " sources");
  TC_RETURN_IF_ERROR(CheckKeys(r, sources, allowed));
  for (const auto& kv : sources) {
    const std::string key = kv.first.Scalar();
    if (!kv.second.IsScalar() || kv.second.Scalar().empty()) return r.Error(key, "a non-empty source string");
    (*out)[key] = kv.second.Scalar();
  }
  return Status::Ok();
}

Status ReadGpu(const std::string& file, const YAML::Node& node, GpuSpec* g) {
  EntryReader r(file, node, "gpu entry");
  TC_RETURN_IF_ERROR(r.String("name", true, &g->name));
  EntryReader named(file, node, "gpu '" + g->name + "'");
  TC_RETURN_IF_ERROR(named.Number("bf16_tflops", true, &g->bf16_tflops));
  TC_RETURN_IF_ERROR(named.Number("fp32_tflops", true, &g->fp32_tflops));
  TC_RETURN_IF_ERROR(named.Number("memory_gib", true, &g->memory_gib));
  TC_RETURN_IF_ERROR(named.Number("memory_bw_gbps", true, &g->memory_bw_gbps));
  TC_RETURN_IF_ERROR(named.Number("p2p_gbps", true, &g->p2p_gbps));
  TC_RETURN_IF_ERROR(named.Number("h2d_gbps", true, &g->h2d_gbps));
  TC_RETURN_IF_ERROR(named.String("pcie", false, &g->pcie));
  TC_RETURN_IF_ERROR(named.String("source", true, &g->source));
  TC_RETURN_IF_ERROR(ReadSources(file, named, "gpu '" + g->name + "'",
                                 {"bf16_tflops", "fp32_tflops", "memory_gib", "memory_bw_gbps", "p2p_gbps",
                                  "h2d_gbps", "pcie"},
                                 &g->sources));
  return Status::Ok();
}

// `nvme:` is a mapping of disks (known), `none`, `unknown`, or a mapping
// {state: none|unknown, note, source} to say why. A missing key is unknown.
Status ReadNvme(const std::string& file, const EntryReader& e, const std::string& type, NvmeSpec* out) {
  static const char kExpected[] =
      "a mapping {disks, disk_gb, read_gbps_per_disk, write_gbps_per_disk, note, source}, 'none' (the provider "
      "lists no instance storage) or 'unknown' (also as {state: none|unknown, note, source})";
  YAML::Node nvme = e.Child("nvme");
  out->state = NvmeSpec::State::kUnknown;
  if (!nvme.IsDefined() || nvme.IsNull()) {
    out->note = "no 'nvme' key in " + file;
    return Status::Ok();
  }
  auto state_of = [](const std::string& v, NvmeSpec::State* st) {
    if (v == "none") *st = NvmeSpec::State::kNone;
    else if (v == "unknown") *st = NvmeSpec::State::kUnknown;
    else return false;
    return true;
  };
  if (nvme.IsScalar()) {
    if (!state_of(nvme.Scalar(), &out->state)) {
      return e.Error("nvme", std::string(kExpected) + ", got '" + nvme.Scalar() + "'");
    }
    return Status::Ok();
  }
  if (!nvme.IsMap()) return e.Error("nvme", kExpected);
  EntryReader n(file, nvme, "instance '" + type + "' nvme");
  TC_RETURN_IF_ERROR(n.String("note", false, &out->note));
  TC_RETURN_IF_ERROR(n.String("source", false, &out->source));
  YAML::Node state = nvme["state"];
  if (state.IsDefined() && !state.IsNull()) {
    if (!state.IsScalar() || !state_of(state.Scalar(), &out->state)) {
      return n.Error("state", "'none' or 'unknown' (a mapping with disks is known), got '" +
                                  (state.IsScalar() ? state.Scalar() : std::string("a non-scalar")) + "'");
    }
    if (nvme["disks"].IsDefined()) return n.Error("disks", "no disks with state '" + state.Scalar() + "'");
    return Status::Ok();
  }
  out->state = NvmeSpec::State::kKnown;
  TC_RETURN_IF_ERROR(n.Int("disks", true, &out->disks));
  TC_RETURN_IF_ERROR(n.Number("disk_gb", true, &out->disk_gb));
  TC_RETURN_IF_ERROR(n.Number("read_gbps_per_disk", true, &out->read_gbps_per_disk));
  TC_RETURN_IF_ERROR(n.Number("write_gbps_per_disk", true, &out->write_gbps_per_disk));
  return Status::Ok();
}

Status ReadInstance(const std::string& file, const YAML::Node& node, const std::string& provider,
                    const std::string& recorded, InstanceSpec* s) {
  EntryReader r(file, node, "instance entry");
  TC_RETURN_IF_ERROR(r.String("type", true, &s->type));
  EntryReader e(file, node, "instance '" + s->type + "'");
  s->provider = provider;
  s->price_recorded = recorded;
  s->file = file;
  TC_RETURN_IF_ERROR(e.String("gpu", true, &s->gpu));
  TC_RETURN_IF_ERROR(e.Int("gpu_count", true, &s->gpu_count));
  TC_RETURN_IF_ERROR(e.Number("gpu_memory_gib", true, &s->gpu_memory_gib));
  TC_RETURN_IF_ERROR(e.Int("vcpus", true, &s->vcpus));
  TC_RETURN_IF_ERROR(e.Number("ram_gib", true, &s->ram_gib));
  TC_RETURN_IF_ERROR(e.Number("network_gbps", true, &s->network_gbps));
  TC_RETURN_IF_ERROR(e.String("network_assumed", false, &s->network_assumed));
  if (e.Child("network_latency_us").IsDefined()) {
    double us = 0;
    TC_RETURN_IF_ERROR(e.Number("network_latency_us", true, &us));
    s->network_latency_us = us;
  }
  TC_RETURN_IF_ERROR(ReadNvme(file, e, s->type, &s->nvme));
  YAML::Node price = e.Child("price");
  if (!price.IsDefined() || !price.IsMap()) return e.Error("price", "a mapping {on_demand: USD/h, spot: USD/h, source: ...}");
  EntryReader p(file, price, "instance '" + s->type + "' price");
  TC_RETURN_IF_ERROR(p.Number("on_demand", true, &s->price_on_demand));
  TC_RETURN_IF_ERROR(CheckKeys(p, price, {"on_demand", "spot", "source", "spot_source"}));
  double spot = 0;
  TC_RETURN_IF_ERROR(p.Number("spot", false, &spot));
  if (spot > 0) s->price_spot = spot;
  TC_RETURN_IF_ERROR(p.String("source", true, &s->price_source));
  TC_RETURN_IF_ERROR(p.String("spot_source", false, &s->spot_source));
  YAML::Node interruption = e.Child("spot_interruption");
  if (interruption.IsDefined() && !interruption.IsNull()) {
    if (!interruption.IsMap()) return e.Error("spot_interruption", "a mapping {monthly: share, bucket: ..., source: ...}");
    EntryReader i(file, interruption, "instance '" + s->type + "' spot_interruption");
    TC_RETURN_IF_ERROR(CheckKeys(i, interruption, {"monthly", "bucket", "source"}));
    SpotInterruption si;
    TC_RETURN_IF_ERROR(i.Number("monthly", true, &si.monthly));
    if (si.monthly >= 1) return i.Error("monthly", "a share of nodes below 1 (0.10 for 10 %)");
    TC_RETURN_IF_ERROR(i.String("bucket", false, &si.bucket));
    TC_RETURN_IF_ERROR(i.String("source", true, &si.source));
    s->spot_interruption = si;
  }
  TC_RETURN_IF_ERROR(ReadSources(file, e, "instance '" + s->type + "'",
                                 {"gpu", "gpu_count", "gpu_memory_gib", "vcpus", "ram_gib", "network_gbps"},
                                 &s->sources));
  return Status::Ok();
}

// One `fabrics:` entry: {name, types: [...], resources: {NAME: COUNT}, env:
// {VAR: VALUE}, note, source}. resources and env may both be absent (the
// listed types have no fabric tencache renders; `note` says why).
Status ReadFabric(const std::string& file, const YAML::Node& node, std::vector<std::string>* types, FabricSpec* f) {
  EntryReader r(file, node, "fabric entry");
  if (!node.IsMap()) return r.Error("fabrics", "a mapping {name, types, resources, env, note, source}");
  TC_RETURN_IF_ERROR(r.String("name", true, &f->name));
  EntryReader e(file, node, "fabric '" + f->name + "'");
  TC_RETURN_IF_ERROR(e.String("note", false, &f->note));
  TC_RETURN_IF_ERROR(e.String("source", true, &f->source));
  const YAML::Node t = node["types"];
  if (!t.IsDefined() || !t.IsSequence() || t.size() == 0) return e.Error("types", "a non-empty list of instance types");
  for (const YAML::Node& n : t) {
    if (!n.IsScalar()) return e.Error("types", "a list of instance type names");
    types->push_back(n.Scalar());
  }
  const YAML::Node res = node["resources"];
  if (res.IsDefined() && !res.IsNull()) {
    if (!res.IsMap()) return e.Error("resources", "a mapping of extended resource name to a count per pod");
    for (const auto& kv : res) {
      int count = 0;
      try {
        count = kv.second.as<int>();
      } catch (const YAML::Exception&) {
        count = 0;
      }
      if (count < 1) return e.Error("resources", "a positive integer count for '" + kv.first.Scalar() + "'");
      f->resources.emplace_back(kv.first.Scalar(), count);
    }
  }
  const YAML::Node env = node["env"];
  if (env.IsDefined() && !env.IsNull()) {
    if (!env.IsMap()) return e.Error("env", "a mapping of environment variable to value");
    for (const auto& kv : env) {
      if (!kv.second.IsScalar()) return e.Error("env", "a string value for '" + kv.first.Scalar() + "'");
      f->env.emplace_back(kv.first.Scalar(), kv.second.Scalar());
    }
  }
  if (f->none() && f->note.empty()) return e.Error("note", "why the types have no fabric (no resources, no env)");
  return Status::Ok();
}

}  // namespace

Status Catalog::LoadFile(const std::string& file) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(file);
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(file + ": malformed catalog YAML: " + e.what());
  }
  if (!root.IsMap()) return Status::InvalidArgument(file + ": expected a mapping with 'gpus' or 'instances'");
  const YAML::Node& top = root;  // const lookups: a missing key must not be inserted
  if (top["gpus"].IsDefined()) {
    if (!top["gpus"].IsSequence()) return Status::InvalidArgument(file + ": key 'gpus': expected a list");
    for (const YAML::Node& n : top["gpus"]) {
      GpuSpec g;
      TC_RETURN_IF_ERROR(ReadGpu(file, n, &g));
      gpus_.push_back(g);
    }
  }
  if (top["instances"].IsDefined()) {
    if (!top["instances"].IsSequence()) return Status::InvalidArgument(file + ": key 'instances': expected a list");
    auto scalar = [&](const char* key) {
      return top[key].IsDefined() && top[key].IsScalar() ? top[key].Scalar() : std::string();
    };
    const std::string provider = scalar("provider"), recorded = scalar("price_recorded");
    if (provider.empty()) return Status::InvalidArgument(file + ": key 'provider': expected a provider name");
    for (const YAML::Node& n : top["instances"]) {
      InstanceSpec s;
      TC_RETURN_IF_ERROR(ReadInstance(file, n, provider, recorded, &s));
      for (const InstanceSpec& other : instances_) {
        if (other.type == s.type) {
          return Status::InvalidArgument(file + ": instance '" + s.type + "' is listed twice (also in " +
                                         other.file + ")");
        }
      }
      instances_.push_back(s);
    }
  }
  if (top["fabrics"].IsDefined()) {
    if (!top["fabrics"].IsSequence()) return Status::InvalidArgument(file + ": key 'fabrics': expected a list");
    for (const YAML::Node& n : top["fabrics"]) {
      PendingFabric p;
      p.file = file;
      p.line = n.Mark().line + 1;
      TC_RETURN_IF_ERROR(ReadFabric(file, n, &p.types, &p.fabric));
      fabrics_.push_back(std::move(p));
    }
  }
  return Status::Ok();
}

Status Catalog::AttachFabrics() {
  for (const PendingFabric& p : fabrics_) {
    for (const std::string& type : p.types) {
      auto it = std::find_if(instances_.begin(), instances_.end(), [&](const InstanceSpec& s) { return s.type == type; });
      const std::string where = p.file + ":" + std::to_string(p.line) + ": fabric '" + p.fabric.name + "'";
      if (it == instances_.end()) {
        std::vector<std::string> names;
        for (const InstanceSpec& s : instances_) names.push_back(s.type);
        return Status::InvalidArgument(where + ": key 'types': unknown instance type '" + type + "'" +
                                       DidYouMean(type, names));
      }
      if (!it->fabric.name.empty()) {
        return Status::InvalidArgument(where + ": instance '" + type + "' already has the fabric '" +
                                       it->fabric.name + "'");
      }
      it->fabric = p.fabric;
    }
  }
  fabrics_.clear();
  return Status::Ok();
}

Status Catalog::CheckReferences() const {
  if (instances_.empty()) return Status::InvalidArgument("catalog: no instances found");
  for (const InstanceSpec& s : instances_) {
    if (FindGpu(s.gpu) == nullptr) {
      std::vector<std::string> names;
      for (const GpuSpec& g : gpus_) names.push_back(g.name);
      return Status::InvalidArgument(s.file + ": instance '" + s.type + "': key 'gpu': unknown GPU '" +
                                     s.gpu + "'" + DidYouMean(s.gpu, names) + "; add it to gpus.yaml");
    }
  }
  return Status::Ok();
}

StatusOr<Catalog> Catalog::Load(const std::string& path) {
  Catalog catalog;
  catalog.path_ = path;
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    std::vector<std::string> files;
    for (const auto& entry : fs::directory_iterator(path, ec)) {
      if (entry.path().extension() == ".yaml") files.push_back(entry.path().string());
    }
    std::sort(files.begin(), files.end());
    if (files.empty()) return Status::NotFound(path + ": catalog directory has no *.yaml files");
    for (const std::string& f : files) TC_RETURN_IF_ERROR(catalog.LoadFile(f));
  } else if (fs::is_regular_file(path, ec)) {
    TC_RETURN_IF_ERROR(catalog.LoadFile(path));
  } else {
    const std::string problem = PathProblem(path);
    return Status::NotFound(path + ": catalog " + (problem.empty() ? "is neither a folder nor a file"
                                                   : problem == "not found" ? problem : "is " + problem) +
                            "; expected a directory of *.yaml files such as configs/instances");
  }
  TC_RETURN_IF_ERROR(catalog.AttachFabrics());
  TC_RETURN_IF_ERROR(catalog.CheckReferences());
  return catalog;
}

StatusOr<const InstanceSpec*> Catalog::FindInstance(const std::string& type) const {
  std::vector<std::string> names;
  for (const InstanceSpec& s : instances_) {
    if (s.type == type) return &s;
    names.push_back(s.type);
  }
  return Status::NotFound("unknown instance type '" + type + "'" + DidYouMean(type, names));
}

namespace {
std::string SourceOf(const std::map<std::string, std::string>& sources, const std::string& key) {
  auto it = sources.find(key);
  if (it == sources.end()) it = sources.find("spec");
  return it == sources.end() ? std::string() : it->second;
}
}  // namespace

std::string GpuSpec::source_of(const std::string& key) const { return SourceOf(sources, key); }
std::string InstanceSpec::source_of(const std::string& key) const { return SourceOf(sources, key); }

const GpuSpec* Catalog::FindGpu(const std::string& name) const {
  for (const GpuSpec& g : gpus_) {
    if (g.name == name) return &g;
  }
  return nullptr;
}

std::string DefaultCatalogPath() { return TENCACHE_DEFAULT_CATALOG; }

std::string CatalogPathFor(const std::string& flag, const std::string& job_catalog) {
  return !flag.empty() ? flag : !job_catalog.empty() ? job_catalog : DefaultCatalogPath();
}

}  // namespace tencache
