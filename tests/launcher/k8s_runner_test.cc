// The Kubernetes runner against a STAND-IN kubectl (tests/launcher/stand-in-kubectl):
// no cluster is reachable here, so a shell script records every argument vector
// it is called with and replays cluster answers written in kubectl's JSON form
// (tests/launcher/k8s_scenarios/NAME, one answer per call). Each test checks the
// exact argument vectors, the outcome and what was printed. Nothing waits on a
// timer: the stand-in's answers drive every step (the unschedulable case waits
// out a pending_timeout_s of 0.3 s while the stand-in keeps answering Pending).
#include "launcher/k8s_runner.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

namespace tencache {
namespace {

namespace fs = std::filesystem;
using Argv = std::vector<std::string>;

const char kJob[] = "quickstart-0a1b2c3";
const char kImage[] = "registry.example.com/tencache/worker:0.1";

std::string Read(const fs::path& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

bool Has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// One scenario: a scratch folder, the record file, the environment the stand-in reads.
class StandIn {
 public:
  explicit StandIn(const std::string& scenario) {
    dir_ = fs::temp_directory_path() / ("tencache_k8s_runner_" + scenario + "_" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    setenv("TENCACHE_KUBECTL_SCENARIO", (fs::path(TENCACHE_K8S_SCENARIOS) / scenario).c_str(), 1);
    setenv("TENCACHE_KUBECTL_RECORD", (dir_ / "calls").c_str(), 1);
  }
  ~StandIn() {
    fs::remove_all(dir_);
    unsetenv("TENCACHE_KUBECTL_SCENARIO");
    unsetenv("TENCACHE_KUBECTL_RECORD");
  }
  const fs::path& dir() const { return dir_; }

  static KubectlOptions Options() {
    KubectlOptions o;
    o.kubectl = TENCACHE_STAND_IN_KUBECTL;
    o.context = "kind-test";
    o.namespace_ = "tencache-test";
    return o;
  }
  // The full argv of a call with these arguments after the global flags.
  static Argv Call(const Argv& args) { return KubectlCommand(Options(), args); }

  FollowOptions Follow() const {
    FollowOptions f;
    f.job_name = kJob;
    f.log_dir = (dir_ / "logs").string();
    f.metrics_path = (dir_ / "metrics.jsonl").string();
    f.total_steps = 3;
    f.progress_every_s = 0;
    f.poll_every_s = 0.02;
    f.pending_timeout_s = 30;
    return f;
  }

  // Every recorded call, in order.
  std::vector<Argv> Calls() const {
    std::vector<Argv> calls;
    std::istringstream in(Read(dir_ / "calls"));
    std::string line;
    while (std::getline(in, line)) {
      Argv argv;
      size_t start = 0, sep;
      while ((sep = line.find('\037', start)) != std::string::npos) {
        argv.push_back(line.substr(start, sep - start));
        start = sep + 1;
      }
      calls.push_back(argv);
    }
    return calls;
  }
  // The recorded calls whose verb (after --context and --namespace) is / is not `verb`.
  std::vector<Argv> Calls(const std::string& verb, bool matching = true) const {
    std::vector<Argv> out;
    for (const Argv& a : Calls()) {
      if ((a.size() > 5 && a[5] == verb) == matching) out.push_back(a);
    }
    return out;
  }

 private:
  fs::path dir_;
};

const Argv kGetPods = {"get", "pods", "-l", std::string("training.kubeflow.org/job-name=") + kJob, "-o", "json"};
const Argv kGetJob = {"get", "mpijobs.v2beta1.kubeflow.org", kJob, "-o", "json"};

std::string Pod(const std::string& suffix) { return std::string(kJob) + "-" + suffix; }

TEST(K8sRunner, KubectlCommandIsAnArgumentVector) {
  KubectlOptions o;
  o.namespace_ = "";
  EXPECT_EQ(KubectlCommand(o, {"get", "pods"}), (Argv{"kubectl", "get", "pods"}));
  o.kubectl = "/opt/k 8s/kubectl";  // a space stays inside one argument
  o.context = "prod; rm -rf /";     // never seen by a shell
  o.namespace_ = "ml";
  EXPECT_EQ(KubectlCommand(o, {"logs", "-f", "p"}),
            (Argv{"/opt/k 8s/kubectl", "--context", "prod; rm -rf /", "--namespace", "ml", "logs", "-f", "p"}));
  EXPECT_EQ(KubectlOptions().namespace_, "tencache");
}

// An MPIJob suspended in its Kueue queue has no pods for as long as it waits:
// that is not the operator failing to act (pending_timeout_s), so the run
// waits for the MPIJob's own verdict.
TEST(K8sRunner, ASuspendedMpiJobWaitsInItsQueuePastThePendingTimeout) {
  StandIn k("queued");
  FollowOptions f = k.Follow();
  f.pending_timeout_s = 0.05;  // eleven polls of 0.02 s outlast it
  testing::internal::CaptureStdout();
  StatusOr<RunOutcome> r = FollowK8sJob(StandIn::Options(), f);
  const std::string out = testing::internal::GetCapturedStdout();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->exit_code, 1);
  EXPECT_TRUE(Has(r->failure, "the queue was deleted")) << r->failure;
  EXPECT_FALSE(Has(r->failure, "no pods")) << r->failure;
  EXPECT_TRUE(Has(out, ": Suspended")) << out;
}

TEST(K8sRunner, ApplyPrintsWhatWasCreated) {
  StandIn k("success");
  testing::internal::CaptureStdout();
  Status s = ApplyManifests(StandIn::Options(), "/runs/q/manifests.yaml");
  const std::string out = testing::internal::GetCapturedStdout();
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(out, std::string("  configmap/") + kJob + "-job created\n  mpijob.kubeflow.org/" + kJob + " created\n");
  EXPECT_EQ(k.Calls(), (std::vector<Argv>{StandIn::Call({"apply", "-f", "/runs/q/manifests.yaml"})}));
}

TEST(K8sRunner, ApplyWithoutTheMpiOperatorSaysToInstallIt) {
  StandIn k("apply-no-operator");
  testing::internal::CaptureStdout();
  Status s = ApplyManifests(StandIn::Options(), "manifests.yaml");
  testing::internal::GetCapturedStdout();
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_TRUE(Has(s.message(), "install the Kubeflow MPI Operator v2")) << s.message();
  EXPECT_TRUE(Has(s.message(), "no matches for kind \"MPIJob\" in version \"kubeflow.org/v2beta1\"")) << s.message();
}

TEST(K8sRunner, ApplyRefusedByTheServerCarriesItsAnswer) {
  {
    StandIn k("apply-forbidden");
    Status s = ApplyManifests(StandIn::Options(), "manifests.yaml");
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_TRUE(Has(s.message(), "User \"dev\" cannot create resource \"mpijobs\"")) << s.message();
  }
  {
    StandIn k("apply-unreachable");
    Status s = ApplyManifests(StandIn::Options(), "manifests.yaml");
    EXPECT_EQ(s.code(), StatusCode::kUnavailable);
    EXPECT_TRUE(Has(s.message(), "cannot reach the cluster")) << s.message();
    EXPECT_TRUE(Has(s.message(), "connect: connection refused")) << s.message();
  }
}

TEST(K8sRunner, NoKubectlIsUnavailable) {
  StandIn k("success");
  KubectlOptions o = StandIn::Options();
  o.kubectl = "/nonexistent/kubectl";
  Status s = ApplyManifests(o, "manifests.yaml");
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_TRUE(Has(s.message(), "--kubectl PATH")) << s.message();
  StatusOr<RunOutcome> r = FollowK8sJob(o, k.Follow());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
}

TEST(K8sRunner, SuccessFollowsPhasesLogAndMetrics) {
  StandIn k("success");
  testing::internal::CaptureStdout();
  StatusOr<RunOutcome> r = FollowK8sJob(StandIn::Options(), k.Follow());
  const std::string out = testing::internal::GetCapturedStdout();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->exit_code, 0) << r->failure;
  EXPECT_FALSE(r->interrupted);
  EXPECT_EQ(r->steps_done, 3);
  EXPECT_EQ(r->failure, "");

  // Pods' phases and the MPIJob's state, each printed when it changes.
  for (const std::string& line :
       {"pod " + Pod("worker-0") + ": Pending (ContainerCreating)\n", "pod " + Pod("worker-0") + ": Running\n",
        "pod " + Pod("launcher-x7k2q") + ": Pending (ContainerCreating)\n",
        "pod " + Pod("launcher-x7k2q") + ": Running\n", "pod " + Pod("launcher-x7k2q") + ": Succeeded\n",
        "pod " + Pod("worker-1") + ": deleted\n", std::string("MPIJob ") + kJob + ": Created\n",
        std::string("MPIJob ") + kJob + ": Running\n", std::string("MPIJob ") + kJob + ": Succeeded\n",
        std::string("step 1/3  loss 5.5000  8.19K tok/s  stall 10 ms  ETA 1.00 s\n"),
        std::string("step 3/3  loss 4.2000  8.19K tok/s  stall 10 ms  ETA 0 s\n")}) {
    EXPECT_TRUE(Has(out, line)) << "missing: " << line << "\nin:\n" << out;
  }
  EXPECT_FALSE(Has(out, "pod " + Pod("worker-0") + ": Running\npod " + Pod("worker-0") + ": Running"));

  // Rank 0's metrics, once each, and the launcher's log as streamed (a restarted stream repeats nothing).
  const std::string metrics = Read(k.dir() / "metrics.jsonl");
  EXPECT_EQ(std::count(metrics.begin(), metrics.end(), '\n'), 3);
  EXPECT_TRUE(Has(metrics, "\"loss\":5.5")) << metrics;
  EXPECT_EQ(Read(k.dir() / "logs" / "launcher.log"),
            Read(fs::path(TENCACHE_K8S_SCENARIOS) / "success" / "logs-f.out"));
  EXPECT_EQ(Read(k.dir() / "logs" / "rank-1.err"), "tencache-worker (rank 1) note: NVMe tier at /var/tmp/tencache-nvme\n");
  EXPECT_TRUE(Has(Read(k.dir() / "logs" / "pods.json"), "Succeeded"));
  EXPECT_TRUE(Has(Read(k.dir() / "logs" / "mpijob.json"), "MPIJobSucceeded"));

  // Four looks at the cluster, then the launcher's log by its pod's first container.
  std::vector<Argv> looks;
  for (int i = 0; i < 4; ++i) {
    looks.push_back(StandIn::Call(kGetPods));
    looks.push_back(StandIn::Call(kGetJob));
  }
  EXPECT_EQ(k.Calls("logs", false), looks);
  const std::vector<Argv> logs = k.Calls("logs");
  ASSERT_GE(logs.size(), 1u);
  ASSERT_LE(logs.size(), 2u);  // streamed while Running; read again to its end if that stream ended first
  for (const Argv& a : logs) EXPECT_EQ(a, StandIn::Call({"logs", "-f", Pod("launcher-x7k2q"), "-c", "launcher"}));
}

TEST(K8sRunner, ASnapshotThatCannotBeWrittenEndsFollowingNamingTheFile) {
  StandIn k("success");
  fs::create_directories(k.dir() / "logs" / "pods.json" / "in-the-way");  // a folder where the snapshot goes
  testing::internal::CaptureStdout();
  StatusOr<RunOutcome> r = FollowK8sJob(StandIn::Options(), k.Follow());
  testing::internal::GetCapturedStdout();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kIoError);
  EXPECT_TRUE(Has(r.status().message(), (k.dir() / "logs" / "pods.json").string())) << r.status().message();
}

TEST(K8sRunner, AnOomKilledWorkerEndsTheRunNamingThePod) {
  StandIn k("worker-oom");
  testing::internal::CaptureStdout();
  StatusOr<RunOutcome> r = FollowK8sJob(StandIn::Options(), k.Follow());
  const std::string out = testing::internal::GetCapturedStdout();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->exit_code, 1);
  EXPECT_EQ(r->failure, "pod " + Pod("worker-1") + " failed: container worker exited with code 137 (OOMKilled); "
                        "the launcher's log says rank 1: killed by signal 9 (Killed) on " + Pod("worker-1"));
  EXPECT_EQ(r->failed_rank, 1);
  EXPECT_EQ(r->steps_done, 1);
  EXPECT_EQ(r->last_stderr, (Argv{"Server listening on 0.0.0.0 port 2222.", "Server listening on :: port 2222.",
                                  "Accepted publickey for mpiuser from 10.0.0.7 port 51234 ssh2"}));
  EXPECT_TRUE(Has(out, "pod " + Pod("worker-1") + ": Failed (container worker exited with code 137 (OOMKilled))\n"))
      << out;
  EXPECT_EQ(k.Calls("logs", false), (std::vector<Argv>{StandIn::Call(kGetPods), StandIn::Call(kGetJob),
                                                       StandIn::Call(kGetPods), StandIn::Call(kGetJob)}));
  EXPECT_EQ(k.Calls("logs"),
            (std::vector<Argv>{StandIn::Call({"logs", "-f", Pod("launcher-x7k2q"), "-c", "launcher"}),
                               StandIn::Call({"logs", Pod("worker-1"), "-c", "worker", "--tail=20"})}));
}

TEST(K8sRunner, AnImageThatCannotBePulledIsNamed) {
  StandIn k("image-pull");
  testing::internal::CaptureStdout();
  StatusOr<RunOutcome> r = FollowK8sJob(StandIn::Options(), k.Follow());
  const std::string out = testing::internal::GetCapturedStdout();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->exit_code, 1);
  EXPECT_TRUE(Has(r->failure, "pod " + Pod("worker-0") + " cannot pull image '" + kImage + "': ImagePullBackOff: "
                              "Back-off pulling image \"" + kImage + "\" (ErrImagePull: rpc error: code = NotFound"))
      << r->failure;
  EXPECT_TRUE(Has(r->failure, "Check cluster.image")) << r->failure;
  EXPECT_TRUE(r->last_stderr.empty());
  // The first ErrImagePull is printed, and retried by the kubelet.
  EXPECT_TRUE(Has(out, "pod " + Pod("worker-0") + ": Pending (ErrImagePull " + kImage + ")\n")) << out;
  EXPECT_EQ(k.Calls(), (std::vector<Argv>{StandIn::Call(kGetPods), StandIn::Call(kGetJob), StandIn::Call(kGetPods),
                                          StandIn::Call(kGetJob)}));
}

TEST(K8sRunner, AnUnschedulablePodEndsAfterThePendingTimeoutWithTheSchedulersMessage) {
  StandIn k("unschedulable");
  FollowOptions f = k.Follow();
  f.pending_timeout_s = 0.3;
  testing::internal::CaptureStdout();
  StatusOr<RunOutcome> r = FollowK8sJob(StandIn::Options(), f);
  const std::string out = testing::internal::GetCapturedStdout();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->exit_code, 1);
  EXPECT_TRUE(std::regex_search(r->failure, std::regex("^pod " + Pod("worker-0") + " was not scheduled in [0-9.]+ ms: "
                                                       "Unschedulable: 0/3 nodes are available: 3 Insufficient "
                                                       "nvidia.com/gpu\\. preemption: ")))
      << r->failure;
  const std::string shown = "pod " + Pod("worker-0") + ": Pending (Unschedulable: 0/3 nodes are available: 3 "
                            "Insufficient nvidia.com/gpu.";
  EXPECT_TRUE(Has(out, "pod " + Pod("worker-0") + ": Pending\n")) << out;
  EXPECT_TRUE(Has(out, shown)) << out;
  const std::vector<Argv> calls = k.Calls();
  EXPECT_GE(calls.size(), 4u);  // the stand-in kept answering Pending until the timeout
  EXPECT_TRUE(k.Calls("logs").empty());
}

TEST(K8sRunner, TheMpiJobsFailedConditionEndsTheRun) {
  StandIn k("mpijob-failed");
  testing::internal::CaptureStdout();
  StatusOr<RunOutcome> r = FollowK8sJob(StandIn::Options(), k.Follow());
  const std::string out = testing::internal::GetCapturedStdout();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->exit_code, 1);
  EXPECT_EQ(r->failure, std::string("the MPIJob ") + kJob +
                            " failed (DeadlineExceeded): Job was active longer than specified deadline");
  EXPECT_EQ(r->steps_done, 1);
  ASSERT_EQ(r->last_stderr.size(), 2u);  // where the launcher's log had got to
  EXPECT_TRUE(Has(out, std::string("MPIJob ") + kJob +
                           ": Failed (DeadlineExceeded: Job was active longer than specified deadline)\n"))
      << out;
  EXPECT_EQ(k.Calls("logs", false).size(), 4u);
}

TEST(K8sRunner, ADeletedMpiJobEndsTheRun) {
  StandIn k("mpijob-deleted");
  StatusOr<RunOutcome> r = FollowK8sJob(StandIn::Options(), k.Follow());
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->exit_code, 1);
  EXPECT_TRUE(Has(r->failure, std::string("the MPIJob ") + kJob + " is gone from namespace tencache-test")) << r->failure;
  EXPECT_EQ(k.Calls().size(), 2u);
}

TEST(K8sRunner, AClusterThatDoesNotAnswerEndsTheRun) {
  StandIn k("cluster-unreachable");
  FollowOptions f = k.Follow();
  f.pending_timeout_s = 0.2;
  testing::internal::CaptureStdout();
  StatusOr<RunOutcome> r = FollowK8sJob(StandIn::Options(), f);
  const std::string out = testing::internal::GetCapturedStdout();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->exit_code, 1);
  EXPECT_TRUE(Has(r->failure, "kubectl has failed for")) << r->failure;
  EXPECT_TRUE(Has(r->failure, "The connection to the server 127.0.0.1:6443 was refused")) << r->failure;
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;  // the error, printed once
}

TEST(K8sRunner, CtrlCStopsFollowingAndSaysTheJobKeepsRunning) {
  StandIn k("interrupted");  // the stand-in sends this process SIGINT during the second `get pods`
  testing::internal::CaptureStdout();
  StatusOr<RunOutcome> r = FollowK8sJob(StandIn::Options(), k.Follow());
  testing::internal::GetCapturedStdout();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->interrupted);
  EXPECT_EQ(r->exit_code, 130);
  EXPECT_TRUE(Has(r->failure, std::string("the MPIJob ") + kJob + " keeps running on the cluster until deleted "
                              "(tencache-launch delete " + kJob + ")")) << r->failure;
  EXPECT_EQ(k.Calls("logs", false).size(), 4u);  // nothing asked after the signal
}

TEST(K8sRunner, StatusListsEveryTencacheJob) {
  StandIn k("status");
  testing::internal::CaptureStdout();
  const int code = K8sStatus(StandIn::Options(), "");
  const std::string out = testing::internal::GetCapturedStdout();
  EXPECT_EQ(code, 0);
  EXPECT_TRUE(std::regex_search(out, std::regex("^NAME +STATE +AGE +WORKERS READY +INSTANCE\n"
                                                "quickstart-0a1b2c3 +Running +[0-9]+d +1/2 +g5\\.12xlarge\n"
                                                "llama-2-70b-0a1b2zz +Succeeded +[0-9]+d +0/4 +p4d\\.24xlarge\n$")))
      << out;
  EXPECT_EQ(k.Calls(),
            (std::vector<Argv>{
                StandIn::Call({"get", "mpijobs.v2beta1.kubeflow.org", "-l", "app.kubernetes.io/name=tencache", "-o", "json"}),
                StandIn::Call({"get", "pods", "-l", "app.kubernetes.io/name=tencache,training.kubeflow.org/job-role=worker",
                               "-o", "json"})}));
}

TEST(K8sRunner, StatusOfOneJobShowsItsConditionsAndPods) {
  StandIn k("status");
  testing::internal::CaptureStdout();
  const int code = K8sStatus(StandIn::Options(), kJob);
  const std::string out = testing::internal::GetCapturedStdout();
  EXPECT_EQ(code, 0);
  EXPECT_TRUE(std::regex_search(out, std::regex("quickstart-0a1b2c3 +Running +[0-9]+d +1/2 +g5\\.12xlarge\n"))) << out;
  EXPECT_TRUE(std::regex_search(out, std::regex("Running +True +[0-9]+d +MPIJobRunning +MPIJob tencache-test/quickstart-0a1b2c3 is running\\.")))
      << out;
  EXPECT_TRUE(std::regex_search(out, std::regex(Pod("worker-1") + " +worker +Pending \\(ContainerCreating\\) +no +gpu-node-1")))
      << out;
  EXPECT_EQ(k.Calls(), (std::vector<Argv>{StandIn::Call(kGetJob), StandIn::Call(kGetPods)}));
}

TEST(K8sRunner, StatusWithNothingThere) {
  StandIn k("status-none");
  testing::internal::CaptureStdout();
  EXPECT_EQ(K8sStatus(StandIn::Options(), ""), 0);
  EXPECT_EQ(testing::internal::GetCapturedStdout(), "No tencache MPIJobs in namespace tencache-test.\n");
  testing::internal::CaptureStderr();
  EXPECT_EQ(K8sStatus(StandIn::Options(), "nope"), 1);
  EXPECT_TRUE(Has(testing::internal::GetCapturedStderr(), "no MPIJob nope in namespace tencache-test"));
}

TEST(K8sRunner, LogsPrintsTheNewestLauncherPodsLog) {
  StandIn k("logs");
  const std::string log = Read(fs::path(TENCACHE_K8S_SCENARIOS) / "logs" / "logs.out");
  testing::internal::CaptureStdout();
  EXPECT_EQ(K8sLogs(StandIn::Options(), kJob, false), 0);
  EXPECT_EQ(testing::internal::GetCapturedStdout(), log);
  testing::internal::CaptureStdout();
  EXPECT_EQ(K8sLogs(StandIn::Options(), kJob, true), 0);
  EXPECT_EQ(testing::internal::GetCapturedStdout(), log);
  const Argv find = {"get", "pods", "-l",
                     std::string("training.kubeflow.org/job-name=") + kJob + ",training.kubeflow.org/job-role=launcher",
                     "-o", "json"};
  EXPECT_EQ(k.Calls(), (std::vector<Argv>{StandIn::Call(find),
                                          StandIn::Call({"logs", Pod("launcher-x7k2q"), "-c", "launcher"}),
                                          StandIn::Call(find),
                                          StandIn::Call({"logs", "-f", Pod("launcher-x7k2q"), "-c", "launcher"})}));
}

TEST(K8sRunner, DeleteRemovesTheMpiJobAndItsConfigMap) {
  StandIn k("delete");
  testing::internal::CaptureStdout();
  EXPECT_EQ(K8sDelete(StandIn::Options(), kJob), 0);
  const std::string out = testing::internal::GetCapturedStdout();
  EXPECT_TRUE(Has(out, std::string("mpijob.kubeflow.org \"") + kJob + "\" deleted\nconfigmap \"" + kJob + "-job\" deleted\n"))
      << out;
  EXPECT_EQ(k.Calls(),
            (std::vector<Argv>{StandIn::Call({"delete", "mpijobs.v2beta1.kubeflow.org", kJob}),
                               StandIn::Call({"delete", "configmaps", "-l",
                                              std::string("app.kubernetes.io/name=tencache,app.kubernetes.io/instance=") + kJob})}));
}

TEST(K8sRunner, DeleteOfNothingSaysSo) {
  StandIn k("delete-missing");
  testing::internal::CaptureStderr();
  testing::internal::CaptureStdout();
  EXPECT_EQ(K8sDelete(StandIn::Options(), "nope"), 1);
  testing::internal::GetCapturedStdout();
  EXPECT_TRUE(Has(testing::internal::GetCapturedStderr(), "nothing named nope in namespace tencache-test"));
}

}  // namespace
}  // namespace tencache
