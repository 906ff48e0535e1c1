// K8sRunner: submits and follows a tencache job on Kubernetes as a Kubeflow
// MPIJob (kubeflow.org/v2beta1, MPI Operator v2), through kubectl. Every
// kubectl call is an argument vector (never a shell string):
//   kubectl [--context C] [--namespace N] apply -f FILE
//   kubectl ... get pods -l training.kubeflow.org/job-name=NAME -o json        (every poll_every_s)
//   kubectl ... get mpijobs.v2beta1.kubeflow.org NAME -o json                   (every poll_every_s)
//   kubectl ... logs -f POD -c CONTAINER                                        (the launcher pod, streamed)
// What the MPI Operator v2 sets (pkg/controller/mpi_job_controller.go,
// pkg/apis/kubeflow/v2beta1/{constants,types}.go): every launcher and worker
// pod carries training.kubeflow.org/operator-name=mpi-operator,
// training.kubeflow.org/job-name=<MPIJob name> and
// training.kubeflow.org/job-role=launcher|worker (the older mpi-job-name /
// mpi-job-role labels are no longer set); the launcher is a batch/v1 Job
// "<name>-launcher" whose pod is "<name>-launcher-<random>" (found by label),
// the workers are pods "<name>-worker-<i>". The MPIJob's status.conditions are
// {type: Created|Running|Restarting|Succeeded|Failed|Suspended, status: "True"|"False",
// reason, message, lastUpdateTime, lastTransitionTime}.
// Single-threaded; one FollowK8sJob at a time per process (it installs
// SIGINT / SIGTERM handlers while following).
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "launcher/local_runner.h"

namespace tencache {

struct KubectlOptions {
  std::string kubectl = "kubectl";
  std::string context;                // "": kubectl's current context
  std::string namespace_ = "tencache";  // "": kubectl's default namespace
};

// argv: kubectl [--context C] [--namespace N] args...
std::vector<std::string> KubectlCommand(const KubectlOptions& o, const std::vector<std::string>& args);

// kubectl apply -f FILE; prints what kubectl says it created or configured.
// On error the server's answer: Unavailable when the cluster cannot be
// reached, kubectl cannot be started, or the MPIJob kind is unknown ("no
// matches for kind MPIJob": install the MPI Operator); InvalidArgument when
// the server refuses the objects (admission, validation, RBAC). Both carry
// kubectl's stderr.
Status ApplyManifests(const KubectlOptions& o, const std::string& manifest_file);

// Before a restart (cluster.max_restarts): deletes the MPIJob and waits until
// it and its pods are gone, so that the same name can be applied again:
//   kubectl ... delete mpijobs.v2beta1.kubeflow.org NAME --cascade=foreground --wait=true --timeout=Ts
// (foreground: the MPIJob stays until the pods it owns are deleted, each within
// its grace period). The job's ConfigMap stays (apply configures it again). An
// MPIJob already gone is Ok; Unavailable (with kubectl's stderr) when the
// cluster cannot be reached or T = `timeout_s` passes first.
Status DeleteForRestart(const KubectlOptions& o, const std::string& name, double timeout_s);

struct FollowOptions {
  std::string job_name;          // the MPIJob's metadata.name
  std::string log_dir;           // launcher.log (the launcher pod's log), pods.json snapshots
  std::string metrics_path;      // rank 0's metrics picked out of the launcher's log
  int total_steps = 0;
  bool progress_in_place = false;
  double progress_every_s = 5;
  double pending_timeout_s = 600;  // a pod Pending (unschedulable, image not pulled) longer than this ends the run
  double poll_every_s = 2;
};

// Follows the job until it succeeds or fails: pods' phases (printed when they
// change), the launcher pod's log streamed (`kubectl logs -f`) with the same
// progress line as a local run and rank 0's TENCACHE_METRICS lines (mpirun
// --tag-output prefixes them "[1,0]<stdout>:") into metrics_path. Ends, never
// hangs, with the cluster's reason in `failure` and a non-zero exit_code on: a
// failed pod (the pod, its container's exit code and reason; last_stderr: its
// last log lines), an image that cannot be pulled (ImagePullBackOff,
// InvalidImageName, ErrImageNeverPull: the image; a first ErrImagePull is
// reported and retried by the kubelet), a pod Pending longer than
// pending_timeout_s (unschedulable: the scheduler's message), the MPIJob's
// Failed condition (its reason and message), the MPIJob deleted, or kubectl
// failing for longer than pending_timeout_s. SIGINT / SIGTERM: stops
// following, interrupted = true, exit_code 130 (the job keeps running on the
// cluster until deleted; `failure` says so). In log_dir: launcher.log (the
// launcher's log as streamed), rank-N.out / rank-N.err (its lines by rank),
// pods.json and mpijob.json (the latest answers). A Status only when
// log_dir cannot be written or kubectl cannot be started.
StatusOr<RunOutcome> FollowK8sJob(const KubectlOptions& o, const FollowOptions& f);

// `tencache-launch status [NAME]`, `logs NAME [-f]`, `delete NAME`: what
// SkyPilot users expect of sky status|logs|down. Each returns the process
// exit code (launcher/exit_code.h), with the reason on stderr: 0; 1 when the
// cluster or the run is not there; 2 when kubectl answers NotFound for
// anything but the run itself.
// "" = every tencache MPIJob (label app.kubernetes.io/name=tencache): NAME, STATE, AGE, WORKERS READY, INSTANCE;
// a NAME adds its conditions and pods.
int K8sStatus(const KubectlOptions& o, const std::string& name);
// The launcher pod's log (the newest launcher pod of the MPIJob), streamed with -f.
int K8sLogs(const KubectlOptions& o, const std::string& name, bool follow);
// Deletes the MPIJob (its pods, services and the operator's ConfigMap and
// Secret go with it) and the job's ConfigMap (label selector
// app.kubernetes.io/name=tencache,app.kubernetes.io/instance=NAME).
int K8sDelete(const KubectlOptions& o, const std::string& name);

}  // namespace tencache
