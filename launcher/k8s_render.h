// K8sRender: a planned job as Kubernetes objects for the Kubeflow MPI Operator
// (kubeflow.org/v2beta1): a ConfigMap holding job.resolved.yaml, and an MPIJob
// whose Launcher runs `mpirun ... tencache-worker --job` on that file and whose
// Worker replicas are the planned nodes — each asking for the instance type's
// GPUs, CPU and memory for its ranks' host budgets, pinned to the instance type
// (node.kubernetes.io/instance-type), tolerating the GPU taint, with volumes
// for the NVMe tier, checkpoints and /dev/shm. Containers run as a non-root
// user with every capability dropped and no privilege escalation. Names and
// labels are RFC 1123, derived from the job's name and unique per submission.
// Worker pods also carry the instance type's fabric (launcher/k8s_fabric.h),
// CPU and memory that fit the node and a grace period long enough for the
// SIGTERM checkpoint (launcher/k8s_pod_sizing.h); cluster.gang_scheduler makes
// the MPIJob one unit for Kueue, Volcano or scheduler-plugins. Comments in the
// YAML say why each size was chosen. docs/kubernetes.md explains each choice.
// Pure functions.
#pragma once

#include <string>
#include <vector>

#include "common/job_spec.h"
#include "launcher/resolved_job.h"
#include "launcher/resource_model.h"

namespace tencache {

// Where the containers see things (the resolved job inside the ConfigMap uses them).
constexpr char kK8sJobDir[] = "/etc/tencache";             // the ConfigMap
constexpr char kK8sJobFile[] = "/etc/tencache/job.resolved.yaml";
constexpr char kK8sNvmeDir[] = "/var/tmp/tencache-nvme";    // the NVMe tier's volume
constexpr char kK8sCheckpointDir[] = "/var/tmp/tencache-checkpoints";
// Where rank 0 writes the trained weights (transformers' layout) in its pod:
// kK8sCheckpointDir/JOB/weights.
inline std::string K8sWeightsDir(const std::string& job_name) {
  return std::string(kK8sCheckpointDir) + "/" + job_name + "/weights";
}
constexpr char kK8sWorkerBinary[] = "/opt/tencache/bin/tencache-worker";  // k8s/Dockerfile installs it there
constexpr int kK8sUser = 1000;                              // the image's non-root user

struct RenderedJob {
  std::string name;        // the MPIJob's (and the ConfigMap's prefix)
  std::string namespace_;
  std::string yaml;        // every object, as YAML documents
  std::vector<std::string> launcher_command;  // what the Launcher container runs
  // What a cluster admin should hear before applying it (the pods' memory does
  // not fit the node, the grace period outlasts a spot notice): printed on stderr.
  std::vector<std::string> warnings;
};

// A submission name: the job's name, cut to leave room, plus "-" and `suffix`
// (e.g. a time stamp in base 36). InvalidArgument when the result is not a
// valid RFC 1123 label.
StatusOr<std::string> SubmissionName(const std::string& job_name, const std::string& suffix);
// A suffix unique to this moment (base-36 seconds and a counter).
std::string SubmissionSuffix();

// `resolved` as the run executes it on `chosen` (nodes x the instance type),
// its job file rewritten for the containers' paths. InvalidArgument naming the
// key when cluster.image is unset or a name is not RFC 1123. `resume`: the
// ranks get --resume (continue from the newest complete checkpoint in
// train.checkpoint_dir, on cluster.checkpoint_claim; exit 2 where there is none).
// REQUIRES: chosen.feasible, chosen.instance from the catalog; with `resume`,
// cluster.checkpoint_claim set (an emptyDir starts empty).
StatusOr<RenderedJob> RenderK8sJob(const ResolvedJob& resolved, const Candidate& chosen, const std::string& name,
                                   bool resume = false);

}  // namespace tencache
