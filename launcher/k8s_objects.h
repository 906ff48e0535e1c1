// k8s_objects: what tencache-launch reads from a Kubernetes cluster through
// kubectl — running kubectl (argument vectors, a timeout, failures turned into
// a Status that says what to do) and reading its JSON answers about pods and
// MPIJobs (phases, container states, scheduling problems, the MPIJob's state).
// Shared by the follower and the status / logs / delete commands
// (launcher/k8s_runner.h). Pure functions apart from Kubectl and GetJson,
// which run kubectl.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "launcher/k8s_runner.h"
#include "launcher/run_follower.h"

namespace tencache::k8s {

using json = nlohmann::json;

// The MPIJob resource, with its version: the v2beta1 form of spec and status,
// and an unambiguous error when the MPI Operator v2 is not installed.
constexpr char kMpiJobResource[] = "mpijobs.v2beta1.kubeflow.org";
// Labels the MPI Operator v2 puts on launcher and worker pods.
constexpr char kJobNameLabel[] = "training.kubeflow.org/job-name";
constexpr char kJobRoleLabel[] = "training.kubeflow.org/job-role";
// Labels tencache-launch render puts on its objects (launcher/k8s_render.cc).
constexpr char kTencacheSelector[] = "app.kubernetes.io/name=tencache";
constexpr char kInstanceLabel[] = "app.kubernetes.io/instance";
constexpr char kInstanceTypeLabel[] = "node.kubernetes.io/instance-type";
constexpr double kKubectlTimeoutS = 60;   // one get / apply / delete

// JSON and text: a member (null when absent or not an object), a scalar as
// text ("" otherwise), substring test, whitespace trim, the last n characters
// ("..." first when cut), lines.
const json& Get(const json& j, const char* key);
std::string Text(const json& j);
bool Contains(const std::string& s, const std::string& needle);
std::string Trim(const std::string& s);
std::string Tail(const std::string& s, size_t n = 2000);
std::vector<std::string> SplitLines(const std::string& text);

// "2024-05-01T10:00:00Z" (RFC 3339 as the API server writes it) in seconds since the epoch; -1 when not one.
double ParseTime(const std::string& s);

// An age as kubectl prints it: 45s, 12m, 5h, 3d.
std::string Age(const std::string& timestamp);

// kubectl with the options' context and namespace; Unavailable when it cannot start.
StatusOr<ProcessResult> Kubectl(const KubectlOptions& o, const std::vector<std::string>& args,
                                double timeout_s = kKubectlTimeoutS);

// What kubectl's stderr says: the MPIJob kind is unknown (no MPI Operator v2);
// the cluster cannot be reached.
bool MpiJobKindMissing(const std::string& err);
bool Unreachable(const std::string& err);

// kubectl's failure as a Status that says what to do.
Status KubectlFailure(const std::string& what, const ProcessResult& r);

// kubectl get ... -o json, parsed. NotFound (with kubectl's words) when the object is not there.
StatusOr<json> GetJson(const KubectlOptions& o, const std::vector<std::string>& args, const std::string& what);

// An object's label, name; a pod's phase ("" when absent).
std::string Label(const json& obj, const char* key);
std::string Name(const json& obj);
std::string Phase(const json& pod);

// The container statuses of a pod, init containers first.
std::vector<const json*> ContainerStatuses(const json& pod);

// The image a container runs: from its status, else from the pod's spec.
std::string ImageOf(const json& pod, const json& status);

// The pod's first container (the one the MPI Operator runs, and the one whose log is the launcher's).
std::string MainContainer(const json& pod);

// Restarts of `container` so far.
int RestartCount(const json& pod, const std::string& container);

// The PodScheduled=False condition: "Unschedulable: 0/3 nodes are available: ...", or "".
std::string SchedulingProblem(const json& pod);

// The Ready condition is True.
bool PodReady(const json& pod);

// How a terminated container ended: "exited with code 137 (OOMKilled)", plus its termination message.
std::string Terminated(const json& t);

// A pod's phase with what explains it, as printed when it changes.
std::string PodDisplay(const json& pod);

// The MPIJob's state from its conditions (terminal first), as `status` shows it.
std::string JobState(const json& job, std::string* reason = nullptr, std::string* message = nullptr);

}  // namespace tencache::k8s
