#include "launcher/k8s_render.h"

#include <yaml-cpp/yaml.h>

#include <atomic>
#include <cctype>
#include <chrono>
#include <cmath>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "common/byte_size.h"
#include "launcher/k8s_fabric.h"
#include "launcher/k8s_objects.h"
#include "launcher/k8s_pod_sizing.h"

namespace tencache {
namespace {

using json = nlohmann::ordered_json;

constexpr size_t kMaxName = 50;  // the operator appends "-launcher", "-worker-N" and service names

bool IsLabel(const std::string& s) {
  if (s.empty() || s.size() > 63) return false;
  for (char c : s) {
    if (!(std::islower(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c)) || c == '-')) {
      return false;
    }
  }
  return std::isalnum(static_cast<unsigned char>(s.front())) && std::isalnum(static_cast<unsigned char>(s.back()));
}

std::string Quantity(uint64_t bytes) { return QuantityUp(bytes); }

// A member whose key starts with '#' is a comment: Emit writes it as a key,
// WithComments turns that line into comment lines at its indentation.
constexpr char kCommentPrefix = '#';

// Comment lines of `text`, wrapped at about 100 columns, indented by `indent`.
std::string CommentLines(const std::string& indent, const std::string& text) {
  std::string out, line;
  size_t start = 0;
  while (start < text.size()) {
    size_t space = text.find(' ', start);
    if (space == std::string::npos) space = text.size();
    const std::string word = text.substr(start, space - start);
    if (!line.empty() && indent.size() + line.size() + word.size() > 100) {
      out += indent + "# " + line + "\n";
      line.clear();
    }
    line += (line.empty() ? "" : " ") + word;
    start = space + 1;
  }
  if (!line.empty()) out += indent + "# " + line + "\n";
  return out;
}

// The emitted YAML with every comment member (`"#key": "text"`) as comment lines.
std::string WithComments(const std::string& yaml) {
  std::string out;
  for (const std::string& line : k8s::SplitLines(yaml)) {
    const size_t indent = line.find_first_not_of(' ');
    const size_t colon = line.find(": \"");
    const bool quoted_key = indent != std::string::npos && indent + 2 < line.size() &&
                            (line[indent] == '"' || line[indent] == '\'') && line[indent + 1] == kCommentPrefix;
    if (!quoted_key || colon == std::string::npos || line.back() != '"') {
      out += line + "\n";
      continue;
    }
    std::string text = line.substr(colon + 3, line.size() - colon - 4);
    for (size_t at; (at = text.find("\\\"")) != std::string::npos;) text.replace(at, 2, "\"");
    out += CommentLines(line.substr(0, indent), text);
  }
  return out;
}

void Emit(YAML::Emitter& out, const json& j) {
  if (j.is_object()) {
    out << YAML::BeginMap;
    for (auto it = j.begin(); it != j.end(); ++it) {
      out << YAML::Key << it.key() << YAML::Value;
      Emit(out, it.value());
    }
    out << YAML::EndMap;
  } else if (j.is_array()) {
    out << YAML::BeginSeq;
    for (const json& e : j) Emit(out, e);
    out << YAML::EndSeq;
  } else if (j.is_string()) {
    const std::string s = j.get<std::string>();
    if (s.find('\n') != std::string::npos) out << YAML::Literal << s;
    else out << YAML::DoubleQuoted << s;
  } else if (j.is_boolean()) {
    out << j.get<bool>();
  } else if (j.is_number_integer() || j.is_number_unsigned()) {
    out << j.get<int64_t>();
  } else if (j.is_number()) {
    out << j.get<double>();
  } else {
    out << YAML::Null;
  }
}

json Labels(const std::string& name, const std::string& job, const std::string& component) {
  return {{"app.kubernetes.io/name", "tencache"},
          {"app.kubernetes.io/instance", name},
          {"app.kubernetes.io/component", component},
          {"tencache.dev/job", job}};
}

json ContainerSecurity() {
  return {{"allowPrivilegeEscalation", false},
          {"runAsNonRoot", true},
          {"capabilities", {{"drop", json::array({"ALL"})}}}};
}

json PodSecurity() {
  return {{"runAsUser", kK8sUser}, {"runAsGroup", kK8sUser}, {"runAsNonRoot", true}, {"fsGroup", kK8sUser},
          {"seccompProfile", {{"type", "RuntimeDefault"}}}};
}

// The least claim for a volume the user named although the plan puts nothing on NVMe.
constexpr uint64_t kLeastNvmeClaim = 1ull << 30;

// The NVMe tier's volume for one worker node: what cluster.nvme_volume names,
// sized to the node's NVMe budget + 5 %. With no NVMe budget, a 64 MiB emptyDir
// unless the job named cluster.nvme_volume, which is then honoured at 1 GiB.
json NvmeVolumeFor(const JobSpec& job, uint64_t budget_per_rank, int per_node) {
  const KubernetesSpec& k = job.cluster.k8s;
  const bool named = job.locations.count("cluster.nvme_volume") > 0;
  const uint64_t need = uint64_t(std::ceil(double(budget_per_rank) * per_node * 1.05));
  const std::string kind = NvmeVolumeName(k.nvme_volume);
  std::string why = "nvme: cluster.nvme_volume " + kind + (named ? "" : " (the default)") + "; ";
  if (need == 0 && !named) {
    return {{"name", "nvme"},
            {"#why", why + "the plan puts nothing on NVMe (cache.nvme_budget 0), so no claim is made: a 64Mi "
                           "emptyDir holds the tier's empty folder. Name cluster.nvme_volume to get that volume anyway"},
            {"emptyDir", {{"sizeLimit", "64Mi"}}}};
  }
  if (k.nvme_volume == NvmeVolume::kHostPath) {
    return {{"name", "nvme"},
            {"#why", why + "the node folder " + k.nvme_host_path + " must hold " + QuantityUp(need) +
                         " (the node's ranks' NVMe budgets + 5 %)"},
            {"hostPath", {{"path", k.nvme_host_path}, {"type", "DirectoryOrCreate"}}}};
  }
  const uint64_t size = std::max(need, need == 0 ? kLeastNvmeClaim : uint64_t(0));
  why += need == 0 ? "the plan puts nothing on NVMe (cache.nvme_budget 0), but the job names this volume: the "
                     "claim asks for 1Gi, a size any volume offers"
                   : "sized to the node's " + std::to_string(per_node) + " ranks' NVMe budgets (" +
                         QuantityUp(budget_per_rank) + " each) + 5 %";
  json spec = {{"accessModes", json::array({"ReadWriteOnce"})},
               {"resources", {{"requests", {{"storage", Quantity(size)}}}}}};
  if (!k.nvme_storage_class.empty()) spec["storageClassName"] = k.nvme_storage_class;
  return {{"name", "nvme"},
          {"#why", why},
          {"ephemeral", {{"volumeClaimTemplate", {{"metadata", {{"labels", {{"app.kubernetes.io/name", "tencache"}}}}},
                                                  {"spec", spec}}}}}};
}

// The pods' memory-locking needs, for the worker container.
std::string MemlockComment(uint64_t host_budget, int per_node, const FabricRequest& fabric) {
  return "memlock: the host tier page-locks cache.host_budget per rank (" + QuantityUp(host_budget) + " x " +
         std::to_string(per_node) + " = " + QuantityUp(host_budget * uint64_t(per_node)) +
         " per pod) with mlock, bounded by RLIMIT_MEMLOCK, which the container runtime sets (containerd: "
         "LimitMEMLOCK=infinity in its systemd unit on the GPU nodes)" +
         (fabric.resources.empty() ? std::string() : "; RDMA memory registration for the fabric needs the same") +
         ". No IPC_LOCK capability is added: a non-root process gets none from capabilities.add. Where the limit "
         "is lower the worker reports it";
}

// cluster.gang_scheduler on the MPIJob (MPI Operator v2beta1): Kueue's queue
// label with the job created suspended, Kueue admitting it whole; or a
// PodGroup through runPolicy.schedulingPolicy whose minAvailable is the
// workers (the launcher is created only once they are Ready, so a group that
// counted it could never be complete); and cluster.priority_class on both pod
// templates.
void GangScheduling(const JobSpec& job, json* mpijob) {
  const KubernetesSpec& k = job.cluster.k8s;
  json& spec = (*mpijob)["spec"];
  if (!k.priority_class.empty()) {
    for (const char* role : {"Launcher", "Worker"}) {
      spec["mpiReplicaSpecs"][role]["template"]["spec"]["priorityClassName"] = k.priority_class;
    }
  }
  json& run = spec["runPolicy"];
  switch (k.gang_scheduler) {
    case GangScheduler::kNone:
      return;
    case GangScheduler::kKueue:
      (*mpijob)["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = k.queue;
      run["#gang"] = "gang: Kueue admits the whole MPIJob from the LocalQueue " + k.queue +
                     " when its quota allows, then unsuspends it; until then no pod exists";
      run["suspend"] = true;
      return;
    case GangScheduler::kVolcano:
    case GangScheduler::kSchedulerPlugins: {
      const bool volcano = k.gang_scheduler == GangScheduler::kVolcano;
      json policy = {{"minAvailable", job.cluster.nodes}};
      if (!k.queue.empty()) policy["queue"] = k.queue;
      if (!k.priority_class.empty()) policy["priorityClass"] = k.priority_class;
      run["#gang"] = std::string("gang: the MPI Operator (started with --gang-scheduling=") +
                     (volcano ? "volcano" : "scheduler-plugins-scheduler") + ") makes a PodGroup whose " +
                     std::to_string(job.cluster.nodes) + " workers are placed all or none. minAvailable counts "
                     "the workers only: the launcher is created once they are Ready (WaitForWorkersReady), so a "
                     "group that waited for it (the operator's default, workers + 1) would never start";
      run["schedulingPolicy"] = policy;
      return;
    }
  }
}

// The job file inside the ConfigMap: the containers' paths.
std::string ContainerJobText(const ResolvedJob& resolved, const std::string& name) {
  ResolvedJob r = resolved;
  r.job.cache.nvme_path = kK8sNvmeDir;
  r.job.train.checkpoint_dir = std::string(kK8sCheckpointDir) + "/" + r.job.name;
  r.why["cache.nvme_path"] = "the worker pod's NVMe volume (cluster.nvme_volume)";
  r.why["train.checkpoint_dir"] = "the worker pod's checkpoint volume (cluster.checkpoint_claim)";
  return RenderResolvedJob(r, {"tencache-launch render: the job as the MPIJob " + name + " executes it.",
                               "Every auto is resolved by the plan; workers read this file and nothing else."});
}

}  // namespace

StatusOr<std::string> SubmissionName(const std::string& job_name, const std::string& suffix) {
  std::string base = job_name.substr(0, kMaxName - std::min(kMaxName - 1, suffix.size() + 1));
  while (!base.empty() && base.back() == '-') base.pop_back();
  const std::string name = base + "-" + suffix;
  if (!IsLabel(name)) {
    return Status::InvalidArgument("'" + name + "' is not a valid Kubernetes name (RFC 1123: lower-case letters, "
                                   "digits and '-', starting and ending with a letter or digit, at most 63)");
  }
  return name;
}

std::string SubmissionSuffix() {
  static std::atomic<int> counter{0};
  uint64_t v = uint64_t(std::chrono::duration_cast<std::chrono::seconds>(
                            std::chrono::system_clock::now().time_since_epoch()).count()) * 36 + (counter++ % 36);
  std::string s;
  const char* digits = "0123456789abcdefghijklmnopqrstuvwxyz";
  for (; v > 0; v /= 36) s.insert(s.begin(), digits[v % 36]);
  return s.substr(s.size() > 7 ? s.size() - 7 : 0);
}

StatusOr<RenderedJob> RenderK8sJob(const ResolvedJob& resolved, const Candidate& chosen, const std::string& name,
                                   bool resume) {
  const JobSpec& job = resolved.job;
  const KubernetesSpec& k = job.cluster.k8s;
  if (k.image.empty()) {
    return Status::InvalidArgument(job.Where("cluster.image") + ": the worker image to run is not set; build "
                                   "k8s/Dockerfile, push it, and set cluster.image (docs/kubernetes.md)");
  }
  if (!IsLabel(k.namespace_)) {
    return Status::InvalidArgument(job.Where("cluster.namespace") + ": '" + k.namespace_ +
                                   "' is not a valid namespace (RFC 1123 label)");
  }
  for (const auto& [key, claim] : {std::pair{"cluster.checkpoint_claim", k.checkpoint_claim},
                                   std::pair{"cluster.data_claim", k.data_claim}}) {
    if (!claim.empty() && !IsLabel(claim)) {
      return Status::InvalidArgument(job.Where(key) + ": '" + claim + "' is not a valid claim name (RFC 1123)");
    }
  }
  if (!IsLabel(name)) return Status::InvalidArgument("'" + name + "' is not a valid Kubernetes name (RFC 1123)");
  const InstanceSpec& inst = *chosen.instance;
  const int per_node = job.cluster.ranks_per_node, ranks = job.ranks();
  RenderedJob r;
  r.name = name;
  r.namespace_ = k.namespace_;
  // Rank 0 saves the trained weights on its pod's checkpoint volume, beside
  // the checkpoints (kept when cluster.checkpoint_claim names a claim).
  r.launcher_command = {"mpirun", "--tag-output", "-n", std::to_string(ranks), kK8sWorkerBinary,
                        "--job", kK8sJobFile, "--report-lines", "--sample", "0",
                        "--save-weights", K8sWeightsDir(job.name)};
  if (resume) r.launcher_command.push_back("--resume");

  const std::string config = name + "-job";
  json configmap = {{"apiVersion", "v1"},
                    {"kind", "ConfigMap"},
                    {"metadata", {{"name", config}, {"namespace", k.namespace_}, {"labels", Labels(name, job.name, "job")}}},
                    {"data", {{"job.resolved.yaml", ContainerJobText(resolved, name)}}}};

  // Per worker node: CPU and memory that fit the node (launcher/k8s_pod_sizing.h),
  // the fabric's devices, and a grace period for the SIGTERM checkpoint.
  const uint64_t host = *job.cache.host_budget, nvme = *job.cache.nvme_budget;
  const uint64_t shm = uint64_t(per_node + 1) * kGiB;  // NCCL's shared-memory transport
  const WorkerResources sized = SizeWorker(inst, per_node, host, shm);
  const GracePeriod grace = TerminationGrace(job, chosen);
  const FabricRequest fabric = FabricFor(inst, job.cluster.nodes);
  for (const std::string* w : {&sized.warning, &grace.warning}) {
    if (!w->empty()) r.warnings.push_back(*w);
  }
  json volume_mounts = json::array({{{"name", "job"}, {"mountPath", kK8sJobDir}, {"readOnly", true}},
                                    {{"name", "nvme"}, {"mountPath", kK8sNvmeDir}},
                                    {{"name", "checkpoints"}, {"mountPath", kK8sCheckpointDir}},
                                    {{"name", "dshm"}, {"mountPath", "/dev/shm"}}});
  json volumes = json::array({{{"name", "job"}, {"configMap", {{"name", config}}}},
                              NvmeVolumeFor(job, nvme, per_node),
                              k.checkpoint_claim.empty()
                                  ? json{{"name", "checkpoints"}, {"emptyDir", json::object()}}
                                  : json{{"name", "checkpoints"},
                                         {"persistentVolumeClaim", {{"claimName", k.checkpoint_claim}}}},
                              {{"name", "dshm"},
                               {"emptyDir", {{"medium", "Memory"}, {"sizeLimit", Quantity(shm)}}}}});
  if (!k.data_claim.empty()) {
    const std::string dir = std::filesystem::path(job.train.data).parent_path().string();
    volumes.push_back({{"name", "data"}, {"persistentVolumeClaim", {{"claimName", k.data_claim}, {"readOnly", true}}}});
    volume_mounts.push_back({{"name", "data"}, {"mountPath", dir}, {"readOnly", true}});
  }
  json worker_resources = {{"requests", {{"cpu", std::to_string(sized.milli_cpu) + "m"},
                                         {"memory", QuantityUp(sized.memory_request)}}},
                           {"limits", {{"memory", QuantityDown(sized.memory_limit)}}}};
  if (inst.gpu_count > 0) {
    worker_resources["requests"]["nvidia.com/gpu"] = std::to_string(inst.gpu_count);
    worker_resources["limits"]["nvidia.com/gpu"] = std::to_string(inst.gpu_count);
  }
  for (const auto& [resource, count] : fabric.resources) {
    worker_resources["requests"][resource] = std::to_string(count);
    worker_resources["limits"][resource] = std::to_string(count);
  }
  json worker_env = json::array();
  for (const auto& [var, value] : fabric.env) worker_env.push_back({{"name", var}, {"value", value}});
  json worker_container = {{"name", "worker"},
                           {"image", k.image},
                           {"command", json::array({"/usr/sbin/sshd", "-De", "-f", "/home/mpiuser/.sshd_config"})},
                           // WaitForWorkersReady then waits for sshd, not just a started container.
                           {"readinessProbe", {{"tcpSocket", {{"port", 2222}}}, {"periodSeconds", 2}}},
                           {"#memlock", MemlockComment(host, per_node, fabric)},
                           {"securityContext", ContainerSecurity()},
                           {"#resources", sized.comment},
                           {"resources", worker_resources},
                           {"#fabric", fabric.comment}};
  if (!worker_env.empty()) worker_container["env"] = worker_env;
  worker_container["volumeMounts"] = volume_mounts;
  json worker_pod = {{"serviceAccountName", "tencache"},
                     {"automountServiceAccountToken", false},
                     {"securityContext", PodSecurity()},
                     {"#grace", grace.comment},
                     {"terminationGracePeriodSeconds", grace.seconds},
                     {"nodeSelector", {{"node.kubernetes.io/instance-type", inst.type}}},
                     {"tolerations", json::array({{{"key", "nvidia.com/gpu"}, {"operator", "Exists"}, {"effect", "NoSchedule"}}})},
                     {"containers", json::array({worker_container})},
                     {"volumes", volumes}};
  json worker = {
      {"replicas", job.cluster.nodes},
      {"template", {{"metadata", {{"labels", Labels(name, job.name, "worker")}}}, {"spec", worker_pod}}}};
  json launcher = {
      {"replicas", 1},
      {"template",
       {{"metadata", {{"labels", Labels(name, job.name, "launcher")}}},
        {"spec",
         {{"serviceAccountName", "tencache"},
          {"automountServiceAccountToken", false},
          {"securityContext", PodSecurity()},
          // mpirun forwards SIGTERM to the ranks: it lives as long as they may.
          {"terminationGracePeriodSeconds", grace.seconds},
          {"containers",
           json::array({{{"name", "launcher"},
                         {"image", k.image},
                         {"command", r.launcher_command},
                         {"securityContext", ContainerSecurity()},
                         {"resources", {{"requests", {{"cpu", "500m"}, {"memory", "512Mi"}}},
                                        {"limits", {{"memory", "1Gi"}}}}},
                         {"volumeMounts", json::array({{{"name", "job"}, {"mountPath", kK8sJobDir}, {"readOnly", true}}})}}})},
          {"volumes", json::array({{{"name", "job"}, {"configMap", {{"name", config}}}}})}}}}}};
  json mpijob = {{"apiVersion", "kubeflow.org/v2beta1"},
                 {"kind", "MPIJob"},
                 {"metadata", {{"name", name}, {"namespace", k.namespace_}, {"labels", Labels(name, job.name, "mpijob")}}},
                 {"spec",
                  {{"slotsPerWorker", per_node},
                   {"mpiImplementation", "OpenMPI"},
                   {"launcherCreationPolicy", "WaitForWorkersReady"},
                   {"sshAuthMountPath", "/home/mpiuser/.ssh"},
                   {"runPolicy", {{"cleanPodPolicy", "Running"}, {"backoffLimit", 0}, {"ttlSecondsAfterFinished", 86400}}},
                   {"mpiReplicaSpecs", {{"Launcher", launcher}, {"Worker", worker}}}}}};
  GangScheduling(job, &mpijob);
  std::string text;
  for (const json* doc : {&configmap, &mpijob}) {
    YAML::Emitter out;
    Emit(out, *doc);
    text += "---\n" + WithComments(out.c_str());
  }
  r.yaml = text;
  return r;
}

}  // namespace tencache
