#include "common/job_keys.h"

#include <cstdint>
#include <filesystem>
#include <optional>
#include <utility>

#include <nlohmann/json.hpp>

#include "common/human_format.h"
#include "common/job_reader.h"
#include "common/job_sections.h"
#include "common/suggest.h"
#include "common/text_file.h"

namespace tencache {
namespace {

namespace fs = std::filesystem;

// The documentation columns of a key: meaning, default, example (Markdown).
struct KeyDoc {
  const char* meaning;
  const char* default_text;
  const char* example;
};

constexpr int64_t kIntMax = 2147483647;
enum Bound { kAbove, kAtLeast };               // a number's lower bound: exclusive or inclusive
enum ZeroSize { kPositive, kZeroAllowed };     // whether a budget may be 0

template <typename E>
using Names = std::vector<std::pair<std::string, E>>;

const Names<DType> kDTypes = {{"bf16", DType::kBf16}, {"fp16", DType::kFp16}, {"fp32", DType::kFp32}};
const Names<MlpKind> kMlpKinds = {
    {"gelu", MlpKind::kGelu}, {"gelu_exact", MlpKind::kGeluExact}, {"relu", MlpKind::kRelu}, {"swiglu", MlpKind::kSwiGlu}};
const Names<NormKind> kNormKinds = {{"layernorm", NormKind::kLayerNorm}, {"rmsnorm", NormKind::kRmsNorm}};
const Names<PositionKind> kPositionKinds = {
    {"learned", PositionKind::kLearned}, {"rotary", PositionKind::kRotary}, {"alibi", PositionKind::kAlibi}};
const Names<LrSchedule> kLrSchedules = {
    {"constant", LrSchedule::kConstant}, {"cosine", LrSchedule::kCosine}, {"linear", LrSchedule::kLinear}};
const Names<OptimizerOverlap> kOptimizerOverlaps = {
    {"auto", OptimizerOverlap::kAuto}, {"on", OptimizerOverlap::kOn}, {"off", OptimizerOverlap::kOff}};
const Names<Target> kTargets = {{"local", Target::kLocal}, {"k8s", Target::kK8s}, {"hosts", Target::kHosts}};
const Names<Objective> kObjectives = {{"cost", Objective::kCost}, {"time", Objective::kTime}};
const Names<NvmeVolume> kNvmeVolumes = {
    {"local-pv", NvmeVolume::kLocalPv}, {"ephemeral", NvmeVolume::kEphemeral}, {"host-path", NvmeVolume::kHostPath}};
const Names<GangScheduler> kGangSchedulers = {{"none", GangScheduler::kNone},
                                              {"kueue", GangScheduler::kKueue},
                                              {"volcano", GangScheduler::kVolcano},
                                              {"scheduler-plugins", GangScheduler::kSchedulerPlugins}};
const Names<CachePolicy> kCachePolicies = {{"tencache", CachePolicy::kTencache},
                                           {"zero-infinity", CachePolicy::kZeroInfinity},
                                           {"10cache-window", CachePolicy::kTenCacheWindow},
                                           {"lru", CachePolicy::kLru},
                                           {"none", CachePolicy::kNone}};

std::string Quote(const std::string& s) { return nlohmann::json(s).dump(); }  // a YAML double-quoted scalar
std::string OptionalQuote(const std::string& s) { return s.empty() ? "" : Quote(s); }
std::string NumberText(double v) { return nlohmann::json(v).dump(); }  // the shortest text that reads back exactly
std::string IntText(int64_t v) { return std::to_string(v); }
std::string QuotedList(const std::vector<std::string>& names) {
  if (names.empty()) return "";
  std::string list;
  for (const std::string& n : names) list += (list.empty() ? "" : ", ") + Quote(n);
  return "[" + list + "]";
}

JobKey Key(const char* path, std::string type, const KeyDoc& doc) {
  JobKey k;
  k.path = path;
  k.type = std::move(type);
  k.meaning = doc.meaning;
  k.default_text = doc.default_text;
  k.example = doc.example;
  return k;
}

// Each builder below takes `field`, a generic lambda giving the JobSpec member
// the key sets (TC_FIELD), so that reading and writing name the member once.
#define TC_FIELD(member) [](auto& job) -> auto& { return job.member; }

template <typename F>
JobKey Text(const char* path, F field, const KeyDoc& doc) {
  JobKey k = Key(path, "string", doc);
  k.read = [path, field](JobReader& r, JobSpec* j) { return r.GetString(path, &field(*j)); };
  k.write = [field](const JobSpec& j) { return OptionalQuote(field(j)); };
  return k;
}

// A path read as written (job_spec.cc makes it absolute from the job file's
// folder) and written absolute.
template <typename F>
JobKey FilePath(const char* path, F field, const KeyDoc& doc) {
  JobKey k = Text(path, field, doc);
  k.type = "path";
  k.write = [field](const JobSpec& j) {
    return field(j).empty() ? std::string() : Quote(fs::absolute(field(j)).string());
  };
  return k;
}

// cluster.target hosts's strings: written only for that target (the reader refuses them for another).
template <typename F>
JobKey HostsText(const char* path, F field, const KeyDoc& doc) {
  JobKey k = Text(path, field, doc);
  k.write = [field](const JobSpec& j) { return j.cluster.target == Target::kHosts ? OptionalQuote(field(j)) : ""; };
  return k;
}

std::string IntType(int64_t min, int64_t max) {
  return max >= kIntMax ? "integer >= " + IntText(min) : "integer from " + IntText(min) + " to " + IntText(max);
}

template <typename F>
JobKey Int(const char* path, int64_t min, int64_t max, F field, const KeyDoc& doc) {
  JobKey k = Key(path, IntType(min, max), doc);
  k.read = [path, min, max, field](JobReader& r, JobSpec* j) { return r.GetInt(path, min, &field(*j), max); };
  k.write = [field](const JobSpec& j) { return IntText(field(j)); };
  return k;
}

template <typename F>
JobKey Uint(const char* path, uint64_t min, F field, const KeyDoc& doc) {
  JobKey k = Key(path, IntType(int64_t(min), kIntMax), doc);
  k.read = [path, min, field](JobReader& r, JobSpec* j) { return r.GetUint64(path, min, &field(*j)); };
  k.write = [field](const JobSpec& j) { return std::to_string(field(j)); };
  return k;
}

// An integer >= 1, or `auto` (0 in the spec).
template <typename F>
JobKey CountOrAuto(const char* path, int max, F field, const KeyDoc& doc) {
  JobKey k = Key(path, "`auto` or " + IntType(1, max), doc);
  k.read = [path, max, field](JobReader& r, JobSpec* j) { return r.GetCountOrAuto(path, &field(*j), max); };
  k.write = [field](const JobSpec& j) { return field(j) == 0 ? std::string("auto") : IntText(field(j)); };
  return k;
}

template <typename F>
JobKey Number(const char* path, double min, Bound bound, F field, const KeyDoc& doc) {
  JobKey k = Key(path, std::string("number ") + (bound == kAbove ? "> " : ">= ") + NumberText(min), doc);
  if (min == 0) k.type = bound == kAbove ? "number > 0" : "number >= 0";
  k.read = [path, min, bound, field](JobReader& r, JobSpec* j) {
    return r.GetDouble(path, min, bound == kAbove, &field(*j));
  };
  k.write = [field](const JobSpec& j) { return NumberText(field(j)); };
  return k;
}

template <typename F>
JobKey Flag(const char* path, F field, const KeyDoc& doc) {
  JobKey k = Key(path, "`true` or `false`", doc);
  k.read = [path, field](JobReader& r, JobSpec* j) { return r.GetBool(path, &field(*j)); };
  k.write = [field](const JobSpec& j) { return std::string(field(j) ? "true" : "false"); };
  return k;
}

template <typename E, typename F>
JobKey Choice(const char* path, const Names<E>& names, F field, const KeyDoc& doc) {
  std::string type;
  for (const auto& n : names) type += (type.empty() ? "`" : ", `") + n.first + "`";
  JobKey k = Key(path, "one of " + type, doc);
  k.read = [path, &names, field](JobReader& r, JobSpec* j) { return r.GetEnum<E>(path, names, &field(*j)); };
  k.write = [&names, field](const JobSpec& j) {
    for (const auto& n : names) {
      if (n.second == field(j)) return n.first;
    }
    return std::string();
  };
  return k;
}

template <typename F>
JobKey NameList(const char* path, F field, const KeyDoc& doc) {
  JobKey k = Key(path, "list of names", doc);
  k.read = [path, field](JobReader& r, JobSpec* j) { return r.GetStringList(path, &field(*j)); };
  k.write = [field](const JobSpec& j) { return QuotedList(field(j)); };
  return k;
}

// A per-rank cache budget: a size, or `auto` (nullopt).
template <typename F>
JobKey Budget(const char* path, ZeroSize zero, F field, const KeyDoc& doc) {
  JobKey k = Key(path, zero == kZeroAllowed ? "`auto` or size (`0` allowed)" : "`auto` or size", doc);
  k.read = [path, zero, field](JobReader& r, JobSpec* j) {
    return r.GetSize(path, /*allow_auto=*/true, &field(*j), zero == kZeroAllowed);
  };
  k.write = [field](const JobSpec& j) {
    return field(j).has_value() ? std::to_string(*field(j)) : std::string("auto");
  };
  return k;
}

JobKey VolumeSize(const KeyDoc& doc) {
  JobKey k = Key("cluster.volume.size", "size", doc);
  k.read = [](JobReader& r, JobSpec* j) {
    std::optional<uint64_t> size;
    TC_RETURN_IF_ERROR(r.GetSize("cluster.volume.size", /*allow_auto=*/false, &size));
    if (size) j->cluster.volume.size = *size;
    return Status::Ok();
  };
  k.write = [](const JobSpec& j) {
    return j.cluster.volume.size == 0 ? std::string() : std::to_string(j.cluster.volume.size);
  };
  return k;
}

// model.preset sets every shape key; without it the shape keys are required.
JobKey Preset(const KeyDoc& doc) {
  JobKey k = Key("model.preset", "a preset's name", doc);
  k.read = [](JobReader& r, JobSpec* job) {
    std::string preset;
    TC_RETURN_IF_ERROR(r.GetString("model.preset", &preset));
    if (!preset.empty()) {
      StatusOr<ModelShape> found = FindPreset(Excerpt(preset));  // every preset's name is short: cut for the message
      if (!found.ok()) {
        return Status::InvalidArgument(r.locations().at("model.preset") + ": key 'model.preset': " +
                                       found.status().message() + DidYouMean(preset, PresetNames()));
      }
      job->model = *found;
      return Status::Ok();
    }
    job->model.name = "custom";
    for (const char* key : {"model.layers", "model.hidden", "model.heads", "model.ffn_hidden", "model.seq_len",
                            "model.vocab"}) {
      if (!r.Has(key)) {
        return Status::InvalidArgument(job->source + ": key '" + key +
                                       "' is required when model.preset is not set (or set "
                                       "model.preset to one of the presets)");
      }
    }
    return Status::Ok();
  };
  k.write = [](const JobSpec& j) { return j.model.name == "custom" ? std::string() : Quote(j.model.name); };
  return k;
}

// model.init: a checkpoint that must be there when the job is read.
JobKey Init(const KeyDoc& doc) {
  JobKey k = FilePath("model.init", TC_FIELD(init), doc);
  k.read = [](JobReader& r, JobSpec* job) {
    TC_RETURN_IF_ERROR(r.GetString("model.init", &job->init));
    if (job->init.empty()) return Status::Ok();
    fs::path init(job->init);
    if (init.is_relative()) init = fs::path(job->source).parent_path() / init;
    job->init = init.lexically_normal().string();
    if (const std::string problem = PathProblem(init.string()); !problem.empty()) {
      return Status::InvalidArgument(job->Where("model.init") + ": '" + Excerpt(job->init, 512) + "' is " +
                                     (problem == "not found" ? "not there" : problem) +
                                     "; expected a .safetensors file or a folder holding "
                                     "model.safetensors or model.safetensors.index.json");
    }
    return Status::Ok();
  };
  return k;
}

// cluster.hosts: HOST or HOST:SLOTS each, for cluster.target hosts (job_spec.cc
// refuses the key for another target).
JobKey Hosts(const KeyDoc& doc) {
  JobKey k = Key("cluster.hosts", "list of `HOST` or `HOST:SLOTS`", doc);
  k.read = [](JobReader& r, JobSpec* job) {
    std::vector<std::string> names;
    TC_RETURN_IF_ERROR(r.GetStringList("cluster.hosts", &names));
    if (job->cluster.target != Target::kHosts) return Status::Ok();
    for (const std::string& n : names) {
      HostSlots hs;
      if (!ParseHostSlots(n, /*hostfile=*/false, &hs)) {
        return Status::InvalidArgument(job->Where("cluster.hosts") +
                                       ": expected HOST or HOST:SLOTS (slots >= 1), got '" + Excerpt(n) + "'");
      }
      job->cluster.hosts.list.push_back(hs);
    }
    return Status::Ok();
  };
  k.write = [](const JobSpec& j) {
    if (j.cluster.target != Target::kHosts) return std::string();
    std::string list;
    for (const HostSlots& h : j.cluster.hosts.list) {
      list += (list.empty() ? "" : ", ") + Quote(h.host + ":" + std::to_string(h.slots));
    }
    return "[" + list + "]";
  };
  return k;
}

// cluster.hostfile is read into cluster.hosts (job_spec.cc), which the resolved job lists instead.
JobKey Hostfile(const KeyDoc& doc) {
  JobKey k = Text("cluster.hostfile", TC_FIELD(cluster.hosts.hostfile), doc);
  k.type = "path";
  k.write = [](const JobSpec&) { return std::string(); };
  return k;
}

std::vector<JobKey> MakeJobKeys() {
  std::vector<JobKey> keys;
  // top level
  keys.push_back(Text("name", TC_FIELD(name),
      {"Job name: at most 63 lower-case letters, digits and `-`, starting and ending with a letter "
      "or digit (a DNS label: it names Kubernetes objects and the run folder).",
      "the file name without `.yaml`", "`llama7b-finetune`"}));
  // model
  keys.push_back(Preset(
      {"A published architecture: `tiny`, `gpt2` (`gpt2-124m`), `gpt2-medium` (`gpt2-355m`), "
      "`gpt2-large` (`gpt2-774m`), `gpt2-xl` (`gpt2-1.5b`), `opt-1.3b`, `opt-6.7b`, `opt-13b`, "
      "`opt-30b`, `llama-2-7b`, `llama-2-13b`, `llama-2-70b`, `falcon-7b`, `bloom-7b1`. Shapes are "
      "exact: each matches its published parameter count.",
      "none (then the shape keys are required)", "`llama-2-7b`"}));
  keys.push_back(Choice<DType>("model.dtype", kDTypes, TC_FIELD(dtype),
      {"The weights' dtype: `bf16` or `fp16` (mixed precision: the model computes in it, with fp32 "
      "master weights and AdamW moments) or `fp32`. `fp16` runs with dynamic loss scaling "
      "(`train.initial_loss_scale`, `train.loss_scale_window`): a step whose gradient overflows "
      "applies nothing and halves the scale, and the metrics count it (`skipped`, `skipped_steps`)."
      " On a CPU, where libtorch has no fp16 kernels, an `fp16` job keeps and moves fp16 weights "
      "but computes in fp32 (the metrics' `compute_dtype` says so).",
      "`bf16`", "`fp16`"}));
  keys.push_back(Int("model.layers", 1, kMaxModelLayers, TC_FIELD(model.layers),
      {"Transformer blocks.",
      "preset", "`32`"}));
  keys.push_back(Int("model.hidden", 1, kMaxModelWidth, TC_FIELD(model.hidden),
      {"Model width.",
      "preset", "`4096`"}));
  keys.push_back(Int("model.heads", 1, kMaxModelHeads, TC_FIELD(model.heads),
      {"Attention heads; must divide `hidden`.",
      "preset", "`32`"}));
  keys.push_back(Int("model.kv_heads", 1, kMaxModelHeads, TC_FIELD(model.kv_heads),
      {"Key/value heads (grouped-query or multi-query attention); must divide `heads`. Where the "
      "preset has as many as heads, a new `heads` carries it along.",
      "`heads`", "`8`"}));
  keys.push_back(Int("model.ffn_hidden", 1, 4 * kMaxModelWidth, TC_FIELD(model.ffn_hidden),
      {"Width of the MLP's inner layer.",
      "preset", "`11008`"}));
  keys.push_back(Int("model.seq_len", 1, kMaxModelPositions, TC_FIELD(model.seq_len),
      {"Training sequence length in tokens.",
      "preset", "`2048`"}));
  keys.push_back(Int("model.vocab", 1, kMaxModelVocab, TC_FIELD(model.vocab),
      {"Vocabulary size (256 for byte-level data).",
      "preset", "`32000`"}));
  keys.push_back(Int("model.max_positions", 1, kMaxModelPositions, TC_FIELD(model.max_positions),
      {"Rows of a learned position table; must be at least `seq_len` with learned positions.",
      "`seq_len`", "`2048`"}));
  keys.push_back(Choice<MlpKind>("model.mlp", kMlpKinds, TC_FIELD(model.mlp),
      {"`gelu` (two matrices, GELU's tanh approximation: GPT-2, BLOOM), `gelu_exact` (erf GELU: "
      "Falcon), `relu` (OPT) or `swiglu` (three matrices: Llama).",
      "`gelu`", "`swiglu`"}));
  keys.push_back(Choice<NormKind>("model.norm", kNormKinds, TC_FIELD(model.norm),
      {"`layernorm` (weight and bias) or `rmsnorm` (weight only).",
      "`layernorm`", "`rmsnorm`"}));
  keys.push_back(Choice<PositionKind>("model.position", kPositionKinds, TC_FIELD(model.position),
      {"`learned`, `rotary` or `alibi` positions.",
      "`learned`", "`rotary`"}));
  keys.push_back(Flag("model.bias", TC_FIELD(model.bias),
      {"Whether linear layers carry biases.",
      "`true`", "`false`"}));
  keys.push_back(Flag("model.tied_embeddings", TC_FIELD(model.tied_embeddings),
      {"Whether the LM head shares the token embedding.",
      "`true`", "`false`"}));
  keys.push_back(Flag("model.fused_qkv", TC_FIELD(model.fused_qkv),
      {"One query-key-value matrix (rows: all query heads, then the key heads, then the value heads)"
      " instead of three.",
      "`false`", "`true`"}));
  keys.push_back(Flag("model.parallel_block", TC_FIELD(model.parallel_block),
      {"Attention and MLP both read one norm of the layer input and add to it together (Falcon); "
      "otherwise each has its own norm, in turn.",
      "`false`", "`true`"}));
  keys.push_back(Flag("model.embedding_norm", TC_FIELD(model.embedding_norm),
      {"A norm right after the token embedding (BLOOM).",
      "`false`", "`true`"}));
  keys.push_back(Number("model.rope_theta", 0.0, kAbove, TC_FIELD(model.rope_theta),
      {"The rotary base θ (`model.position: rotary`): dimension pair i of a head turns by position x"
      " θ^(-2i/head_size).",
      "`10000`", "`500000`"}));
  keys.push_back(Number("model.norm_eps", 0.0, kAbove, TC_FIELD(model.norm_eps),
      {"The epsilon of every LayerNorm / RMSNorm.",
      "`1e-05`", "`1e-06`"}));
  keys.push_back(Init(
      {"A Hugging Face safetensors checkpoint the weights start from: a `.safetensors` file, or a "
      "folder with `model.safetensors` or `model.safetensors.index.json` and its shards (relative "
      "to the job file). Tensor names are `transformers`' for the architecture (docs/worker.md); "
      "F32, F16 and BF16 are read, one tensor at a time. Every tensor must be there with its shape "
      "and nothing else (buffers such as attention masks aside). Empty: drawn from `train.seed`.",
      "none", "`llama-2-7b-hf/`"}));
  // train
  keys.push_back(FilePath("train.data", TC_FIELD(train.data),
      {"Training corpus: a text file (byte-level tokens, vocab 256), a `.bin`/`.u16` file of "
      "little-endian uint16 tokens, or a `.u32` file of uint32 tokens (vocabularies above 65,536). "
      "Every token id must be below `model.vocab`. Relative paths are read from the job file's "
      "folder. When the file exists and `tokens_per_epoch` is not set, its size gives the tokens "
      "per epoch.",
      "none", "`data/corpus.txt`"}));
  keys.push_back(Uint("train.tokens_per_epoch", 1, TC_FIELD(train.tokens_per_epoch),
      {"Tokens in one epoch, for costing when the data is not at hand. Required unless `data` names "
      "an existing file.",
      "from `data`", "`2000000000`"}));
  keys.push_back(CountOrAuto("train.micro_batch", kIntMax, TC_FIELD(train.micro_batch),
      {"Sequences per rank per forward/backward pass, or `auto`: the planner tries the divisors of "
      "`global_batch / ranks`, largest first, and keeps the first that fits each instance type.",
      "`1`", "`4`, `auto`"}));
  keys.push_back(Int("train.global_batch", 1, kIntMax, TC_FIELD(train.global_batch),
      {"Sequences per optimizer step over all ranks; a multiple of `micro_batch`. A plan needs it to"
      " be a multiple of ranks x `micro_batch` (the rest is gradient accumulation).",
      "`1`", "`64`"}));
  keys.push_back(Int("train.steps", 1, kIntMax, TC_FIELD(train.steps),
      {"Optimizer steps to run.",
      "`1000`", "`20`"}));
  keys.push_back(Number("train.lr", 0.0, kAbove, TC_FIELD(train.lr),
      {"AdamW learning rate (> 0).",
      "`3.0e-4`", "`1.0e-4`"}));
  keys.push_back(Choice<LrSchedule>("train.lr_schedule", kLrSchedules, TC_FIELD(train.lr_schedule),
      {"The learning rate over the run: `constant`, `cosine` (from `train.lr` down to `train.min_lr`"
      " at `train.steps` along a half cosine) or `linear`, each after a linear warm-up of "
      "`train.warmup_steps` (step s of the warm-up uses lr x (s + 1) / warmup_steps). The metrics "
      "log each step's `lr`.",
      "`constant`", "`cosine`"}));
  keys.push_back(Int("train.warmup_steps", 0, kIntMax, TC_FIELD(train.warmup_steps),
      {"Steps of linear warm-up to `train.lr`.",
      "`0`", "`100`"}));
  keys.push_back(Number("train.min_lr", 0.0, kAtLeast, TC_FIELD(train.min_lr),
      {"Where `cosine` and `linear` end; at most `train.lr`.",
      "`0`", "`3.0e-5`"}));
  keys.push_back(Number("train.beta1", 0.0, kAtLeast, TC_FIELD(train.beta1),
      {"AdamW's first-moment decay rate, in [0, 1).",
      "`0.9`", "`0.95`"}));
  keys.push_back(Number("train.beta2", 0.0, kAtLeast, TC_FIELD(train.beta2),
      {"AdamW's second-moment decay rate, in [0, 1).",
      "`0.999`", "`0.95`"}));
  keys.push_back(Number("train.eps", 0.0, kAbove, TC_FIELD(train.eps),
      {"AdamW's epsilon.",
      "`1e-08`", "`1e-06`"}));
  keys.push_back(Number("train.weight_decay", 0.0, kAtLeast, TC_FIELD(train.weight_decay),
      {"AdamW's decoupled weight decay (>= 0), applied to every weight but norms and biases (as "
      "transformers' and nanoGPT's recipes do).",
      "`0.0`", "`0.1`"}));
  keys.push_back(Number("train.grad_clip", 0.0, kAtLeast, TC_FIELD(train.grad_clip),
      {"Clip the gradient to this global L2 norm (over every parameter on every rank, exact), as "
      "`torch.nn.utils.clip_grad_norm_`; `0` does not clip. With it (and with `fp16`) the worker "
      "stores each block's gradient and runs every update after the backward instead of inside it "
      "(docs/worker.md; its cost in docs/benchmarks.md); the metrics log each step's `grad_norm` "
      "before clipping.",
      "`0`", "`1.0`"}));
  keys.push_back(Number("train.initial_loss_scale", 0.0, kAbove, TC_FIELD(train.initial_loss_scale),
      {"`fp16`: the loss scale of the first step (> 0).",
      "`65536`", "`1024`"}));
  keys.push_back(Int("train.loss_scale_window", 1, kIntMax, TC_FIELD(train.loss_scale_window),
      {"`fp16`: steps without an overflow after which the scale doubles (as torch's `GradScaler`'s "
      "`growth_interval`).",
      "`2000`", "`1000`"}));
  keys.push_back(Int("train.eval_every", 0, kIntMax, TC_FIELD(train.eval_every),
      {"Every this many steps, and after the last, the validation loss: the mean loss over the "
      "validation windows, forward only, logged as `eval_loss` in that step's metrics and shown in "
      "the report. `0` never evaluates.",
      "`0`", "`100`"}));
  keys.push_back(FilePath("train.eval_data", TC_FIELD(train.eval_data),
      {"Validation corpus (same formats as `train.data`, relative to the job file). Empty: the last "
      "`train.eval_split` of `train.data`'s windows, which training then never samples.",
      "none", "`data/valid.bin`"}));
  keys.push_back(Number("train.eval_split", 0.0, kAbove, TC_FIELD(train.eval_split),
      {"The fraction of `train.data`'s windows held out for validation when `train.eval_data` is not"
      " set, in (0, 0.5]; at least one window.",
      "`0.05`", "`0.01`"}));
  keys.push_back(Int("train.eval_sequences", 1, kIntMax, TC_FIELD(train.eval_sequences),
      {"At most this many validation windows of `model.seq_len + 1` tokens, the same ones each time "
      "(the first of the held-out tail, or of `eval_data`).",
      "`64`", "`256`"}));
  keys.push_back(Uint("train.seed", 0, TC_FIELD(train.seed),
      {"Seed for initialisation and data order.",
      "`1`", "`42`"}));
  keys.push_back(Int("train.compute_threads", 0, kIntMax, TC_FIELD(train.compute_threads),
      {"Threads each rank computes on (libtorch's and OpenBLAS's); the worker's log says how many it"
      " took. `0`: the rank's share of its machine's cores (cores / ranks on that machine, at least"
      " one). On a machine without a GPU whose cache moves much data a step, one thread fewer than "
      "the share can be faster: the cache's copies and NVMe work need a core (docs/worker.md, "
      "\"Host memory and threads\").",
      "`0`", "`1`"}));
  keys.push_back(Choice<OptimizerOverlap>("train.optimizer_overlap", kOptimizerOverlaps,
      TC_FIELD(train.optimizer_overlap),
      {"Where each block's AdamW update runs: `on`, on the rank's optimizer lane, a thread of its "
      "own on the cores the compute leaves: the training thread hands the update over and goes on with the next block "
      "while it runs (at most one in flight; it waits for it before that block's access ends, before "
      "the next update and at the step's end), so the update overlaps the next block's backward, or "
      "with deferred updates (`train.grad_clip`, `fp16`) the preparation of the next update; `off`, "
      "on the training thread between the blocks; `auto`, `on` where the rank's compute leaves a "
      "core (on a GPU, or with fewer compute threads than the rank's share of the cores: "
      "`train.compute_threads`), else `off` (on a CPU whose cores the compute takes, the lane's "
      "AdamW would only slow it); the worker's log says which it chose. The results are bit for "
      "bit the same (docs/worker.md, \"The optimizer lane\"). The planner models the lane as hiding "
      "each update behind the backward, on the cores it has (docs/resource-model.md); the trace "
      "marks updates the lane ran (docs/trace-format.md).",
      "`auto`", "`off`"}));
  JobKey every = Key("train.checkpoint_every", "`auto` or " + IntType(0, kIntMax),
      {"Steps between checkpoints; `0`: none but the one a stop writes (`train.checkpoint_on_stop`); "
      "`auto`: the planner's choice for the plan's instance type (docs/launcher.md, \"Spot pricing\"): "
      "on spot nodes (`cluster.use_spot`) the Young/Daly interval sqrt(2 x checkpoint time x mean time "
      "between preemptions), or `0` where a stop's checkpoint fits in the cloud's preemption notice; "
      "`0` on-demand and on this machine. job.resolved.yaml carries the number and why."
      " A checkpoint holds every rank's fp32 masters and AdamW moments (those on NVMe included), "
      "the step, AdamW's step count and the fp16 loss scaler, with a manifest of sizes and CRC32Cs "
      "(docs/worker.md, \"Checkpoints\"). `tencache-launch JOB --resume [RUN_DIR]` and "
      "`tencache-worker --resume` continue from the newest complete one, bitwise.",
      "`0`", "`100`, `auto`"});
  every.read = [](JobReader& r, JobSpec* j) {
    return r.GetIntOrAuto("train.checkpoint_every", 0, kCheckpointEveryAuto, &j->train.checkpoint_every);
  };
  every.write = [](const JobSpec& j) {
    return j.train.checkpoint_every == kCheckpointEveryAuto ? std::string("auto") : IntText(j.train.checkpoint_every);
  };
  keys.push_back(every);
  keys.push_back(Flag("train.checkpoint_on_stop", TC_FIELD(train.checkpoint_on_stop),
      {"A stop asked by a signal (Ctrl-C, SIGTERM from Kubernetes or a spot reclaim, SIGUSR1) lets "
      "every rank finish its step and write a checkpoint, so that `--resume` continues from there; "
      "`false` writes none (the launcher then says the run cannot be resumed). The Kubernetes grace"
      " period and the launcher's stop grace include its write time.",
      "`true`", "`false`"}));
  keys.push_back(FilePath("train.checkpoint_dir", TC_FIELD(train.checkpoint_dir),
      {"Where checkpoints go (relative to the job file's folder), one folder that every rank sees; a"
      " symbolic link is refused. Not set: `tencache-launch` puts them in the run folder's "
      "`checkpoints/` (and `--resume RUN_DIR` reads and continues that run's).",
      "the run folder's `checkpoints/`", "`/ckpt/run1`"}));
  keys.push_back(Int("train.keep_checkpoints", 1, kIntMax, TC_FIELD(train.keep_checkpoints),
      {"The newest complete checkpoints kept; older ones are removed once a new one is complete.",
      "`2`", "`5`"}));
  // cluster
  keys.push_back(Choice<Target>("cluster.target", kTargets, TC_FIELD(cluster.target),
      {"Where `tencache-launch` runs the job: `local` (Open MPI on this machine), `hosts` (Open MPI "
      "over the machines in `cluster.hosts`, started through `cluster.rsh_agent`; docs/launcher.md)"
      " or `k8s` (a Kubeflow MPIJob).",
      "`local`", "`hosts`"}));
  keys.push_back(CountOrAuto("cluster.nodes", kMaxNodes, TC_FIELD(cluster.nodes),
      {"Nodes to run on, or `auto`: the planner tries `1..max_nodes` and keeps the best. "
      "`cluster.target: local` runs on this one machine (1).",
      "`auto`", "`4`"}));
  keys.push_back(CountOrAuto("cluster.ranks_per_node", kIntMax, TC_FIELD(cluster.ranks_per_node),
      {"MPI ranks per node, or `auto`: one per GPU; on a machine without a GPU (the device tier "
      "simulated in host memory), the most ranks, at most its cores, that divide `global_batch / "
      "micro_batch`. On a catalog instance it must equal its GPUs.",
      "`auto`", "`2`"}));
  keys.push_back(Int("cluster.max_nodes", 1, kMaxNodes, TC_FIELD(cluster.max_nodes),
      {"Largest node count the planner considers for each instance type (it tries 1..max_nodes).",
      "`1`", "`4`"}));
  keys.push_back(NameList("cluster.instance_types", TC_FIELD(cluster.instance_types),
      {"Candidate instance types from the catalog.",
      "the whole catalog", "`[p4d.24xlarge, g5.12xlarge]`"}));
  keys.push_back(Choice<Objective>("cluster.objective", kObjectives, TC_FIELD(cluster.objective),
      {"`cost` picks the lowest cost per epoch, `time` the shortest epoch.",
      "`cost`", "`time`"}));
  keys.push_back(Flag("cluster.use_spot", TC_FIELD(cluster.use_spot),
      {"Run on spot nodes: the plan's cost and time per epoch are the expected ones on spot, "
      "preemptions included (work lost since the last checkpoint, checkpoints, restarts: "
      "docs/launcher.md, \"Spot pricing\"), and the objective ranks by them. The plan shows on-demand "
      "and spot side by side either way. Instance types without a spot price (`price.spot`) or an "
      "interruption rate (the catalog's `spot_interruption`, else `cluster.spot_interruption_rate`) "
      "become infeasible, saying which is missing; `plan` refuses `true` up front (exit 2) when no "
      "candidate has a spot price.",
      "`false`", "`true`"}));
  keys.push_back(Key("cluster.spot_interruption_rate", "number >= 0 and < 1",
      {"The share of spot nodes preempted in a month (AWS Spot Advisor's \"frequency of "
      "interruption\", Azure's eviction rate), used for instance types whose catalog entry has "
      "none (`spot_interruption`); printed in the plan as an assumption. `0`: the catalog's only.",
      "`0`", "`0.1`"}));
  keys.back().read = [](JobReader& r, JobSpec* j) {
    return r.GetDoubleBelow("cluster.spot_interruption_rate", 0.0, false, 1.0, &j->cluster.spot_interruption_rate);
  };
  keys.back().write = [](const JobSpec& j) { return NumberText(j.cluster.spot_interruption_rate); };
  keys.push_back(Number("cluster.spot_restart_s", 0.0, kAtLeast, TC_FIELD(cluster.spot_restart_s),
      {"Seconds from a preemption until the job runs again on a replacement node (provisioning, "
      "image pull, the ranks' start), beyond `cluster.restart_backoff_s` and the checkpoint's read: "
      "the spot cost's restart time. Printed in the plan as an assumption unless set.",
      "`300`", "`120`"}));
  keys.push_back(Number("cluster.max_price_per_hour", 0.0, kAtLeast, TC_FIELD(cluster.max_price_per_hour),
      {"Cap in USD per hour for all nodes together; `0` means no cap.",
      "`0`", "`60`"}));
  keys.push_back(Int("cluster.max_restarts", 0, 100, TC_FIELD(cluster.max_restarts),
      {"Managed recovery: when a rank dies, a host or pod is lost or the ranks are stopped by a "
      "signal the launcher did not send, the launcher starts the job again from the newest complete "
      "checkpoint (from scratch where there is none), up to this many times; a run that fails the "
      "same way twice in a row (the same rank, cause and step) stops with that cause. On `k8s` it "
      "deletes the MPIJob and applies it again with the ranks resuming, and needs "
      "`cluster.checkpoint_claim`. Every attempt is in run.json and the report (docs/launcher.md, "
      "\"Managed recovery\"). `--max-restarts N` sets it.",
      "`0`", "`3`"}));
  keys.push_back(Number("cluster.restart_backoff_s", 0.0, kAtLeast, TC_FIELD(cluster.restart_backoff_s),
      {"Seconds before the first restart (`cluster.max_restarts`); each further restart waits twice "
      "as long as the one before. A SIGINT / SIGTERM while waiting ends the run.",
      "`10`", "`0`"}));
  keys.push_back(Text("cluster.catalog", TC_FIELD(cluster.catalog),
      {"Instance catalog: a folder of `*.yaml` or one file (relative to the job file).",
      "the shipped `configs/instances`", "`my-catalog/`"}));
  keys.push_back(VolumeSize(
      {"Storage per node to assume on instance types without local NVMe (an EBS or persistent-disk "
      "volume). Without it such instances have no NVMe tier.",
      "none", "`2TiB`"}));
  keys.push_back(Number("cluster.volume.read_gbps", 0.0, kAbove, TC_FIELD(cluster.volume.read_gbps),
      {"That volume's read bandwidth, GB/s.",
      "`1.0`", "`2.0`"}));
  keys.push_back(Number("cluster.volume.write_gbps", 0.0, kAbove, TC_FIELD(cluster.volume.write_gbps),
      {"That volume's write bandwidth, GB/s.",
      "`1.0`", "`2.0`"}));
  keys.push_back(Text("cluster.image", TC_FIELD(cluster.k8s.image),
      {"The worker image for `cluster.target: k8s` (built from k8s/Dockerfile); required by `render`"
      " and a Kubernetes run. Checked when the job is read against the image reference grammar: "
      "`[REGISTRY[:PORT]/]PATH[:TAG][@sha256:DIGEST]`, path components of lower-case letters and "
      "digits joined by `.`, `_`, `__` or `-`, a tag of at most 128 letters, digits, `_`, `.`, `-`,"
      " a digest of 64 hex digits; anything else (a space, upper case in the path) exits 2 naming "
      "what is wrong.",
      "none", "`ghcr.io/acme/tencache-worker:0.1.0`"}));
  keys.push_back(Text("cluster.namespace", TC_FIELD(cluster.k8s.namespace_),
      {"Namespace of the ConfigMap and MPIJob.",
      "`tencache`", "`ml-jobs`"}));
  keys.push_back(Choice<NvmeVolume>("cluster.nvme_volume", kNvmeVolumes, TC_FIELD(cluster.k8s.nvme_volume),
      {"The worker pods' NVMe tier: `local-pv` (a generic ephemeral claim on local PersistentVolumes"
      " of the nodes' NVMe through `nvme_storage_class`), `ephemeral` (the same claim from any "
      "StorageClass, e.g. a cloud block volume), or `host-path` (a directory of the node, "
      "`nvme_host_path`). docs/kubernetes.md.",
      "`local-pv`", "`host-path`"}));
  keys.push_back(Text("cluster.nvme_storage_class", TC_FIELD(cluster.k8s.nvme_storage_class),
      {"StorageClass of the NVMe claim (`local-pv`, `ephemeral`; empty with `ephemeral`: the "
      "cluster's default).",
      "`tencache-local-nvme`", "`gp3`"}));
  keys.push_back(Text("cluster.nvme_host_path", TC_FIELD(cluster.k8s.nvme_host_path),
      {"The node directory for `host-path`.",
      "`/mnt/nvme/tencache`", "`/local/tencache`"}));
  keys.push_back(Text("cluster.checkpoint_claim", TC_FIELD(cluster.k8s.checkpoint_claim),
      {"A ReadWriteMany PersistentVolumeClaim mounted for `train.checkpoint_dir`; without it "
      "checkpoints go to an emptyDir and end with the pod, so `cluster.max_restarts` above 0 and "
      "`--resume` need it on `k8s`.",
      "none", "`tencache-checkpoints`"}));
  keys.push_back(Text("cluster.data_claim", TC_FIELD(cluster.k8s.data_claim),
      {"A PersistentVolumeClaim holding `train.data`, mounted read-only at its folder.",
      "none", "`datasets`"}));
  keys.push_back(Choice<GangScheduler>("cluster.gang_scheduler", kGangSchedulers, TC_FIELD(cluster.k8s.gang_scheduler),
      {"How the MPIJob is scheduled as one unit (docs/kubernetes.md, \"Gang scheduling\"): `none`, "
      "`kueue` (the MPIJob carries the label `kueue.x-k8s.io/queue-name: QUEUE` and is created "
      "suspended; Kueue admits it whole), `volcano` or `scheduler-plugins` (a PodGroup of the "
      "workers through `runPolicy.schedulingPolicy`; the MPI Operator must run with "
      "`--gang-scheduling`).",
      "`kueue` when `cluster.queue` is set, else `none`", "`volcano`"}));
  keys.push_back(Text("cluster.queue", TC_FIELD(cluster.k8s.queue),
      {"With `kueue`: the LocalQueue of the job's namespace (required); with `volcano`: the Volcano "
      "queue (`schedulingPolicy.queue`). Refused with `none` or `scheduler-plugins`. An RFC 1123 "
      "label.",
      "none", "`team-a`"}));
  keys.push_back(Text("cluster.priority_class", TC_FIELD(cluster.k8s.priority_class),
      {"A PriorityClass for the launcher and worker pods (`priorityClassName`) and, with `volcano`, "
      "the PodGroup (`schedulingPolicy.priorityClass`). An RFC 1123 label.",
      "none", "`training-high`"}));
  keys.push_back(Number("cluster.checkpoint_write_gbps", 0.0, kAbove, TC_FIELD(cluster.k8s.checkpoint_write_gbps),
      {"Write bandwidth, GB/s per node, of the checkpoint volume (`cluster.checkpoint_claim` or the "
      "node's disk): with the plan's checkpoint bytes it sets the pods' "
      "`terminationGracePeriodSeconds` (docs/kubernetes.md, \"Stopping\").",
      "`1.0`", "`4.0`"}));
  keys.push_back(Hosts(
      {"`cluster.target: hosts`: the machines, `HOST` or `HOST:SLOTS` (ranks on it; 1 when left "
      "out), in rank order; every host has the same slots. They fix `cluster.nodes` and "
      "`cluster.ranks_per_node` (set those to `auto` or to the same values). Each machine must have"
      " the worker and `train.data` at the same paths as this one.",
      "none", "`[node1:2, node2:2]`"}));
  keys.push_back(Hostfile(
      {"Instead of `cluster.hosts`: an Open MPI hostfile (`HOST slots=N` a line, `#` comments; "
      "relative to the job file).",
      "none", "`hosts.txt`"}));
  keys.push_back(HostsText("cluster.rsh_agent", TC_FIELD(cluster.hosts.rsh_agent),
      {"`cluster.target: hosts`: the program mpirun starts its daemons with (Open MPI's "
      "`plm_rsh_agent`), called as `AGENT HOST COMMAND`.",
      "`ssh`", "`ssh -p 2222`"}));
  keys.push_back(HostsText("cluster.network_interface", TC_FIELD(cluster.hosts.network_interface),
      {"`cluster.target: hosts`: the network interface MPI's TCP traffic (and its out-of-band "
      "channel) uses on every host; empty: Open MPI picks.",
      "none", "`eth0`"}));
  keys.push_back(HostsText("cluster.instance_type", TC_FIELD(cluster.hosts.instance_type),
      {"`cluster.target: hosts`: the catalog instance type every host is. The plan then takes each "
      "host's GPU, memory, NVMe, network and price from the catalog (cost per epoch included) and "
      "nothing is probed; each host's slots must equal the type's GPUs. Empty: the hosts are "
      "measured by a probe across them.",
      "none", "`p4d.24xlarge`"}));
  // cache
  keys.push_back(Choice<CachePolicy>("cache.policy", kCachePolicies, TC_FIELD(cache.policy),
      {"`tencache` (profiled order, next-use eviction, bandwidth-aware prefetch), `zero-infinity`, "
      "`10cache-window`, `lru` (baselines), or `none` (everything in ordinary memory: the reference"
      " run).",
      "`tencache`", "`none`"}));
  keys.push_back(Budget("cache.device_budget", kPositive, TC_FIELD(cache.device_budget),
      {"GPU memory for cached model states, per rank.",
      "`auto`", "`20GiB`"}));
  keys.push_back(Budget("cache.host_budget", kPositive, TC_FIELD(cache.host_budget),
      {"Pinned host memory for cached states, per rank.",
      "`auto`", "`64GiB`"}));
  keys.push_back(Budget("cache.nvme_budget", kZeroAllowed, TC_FIELD(cache.nvme_budget),
      {"NVMe space for states, per rank. The worker enforces it: extents are taken as shards are "
      "first written to NVMe, and a write beyond the budget stops the run with an error naming this"
      " key. `0`: no NVMe file (the host budget must hold every shard).",
      "`auto`", "`1TB`, `0`"}));
  keys.push_back(Text("cache.nvme_path", TC_FIELD(cache.nvme_path),
      {"Folder for the NVMe tier's files: each run gets `<job name>-<rank 0's PID>/rank-N/` inside "
      "it (0700, swap file 0600), removed when the run ends (by tencache-launch, on this machine, "
      "when ranks were killed); the folder itself, when the run made it, once it is empty. A "
      "symlink here is refused.",
      "`/tmp/tencache-nvme`", "`/mnt/nvme0/tencache`"}));
  keys.push_back(Flag("cache.prefetch", TC_FIELD(cache.prefetch),
      {"With `tencache`: issue the plan's fetches ahead of use. `false` keeps next-use eviction but "
      "fetches each shard when it is needed (an ablation).",
      "`true`", "`false`"}));
  return keys;
}

#undef TC_FIELD

}  // namespace

const std::vector<JobKey>& JobKeys() {
  static const std::vector<JobKey> keys = MakeJobKeys();
  return keys;
}

const JobKey* FindJobKey(const std::string& path) {
  for (const JobKey& k : JobKeys()) {
    if (k.path == path) return &k;
  }
  return nullptr;
}

}  // namespace tencache
