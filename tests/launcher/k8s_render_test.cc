// Rendering a planned job as Kubernetes objects: golden files for the example
// jobs (TENCACHE_UPDATE_GOLDEN=1 rewrites them), and the properties the MPI
// Operator and a cautious cluster need, checked on the parsed objects.
#include "launcher/k8s_render.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "command_runner.h"
#include "launcher/catalog.h"
#include "launcher/planner.h"

namespace tencache {
namespace {

namespace fs = std::filesystem;
using testing::CommandResult;

const std::string kSource = TENCACHE_SOURCE_DIR;
const char kImage[] = "registry.example.com/tencache/worker:0.1.0";

CommandResult Render(const std::string& example, const std::string& extra = "") {
  return testing::RunCommand("cd " + kSource + " && " + TENCACHE_LAUNCH_BIN + " render configs/examples/" + example +
                             ".yaml --name " + example + "-golden --set cluster.image=" + kImage + " " + extra + " 2>&1");
}

std::string ReadFile(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(K8sRender, ExamplesMatchTheirGoldenFiles) {
  for (const char* example : {"quickstart", "llama-2-7b", "opt-13b", "llama-2-70b"}) {
    CommandResult r = Render(example);
    ASSERT_EQ(r.code, 0) << example << ": " << r.out;
    // train.data is absolute in the resolved job: the checkout's path is not part of the golden file.
    for (size_t at; (at = r.out.find(kSource + "/")) != std::string::npos;) r.out.replace(at, kSource.size(), "@SOURCE@");
    const fs::path golden = fs::path(kSource) / "tests/launcher/golden" / (std::string(example) + ".k8s.yaml");
    if (std::getenv("TENCACHE_UPDATE_GOLDEN") != nullptr) std::ofstream(golden) << r.out;
    EXPECT_EQ(r.out, ReadFile(golden)) << example << ": rendering changed; if on purpose, rerun with "
                                          "TENCACHE_UPDATE_GOLDEN=1 and review the diff";
  }
}

// The documents of a render, parsed.
std::vector<YAML::Node> Documents(const std::string& text) { return YAML::LoadAll(text); }

YAML::Node Find(const std::vector<YAML::Node>& docs, const std::string& kind) {
  for (const YAML::Node& d : docs) {
    if (d["kind"].as<std::string>() == kind) return d;
  }
  return YAML::Node();
}

TEST(K8sRender, SeventyBOnSeveralNodesTargetsTheInstanceWithItsGpusAndNoPrivilege) {
  // p4d.24xlarge: one node cannot hold the model states (LaunchCli's test), so the plan takes several.
  CommandResult r = Render("llama-2-70b", "--set cluster.instance_types=[p4d.24xlarge]");
  ASSERT_EQ(r.code, 0) << r.out;
  const std::vector<YAML::Node> docs = Documents(r.out);
  ASSERT_EQ(docs.size(), 2u);
  const YAML::Node job = Find(docs, "MPIJob");
  ASSERT_TRUE(job) << r.out;
  EXPECT_EQ(job["apiVersion"].as<std::string>(), "kubeflow.org/v2beta1");
  const YAML::Node spec = job["spec"];
  EXPECT_EQ(spec["mpiImplementation"].as<std::string>(), "OpenMPI");
  EXPECT_EQ(spec["launcherCreationPolicy"].as<std::string>(), "WaitForWorkersReady");
  for (const char* k : {"cleanPodPolicy", "backoffLimit", "ttlSecondsAfterFinished"}) EXPECT_TRUE(spec["runPolicy"][k]) << k;
  // The plan: several p4d.24xlarge, 8 GPUs each.
  StatusOr<JobSpec> parsed = LoadJobFile(kSource + "/configs/examples/llama-2-70b.yaml");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  parsed->cluster.instance_types = {"p4d.24xlarge"};
  StatusOr<Catalog> catalog = Catalog::Load(DefaultCatalogPath());
  StatusOr<PlanResult> plan = PlanJob(*parsed, *catalog, ModelAssumptions());
  const Candidate& chosen = plan->candidates[plan->chosen];
  ASSERT_GT(chosen.nodes, 1);
  EXPECT_EQ(spec["slotsPerWorker"].as<int>(), chosen.instance->gpu_count);
  const YAML::Node worker = spec["mpiReplicaSpecs"]["Worker"];
  EXPECT_EQ(worker["replicas"].as<int>(), chosen.nodes);
  const YAML::Node pod = worker["template"]["spec"];
  EXPECT_EQ(pod["nodeSelector"]["node.kubernetes.io/instance-type"].as<std::string>(), chosen.instance->type);
  EXPECT_EQ(pod["tolerations"][0]["key"].as<std::string>(), "nvidia.com/gpu");
  const YAML::Node c = pod["containers"][0];
  EXPECT_EQ(c["resources"]["limits"]["nvidia.com/gpu"].as<std::string>(), std::to_string(chosen.instance->gpu_count));
  EXPECT_TRUE(c["resources"]["requests"]["memory"]);
  EXPECT_TRUE(c["resources"]["requests"]["cpu"]);
  for (const YAML::Node& replica : {spec["mpiReplicaSpecs"]["Launcher"], worker}) {
    const YAML::Node p = replica["template"]["spec"];
    EXPECT_TRUE(p["securityContext"]["runAsNonRoot"].as<bool>());
    EXPECT_NE(p["securityContext"]["runAsUser"].as<int>(), 0);
    const YAML::Node sc = p["containers"][0]["securityContext"];
    EXPECT_FALSE(sc["allowPrivilegeEscalation"].as<bool>());
    ASSERT_EQ(sc["capabilities"]["drop"].size(), 1u);
    EXPECT_EQ(sc["capabilities"]["drop"][0].as<std::string>(), "ALL");
    EXPECT_FALSE(sc["capabilities"]["add"]);
    EXPECT_FALSE(sc["privileged"]);
  }
  bool shm = false, nvme = false, checkpoints = false;
  for (const YAML::Node& v : pod["volumes"]) {
    const std::string n = v["name"].as<std::string>();
    shm |= n == "dshm" && v["emptyDir"]["medium"].as<std::string>() == "Memory";
    nvme |= n == "nvme";
    checkpoints |= n == "checkpoints" && v["persistentVolumeClaim"]["claimName"].as<std::string>() == "tencache-checkpoints";
  }
  EXPECT_TRUE(shm && nvme && checkpoints);
  // The ConfigMap holds the resolved job, which parses and has no auto left.
  const YAML::Node cm = Find(docs, "ConfigMap");
  StatusOr<JobSpec> resolved = ParseJobText(cm["data"]["job.resolved.yaml"].as<std::string>(), "configmap");
  ASSERT_TRUE(resolved.ok()) << resolved.status().message();
  EXPECT_EQ(resolved->cluster.nodes, chosen.nodes);
  EXPECT_EQ(resolved->cluster.ranks_per_node, chosen.instance->gpu_count);
  EXPECT_EQ(resolved->cache.nvme_path, kK8sNvmeDir);
  EXPECT_TRUE(resolved->cache.device_budget && resolved->cache.host_budget && resolved->cache.nvme_budget);
}

TEST(K8sRender, NvmeVolumeKinds) {
  // A host budget that cannot hold every shard: the NVMe tier gets a volume.
  const std::string small = "--set cache.host_budget=2GiB ";
  CommandResult r = Render("llama-2-7b", small + "--set cluster.nvme_volume=host-path");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("path: \"/mnt/nvme/tencache\""), std::string::npos) << r.out;
  r = Render("llama-2-7b", small + "--set cluster.nvme_volume=ephemeral --set cluster.nvme_storage_class=gp3");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("storageClassName: \"gp3\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("volumeClaimTemplate"), std::string::npos);
  r = Render("llama-2-7b", small);
  EXPECT_NE(r.out.find("storageClassName: \"tencache-local-nvme\""), std::string::npos) << r.out;
}

TEST(K8sRender, NamesAreRfc1123AndUniquePerSubmission) {
  StatusOr<std::string> a = SubmissionName("quickstart", SubmissionSuffix());
  StatusOr<std::string> b = SubmissionName("quickstart", SubmissionSuffix());
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(*a, *b);
  StatusOr<std::string> long_name = SubmissionName(std::string(80, 'a'), "x1");
  ASSERT_TRUE(long_name.ok());
  EXPECT_LE(long_name->size(), 50u);
  EXPECT_FALSE(SubmissionName("x", "UPPER").ok());
  CommandResult r = testing::RunCommand("cd " + kSource + " && " + TENCACHE_LAUNCH_BIN +
                                        " render configs/examples/llama-2-70b.yaml --name Bad_Name 2>&1");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("RFC 1123"), std::string::npos) << r.out;
}

TEST(K8sRender, MissingImageOrBadNamespaceIsAClearError) {
  CommandResult r = testing::RunCommand("cd " + kSource + " && " + TENCACHE_LAUNCH_BIN +
                                        " render configs/examples/llama-2-7b.yaml 2>&1");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("cluster.image"), std::string::npos) << r.out;
  r = Render("llama-2-7b", "--set cluster.namespace=Not_Valid");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("cluster.namespace"), std::string::npos) << r.out;
}

// Managed recovery and --resume on Kubernetes resume from the checkpoints on
// cluster.checkpoint_claim: without a claim (an emptyDir, gone with the pod)
// both are refused naming the key, before anything is planned or applied; with
// one, --resume puts --resume in the ranks' command, and a restart's manifests
// (manifests.resume.yaml, tested in K8sRun.APreemptedWorkerIsRestartedFromItsCheckpoint) too.
TEST(K8sRender, RestartsAndResumeNeedACheckpointClaim) {
  CommandResult r = Render("llama-2-7b", "--set cluster.max_restarts=2");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--set cluster.max_restarts=2: key 'cluster.max_restarts': a restart resumes from the "
                       "checkpoints, and without cluster.checkpoint_claim"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(Render("llama-2-7b", "--set cluster.max_restarts=0").code, 0);
  r = Render("llama-2-7b", "--set cluster.max_restarts=2 --set cluster.checkpoint_claim=tencache-checkpoints");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("claimName: \"tencache-checkpoints\""), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("--resume"), std::string::npos) << r.out;  // the first attempt starts afresh

  const std::string run = "cd " + kSource + " && " + TENCACHE_LAUNCH_BIN +
                          " run configs/examples/llama-2-7b.yaml --target k8s --kubectl /nonexistent --dry-run --set cluster.image=" +
                          kImage + " ";
  r = testing::RunCommand(run + "--resume 2>&1");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("cluster.checkpoint_claim' is not set, so the pods' checkpoints were in an emptyDir"),
            std::string::npos)
      << r.out;
  r = testing::RunCommand(run + "--resume runs/earlier --set cluster.checkpoint_claim=tencache-checkpoints 2>&1");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("not from a run folder; use --resume alone"), std::string::npos) << r.out;
  r = testing::RunCommand(run + "--resume --set cluster.checkpoint_claim=tencache-checkpoints 2>&1");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("the ranks resume from the newest complete checkpoint"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("- \"/var/tmp/tencache-checkpoints/llama7b-finetune/weights\"\n                - \"--resume\""),
            std::string::npos)
      << r.out;
}

// `tencache-launch JOB.yaml --target k8s` end to end against the stand-in
// kubectl (tests/launcher/stand-in-kubectl replaying the "success" scenario):
// plan, render into the run folder, apply, follow, and the same report.
TEST(K8sRun, PlansRendersAppliesFollowsAndReports) {
  const fs::path dir = fs::temp_directory_path() / ("tencache_k8s_run_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  CommandResult r = testing::RunCommand(
      "cd " + kSource + " && TENCACHE_KUBECTL_SCENARIO=" + kSource + "/tests/launcher/k8s_scenarios/success" +
      " TENCACHE_KUBECTL_RECORD=" + (dir / "calls").string() + " " + TENCACHE_LAUNCH_BIN +
      " configs/examples/quickstart.yaml --target k8s --set cluster.image=" + kImage + " --kubectl " + kSource +
      "/tests/launcher/stand-in-kubectl --context kind-test --out " + (dir / "run").string() +
      " --progress-every 0 2>&1");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(fs::exists(dir / "run" / "manifests.yaml"));
  EXPECT_TRUE(fs::exists(dir / "run" / "report.json")) << r.out;
  EXPECT_TRUE(fs::exists(dir / "run" / "report.md"));
  const std::string calls = ReadFile(dir / "calls");
  EXPECT_NE(calls.find("apply"), std::string::npos) << calls;
  EXPECT_NE(calls.find("kind-test"), std::string::npos) << calls;
  fs::remove_all(dir);
}

// Managed recovery on Kubernetes (the stand-in's "restart" scenario): attempt 1
// reports steps 0-2 and a checkpoint of step 2, then a worker pod is
// terminated by its node's shutdown; the launcher deletes the MPIJob (waiting
// for its pods), applies it again with the ranks resuming, and attempt 2
// resumes at step 2 and finishes. Step 2's first run is lost and taken out of
// metrics.jsonl; run.json and report.json list both attempts.
TEST(K8sRun, APreemptedWorkerIsRestartedFromItsCheckpoint) {
  const fs::path dir = fs::temp_directory_path() / ("tencache_k8s_restart_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path out = dir / "run";
  CommandResult r = testing::RunCommand(
      "cd " + kSource + " && TENCACHE_KUBECTL_SCENARIO=" + kSource + "/tests/launcher/k8s_scenarios/restart" +
      " TENCACHE_KUBECTL_RECORD=" + (dir / "calls").string() + " " + TENCACHE_LAUNCH_BIN +
      " configs/examples/quickstart.yaml --target k8s --set cluster.image=" + kImage +
      " --set cluster.checkpoint_claim=tencache-checkpoints --set train.checkpoint_every=2"
      " --set cluster.restart_backoff_s=0 --max-restarts 1 --steps 4 --kubectl " + kSource +
      "/tests/launcher/stand-in-kubectl --context kind-test --out " + out.string() + " --progress-every 0 2>&1");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("restart 1 of 1 in 0 s, from the checkpoint at step 2"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("imminent node shutdown"), std::string::npos) << r.out;

  // The calls: apply manifests.yaml, follow, delete and wait, apply the resuming manifests, follow.
  std::vector<std::string> verbs;
  std::string applied;
  std::string delete_call;
  {
    std::ifstream in(dir / "calls");
    std::string line;
    while (std::getline(in, line)) {
      std::vector<std::string> argv;
      size_t start = 0, sep;
      while ((sep = line.find('\037', start)) != std::string::npos) {
        argv.push_back(line.substr(start, sep - start));
        start = sep + 1;
      }
      ASSERT_GT(argv.size(), 5u) << line;
      if (argv[5] == "get" || argv[5] == "logs") continue;
      verbs.push_back(argv[5]);
      if (argv[5] == "apply") applied += fs::path(argv.back()).filename().string() + " ";
      if (argv[5] == "delete") {
        for (size_t i = 5; i < argv.size(); ++i) delete_call += argv[i] + " ";
      }
    }
  }
  EXPECT_EQ(verbs, (std::vector<std::string>{"apply", "delete", "apply"}));
  EXPECT_EQ(applied, "manifests.yaml manifests.resume.yaml ");
  EXPECT_NE(delete_call.find("delete mpijobs.v2beta1.kubeflow.org "), std::string::npos) << delete_call;
  EXPECT_NE(delete_call.find(" --cascade=foreground --wait=true --timeout="), std::string::npos) << delete_call;
  const std::string resumed = ReadFile(out / "manifests.resume.yaml");
  EXPECT_NE(resumed.find("- \"--resume\""), std::string::npos);
  EXPECT_EQ(ReadFile(out / "manifests.yaml").find("--resume"), std::string::npos);

  // Each step once in metrics.jsonl; the lost step and both attempts in run.json.
  std::vector<int> steps;
  {
    std::ifstream in(out / "metrics.jsonl");
    std::string line;
    while (std::getline(in, line)) steps.push_back(nlohmann::json::parse(line).at("step").get<int>());
  }
  EXPECT_EQ(steps, (std::vector<int>{0, 1, 2, 3}));
  const nlohmann::json run = nlohmann::json::parse(ReadFile(out / "run.json"));
  EXPECT_EQ(run.at("status"), "finished");
  EXPECT_EQ(run.at("restarts"), 1);
  ASSERT_EQ(run.at("attempts").size(), 2u);
  const nlohmann::json& first = run.at("attempts")[0];
  EXPECT_EQ(first.at("status"), "failed");
  EXPECT_EQ(first.at("resumed_at_step"), 2);
  EXPECT_EQ(first.at("steps_lost"), 1);
  EXPECT_NE(first.at("cause").get<std::string>().find("imminent node shutdown"), std::string::npos) << first;
  EXPECT_EQ(run.at("attempts")[1].at("first_step"), 2);
  EXPECT_TRUE(fs::exists(out / "logs.attempt-1" / "launcher.log"));
  EXPECT_EQ(nlohmann::json::parse(ReadFile(out / "report.json")).at("attempts").size(), 2u);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tencache
