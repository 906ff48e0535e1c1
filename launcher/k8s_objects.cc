#include "launcher/k8s_objects.h"

#include <algorithm>
#include <ctime>

namespace tencache::k8s {

// ---- small helpers ----

const json& Get(const json& j, const char* key) {
  static const json kNull;
  if (!j.is_object()) return kNull;
  auto it = j.find(key);
  return it == j.end() ? kNull : *it;
}

std::string Text(const json& j) {
  if (j.is_string()) return j.get<std::string>();
  if (j.is_number_integer()) return std::to_string(j.get<long long>());
  if (j.is_boolean()) return j.get<bool>() ? "true" : "false";
  return "";
}

bool Contains(const std::string& s, const std::string& needle) { return s.find(needle) != std::string::npos; }

std::string Trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

std::string Tail(const std::string& s, size_t n) { return s.size() > n ? "..." + s.substr(s.size() - n) : s; }

std::vector<std::string> SplitLines(const std::string& text) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t nl = text.find('\n', start);
    if (nl == std::string::npos) nl = text.size();
    lines.push_back(text.substr(start, nl - start));
    start = nl + 1;
  }
  return lines;
}

// "2024-05-01T10:00:00Z" (RFC 3339 as the API server writes it) in seconds since the epoch; -1 when not one.
double ParseTime(const std::string& s) {
  std::tm tm{};
  if (s.size() < 19 || strptime(s.substr(0, 19).c_str(), "%Y-%m-%dT%H:%M:%S", &tm) == nullptr) return -1;
  return double(timegm(&tm));
}

// An age as kubectl prints it: 45s, 12m, 5h, 3d.
std::string Age(const std::string& timestamp) {
  const double t = ParseTime(timestamp);
  if (t < 0) return "?";
  const long long s = std::max<long long>(0, (long long)(double(std::time(nullptr)) - t));
  if (s < 120) return std::to_string(s) + "s";
  if (s < 120 * 60) return std::to_string(s / 60) + "m";
  if (s < 48 * 3600) return std::to_string(s / 3600) + "h";
  return std::to_string(s / 86400) + "d";
}

// ---- kubectl ----

StatusOr<ProcessResult> Kubectl(const KubectlOptions& o, const std::vector<std::string>& args,
                                double timeout_s) {
  StatusOr<ProcessResult> r = RunProcess(KubectlCommand(o, args), {}, timeout_s);
  if (!r.ok()) return r.status();
  if (r->exit_code == 127 && Contains(r->err, "cannot start")) {
    return Status::Unavailable("cannot start kubectl ('" + o.kubectl + "'): " + Trim(r->err) +
                               "; install kubectl or pass --kubectl PATH");
  }
  return r;
}

bool MpiJobKindMissing(const std::string& err) {
  return Contains(err, "no matches for kind \"MPIJob\"") || Contains(err, "resource type \"mpijobs") ||
         Contains(err, "no matches for kubeflow.org/") ||
         (Contains(err, "mpijobs") && Contains(err, "the server could not find the requested resource"));
}

bool Unreachable(const std::string& err) {
  for (const char* s : {"Unable to connect to the server", "The connection to the server", "connection refused", "couldn't get current server API group list",
                        "no such host", "i/o timeout", "TLS handshake timeout", "context deadline exceeded",
                        "Client.Timeout", "connection reset by peer", "server is currently unable"}) {
    if (Contains(err, s)) return true;
  }
  return false;
}

// kubectl's failure as a Status that says what to do.
Status KubectlFailure(const std::string& what, const ProcessResult& r) {
  const std::string err = Tail(Trim(r.err.empty() ? r.out : r.err));
  if (r.timed_out) {
    return Status::Unavailable(what + ": kubectl did not answer within " + std::to_string(int(kKubectlTimeoutS)) +
                               " s (is the cluster reachable?)");
  }
  if (MpiJobKindMissing(err)) {
    return Status::Unavailable(what + ": the cluster does not know the MPIJob kind (kubeflow.org/v2beta1): install the "
                               "Kubeflow MPI Operator v2 (docs/kubernetes.md). kubectl said: " + err);
  }
  if (Unreachable(err)) return Status::Unavailable(what + ": cannot reach the cluster. kubectl said: " + err);
  return Status::InvalidArgument(what + ": the cluster refused it. kubectl said: " + err);
}

// kubectl get ... -o json, parsed. NotFound (with kubectl's words) when the object is not there.
StatusOr<json> GetJson(const KubectlOptions& o, const std::vector<std::string>& args, const std::string& what) {
  TC_ASSIGN_OR_RETURN(ProcessResult r, Kubectl(o, args));
  if (r.exit_code != 0) {
    if (Contains(r.err, "(NotFound)") || Contains(r.err, "not found")) {
      if (!MpiJobKindMissing(r.err)) return Status::NotFound(Trim(r.err));
    }
    return KubectlFailure(what, r);
  }
  json j = json::parse(r.out, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return Status::Unavailable(what + ": kubectl printed no JSON: " + Tail(Trim(r.out), 300));
  }
  return j;
}


// ---- reading pods and the MPIJob ----

std::string Label(const json& obj, const char* key) { return Text(Get(Get(Get(obj, "metadata"), "labels"), key)); }
std::string Name(const json& obj) { return Text(Get(Get(obj, "metadata"), "name")); }
std::string Phase(const json& pod) { return Text(Get(Get(pod, "status"), "phase")); }

// The container statuses of a pod, init containers first.
std::vector<const json*> ContainerStatuses(const json& pod) {
  std::vector<const json*> all;
  for (const char* key : {"initContainerStatuses", "containerStatuses"}) {
    const json& list = Get(Get(pod, "status"), key);
    if (list.is_array()) for (const json& c : list) all.push_back(&c);
  }
  return all;
}

// The image a container runs: from its status, else from the pod's spec.
std::string ImageOf(const json& pod, const json& status) {
  const std::string name = Text(Get(status, "name"));
  for (const char* key : {"initContainers", "containers"}) {
    const json& list = Get(Get(pod, "spec"), key);
    if (!list.is_array()) continue;
    for (const json& c : list) {
      if (Text(Get(c, "name")) == name) return Text(Get(c, "image"));
    }
  }
  return Text(Get(status, "image"));
}

// The pod's first container (the one the MPI Operator runs, and the one whose log is the launcher's).
std::string MainContainer(const json& pod) {
  const json& list = Get(Get(pod, "spec"), "containers");
  return list.is_array() && !list.empty() ? Text(Get(list[0], "name")) : "";
}

int RestartCount(const json& pod, const std::string& container) {
  for (const json* c : ContainerStatuses(pod)) {
    if (Text(Get(*c, "name")) == container) return Get(*c, "restartCount").is_number() ? Get(*c, "restartCount").get<int>() : 0;
  }
  return 0;
}

// The PodScheduled=False condition: "Unschedulable: 0/3 nodes are available: ...", or "".
std::string SchedulingProblem(const json& pod) {
  const json& conditions = Get(Get(pod, "status"), "conditions");
  if (!conditions.is_array()) return "";
  for (const json& c : conditions) {
    if (Text(Get(c, "type")) == "PodScheduled" && Text(Get(c, "status")) == "False") {
      const std::string reason = Text(Get(c, "reason")), message = Trim(Text(Get(c, "message")));
      return reason.empty() ? message : message.empty() ? reason : reason + ": " + message;
    }
  }
  return "";
}

bool PodReady(const json& pod) {
  const json& conditions = Get(Get(pod, "status"), "conditions");
  if (!conditions.is_array()) return false;
  for (const json& c : conditions) {
    if (Text(Get(c, "type")) == "Ready") return Text(Get(c, "status")) == "True";
  }
  return false;
}

// How a terminated container ended: "exited with code 137 (OOMKilled)", plus its termination message.
std::string Terminated(const json& t) {
  std::string s = "exited with code " + Text(Get(t, "exitCode"));
  const std::string reason = Text(Get(t, "reason")), message = Trim(Text(Get(t, "message")));
  if (!reason.empty()) s += " (" + reason + ")";
  if (!message.empty()) s += ": " + message;
  return s;
}

// A pod's phase with what explains it, as printed when it changes.
std::string PodDisplay(const json& pod) {
  std::string phase = Phase(pod);
  if (phase.empty()) phase = "Unknown";
  std::string detail;
  if (phase == "Pending") detail = SchedulingProblem(pod);
  if (detail.empty() && Text(Get(Get(pod, "status"), "reason")) != "") {
    detail = Text(Get(Get(pod, "status"), "reason"));
  }
  for (const json* c : ContainerStatuses(pod)) {
    if (!detail.empty()) break;
    const json& state = Get(*c, "state");
    if (Get(state, "waiting").is_object()) {
      const std::string reason = Text(Get(Get(state, "waiting"), "reason"));
      if (!reason.empty() && reason != "PodInitializing") detail = reason;
      if (Contains(reason, "Image")) detail += " " + ImageOf(pod, *c);
    } else if (phase == "Failed" && Get(state, "terminated").is_object()) {
      detail = "container " + Text(Get(*c, "name")) + " " + Terminated(Get(state, "terminated"));
    }
  }
  return detail.empty() ? phase : phase + " (" + detail + ")";
}

// The MPIJob's state from its conditions (terminal first), as `status` shows it.
std::string JobState(const json& job, std::string* reason, std::string* message) {
  const json& conditions = Get(Get(job, "status"), "conditions");
  if (conditions.is_array()) {
    for (const char* type : {"Failed", "Succeeded", "Suspended", "Restarting", "Running", "Created"}) {
      for (const json& c : conditions) {
        if (Text(Get(c, "type")) == type && Text(Get(c, "status")) == "True") {
          if (reason != nullptr) *reason = Text(Get(c, "reason"));
          if (message != nullptr) *message = Trim(Text(Get(c, "message")));
          return type;
        }
      }
    }
  }
  return "Pending";
}

}  // namespace tencache::k8s
