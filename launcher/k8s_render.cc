#include "launcher/k8s_render.h"

#include <yaml-cpp/yaml.h>

#include <atomic>
#include <cctype>
#include <chrono>
#include <cmath>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "common/byte_size.h"

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

// Kubernetes quantity in whole Mi or Gi.
std::string Quantity(uint64_t bytes) {
  if (bytes >= kGiB) return std::to_string((bytes + kGiB - 1) / kGiB) + "Gi";
  return std::to_string(std::max<uint64_t>(1, (bytes + kMiB - 1) / kMiB)) + "Mi";
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

// The NVMe tier's volume for one worker node.
json NvmeVolumeFor(const KubernetesSpec& k, uint64_t bytes_per_node) {
  if (bytes_per_node == 0) return {{"name", "nvme"}, {"emptyDir", {{"sizeLimit", "64Mi"}}}};  // no NVMe file
  if (k.nvme_volume == NvmeVolume::kHostPath) {
    return {{"name", "nvme"}, {"hostPath", {{"path", k.nvme_host_path}, {"type", "DirectoryOrCreate"}}}};
  }
  json spec = {{"accessModes", json::array({"ReadWriteOnce"})},
               {"resources", {{"requests", {{"storage", Quantity(bytes_per_node)}}}}}};
  if (!k.nvme_storage_class.empty()) spec["storageClassName"] = k.nvme_storage_class;
  return {{"name", "nvme"},
          {"ephemeral", {{"volumeClaimTemplate", {{"metadata", {{"labels", {{"app.kubernetes.io/name", "tencache"}}}}},
                                                  {"spec", spec}}}}}};
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

StatusOr<RenderedJob> RenderK8sJob(const ResolvedJob& resolved, const Candidate& chosen, const std::string& name) {
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

  const std::string config = name + "-job";
  json configmap = {{"apiVersion", "v1"},
                    {"kind", "ConfigMap"},
                    {"metadata", {{"name", config}, {"namespace", k.namespace_}, {"labels", Labels(name, job.name, "job")}}},
                    {"data", {{"job.resolved.yaml", ContainerJobText(resolved, name)}}}};

  // Per worker node: its ranks' host budgets plus what each process needs
  // beside them (the framework, activations on the host), within the instance.
  const uint64_t host = *job.cache.host_budget, nvme = *job.cache.nvme_budget;
  const uint64_t ram = uint64_t(inst.ram_gib * double(kGiB));
  const uint64_t memory = std::min<uint64_t>(uint64_t(per_node) * (host + 2 * kGiB), ram * 9 / 10);
  const int cpus = std::max(1, inst.vcpus - 2);
  json volume_mounts = json::array({{{"name", "job"}, {"mountPath", kK8sJobDir}, {"readOnly", true}},
                                    {{"name", "nvme"}, {"mountPath", kK8sNvmeDir}},
                                    {{"name", "checkpoints"}, {"mountPath", kK8sCheckpointDir}},
                                    {{"name", "dshm"}, {"mountPath", "/dev/shm"}}});
  json volumes = json::array({{{"name", "job"}, {"configMap", {{"name", config}}}},
                              NvmeVolumeFor(k, uint64_t(std::ceil(double(nvme) * per_node * 1.05))),
                              k.checkpoint_claim.empty()
                                  ? json{{"name", "checkpoints"}, {"emptyDir", json::object()}}
                                  : json{{"name", "checkpoints"},
                                         {"persistentVolumeClaim", {{"claimName", k.checkpoint_claim}}}},
                              {{"name", "dshm"},
                               {"emptyDir", {{"medium", "Memory"}, {"sizeLimit", Quantity(uint64_t(per_node + 1) * kGiB)}}}}});
  if (!k.data_claim.empty()) {
    const std::string dir = std::filesystem::path(job.train.data).parent_path().string();
    volumes.push_back({{"name", "data"}, {"persistentVolumeClaim", {{"claimName", k.data_claim}, {"readOnly", true}}}});
    volume_mounts.push_back({{"name", "data"}, {"mountPath", dir}, {"readOnly", true}});
  }
  json worker_resources = {{"requests", {{"cpu", std::to_string(cpus)}, {"memory", Quantity(memory)}}}};
  if (inst.gpu_count > 0) {
    worker_resources["requests"]["nvidia.com/gpu"] = std::to_string(inst.gpu_count);
    worker_resources["limits"] = {{"nvidia.com/gpu", std::to_string(inst.gpu_count)}};
  }
  json worker = {
      {"replicas", job.cluster.nodes},
      {"template",
       {{"metadata", {{"labels", Labels(name, job.name, "worker")}}},
        {"spec",
         {{"serviceAccountName", "tencache"},
          {"automountServiceAccountToken", false},
          {"securityContext", PodSecurity()},
          {"nodeSelector", {{"node.kubernetes.io/instance-type", inst.type}}},
          {"tolerations", json::array({{{"key", "nvidia.com/gpu"}, {"operator", "Exists"}, {"effect", "NoSchedule"}}})},
          {"containers",
           json::array({{{"name", "worker"},
                         {"image", k.image},
                         {"command", json::array({"/usr/sbin/sshd", "-De", "-f", "/home/mpiuser/.sshd_config"})},
                         // WaitForWorkersReady then waits for sshd, not just a started container.
                         {"readinessProbe", {{"tcpSocket", {{"port", 2222}}}, {"periodSeconds", 2}}},
                         {"securityContext", ContainerSecurity()},
                         {"resources", worker_resources},
                         {"volumeMounts", volume_mounts}}})},
          {"volumes", volumes}}}}}};
  json launcher = {
      {"replicas", 1},
      {"template",
       {{"metadata", {{"labels", Labels(name, job.name, "launcher")}}},
        {"spec",
         {{"serviceAccountName", "tencache"},
          {"automountServiceAccountToken", false},
          {"securityContext", PodSecurity()},
          {"containers",
           json::array({{{"name", "launcher"},
                         {"image", k.image},
                         {"command", r.launcher_command},
                         {"securityContext", ContainerSecurity()},
                         {"resources", {{"requests", {{"cpu", "500m"}, {"memory", "512Mi"}}}}},
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
  std::string text;
  for (const json* doc : {&configmap, &mpijob}) {
    YAML::Emitter out;
    Emit(out, *doc);
    text += "---\n" + std::string(out.c_str()) + "\n";
  }
  r.yaml = text;
  return r;
}

}  // namespace tencache
