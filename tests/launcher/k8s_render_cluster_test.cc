// What a cluster admin checks in a rendered MPIJob, through `tencache-launch
// render`: the fabric's devices and environment on several nodes, requests
// that fit the node with a memory limit, a grace period for the SIGTERM
// checkpoint (and the spot warning), gang scheduling by Kueue, Volcano or
// scheduler-plugins, the NVMe volume the job named, the memlock comment, and
// bad values refused naming the key.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "command_runner.h"

namespace tencache {
namespace {

namespace fs = std::filesystem;
using testing::CommandResult;

const std::string kSource = TENCACHE_SOURCE_DIR;
const char kImage[] = "registry.example.com/tencache/worker:0.1.0";

// The 70B example on `nodes` x `type`, with more --set options.
CommandResult Render70b(const std::string& type, int nodes, const std::string& extra = "") {
  return testing::RunCommand("cd " + kSource + " && " + TENCACHE_LAUNCH_BIN +
                             " render configs/examples/llama-2-70b.yaml --name admin --set cluster.image=" + kImage +
                             " --set cluster.instance_types=[" + type + "] --set cluster.nodes=" +
                             std::to_string(nodes) + " " + extra + " 2>&1");
}

YAML::Node MpiJob(const std::string& text) {
  for (const YAML::Node& d : YAML::LoadAll(text)) {
    if (d["kind"] && d["kind"].as<std::string>() == "MPIJob") return d;
  }
  return YAML::Node();
}

YAML::Node WorkerPod(const YAML::Node& job) { return job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]; }

std::string EnvOf(const YAML::Node& container, const std::string& var) {
  for (const YAML::Node& e : container["env"]) {
    if (e["name"].as<std::string>() == var) return e["value"].as<std::string>();
  }
  return "";
}

TEST(K8sRenderCluster, EfaDevicesAndNcclEnvironmentOnSeveralP5Nodes) {
  CommandResult r = Render70b("p5.48xlarge", 4);
  ASSERT_EQ(r.code, 0) << r.out;
  const YAML::Node c = WorkerPod(MpiJob(r.out))["containers"][0];
  EXPECT_EQ(c["resources"]["requests"]["vpc.amazonaws.com/efa"].as<std::string>(), "32");
  EXPECT_EQ(c["resources"]["limits"]["vpc.amazonaws.com/efa"].as<std::string>(), "32");
  EXPECT_EQ(EnvOf(c, "FI_PROVIDER"), "efa");
  EXPECT_EQ(EnvOf(c, "FI_EFA_USE_DEVICE_RDMA"), "1");
  EXPECT_NE(r.out.find("# fabric: aws-efa"), std::string::npos) << r.out;
  // The launcher takes no device.
  EXPECT_FALSE(MpiJob(r.out)["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]["resources"]
                   ["requests"]["vpc.amazonaws.com/efa"]);
}

TEST(K8sRenderCluster, AzureInfinibandAndNoFabricSaidInAComment) {
  CommandResult r = Render70b("Standard_ND96amsr_A100_v4", 2);
  ASSERT_EQ(r.code, 0) << r.out;
  const YAML::Node c = WorkerPod(MpiJob(r.out))["containers"][0];
  EXPECT_EQ(c["resources"]["limits"]["rdma/rdma_shared_device_a"].as<std::string>(), "1");
  r = Render70b("a3-highgpu-8g", 2);
  ASSERT_EQ(r.code, 0) << r.out;
  const YAML::Node a3 = WorkerPod(MpiJob(r.out))["containers"][0];
  EXPECT_FALSE(a3["env"]);
  EXPECT_NE(r.out.find("# fabric: none for a3-highgpu-8g"), std::string::npos) << r.out;
}

TEST(K8sRenderCluster, RequestsFitTheNodeWithAMemoryLimitAndAGracePeriodForTheCheckpoint) {
  CommandResult r = Render70b("p5.48xlarge", 4);
  ASSERT_EQ(r.code, 0) << r.out;
  const YAML::Node pod = WorkerPod(MpiJob(r.out));
  const YAML::Node res = pod["containers"][0]["resources"];
  const std::string cpu = res["requests"]["cpu"].as<std::string>();
  ASSERT_EQ(cpu.back(), 'm') << cpu;
  EXPECT_LE(std::stoll(cpu), 192000 - 550 - 1000) << "beside kube-reserved and DaemonSets";
  ASSERT_TRUE(res["limits"]["memory"]);
  EXPECT_LE(std::stoll(res["requests"]["memory"].as<std::string>()),
            std::stoll(res["limits"]["memory"].as<std::string>()));
  EXPECT_FALSE(res["limits"]["cpu"]) << "no CPU limit (docs/kubernetes.md)";
  // checkpoint_every 50: the grace period holds a checkpoint of every rank of the node.
  EXPECT_GT(pod["terminationGracePeriodSeconds"].as<int>(), 120);
  EXPECT_NE(r.out.find("# terminationGracePeriodSeconds: SIGTERM"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("# memlock: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("LimitMEMLOCK"), std::string::npos) << r.out;
}

TEST(K8sRenderCluster, KueueLabelsTheJobAndCreatesItSuspended) {
  CommandResult r = Render70b("p5.48xlarge", 2, "--set cluster.queue=team-a --set cluster.priority_class=high");
  ASSERT_EQ(r.code, 0) << r.out;
  const YAML::Node job = MpiJob(r.out);
  EXPECT_EQ(job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"].as<std::string>(), "team-a");
  EXPECT_TRUE(job["spec"]["runPolicy"]["suspend"].as<bool>());
  EXPECT_FALSE(job["spec"]["runPolicy"]["schedulingPolicy"]);
  EXPECT_EQ(WorkerPod(job)["priorityClassName"].as<std::string>(), "high");
}

TEST(K8sRenderCluster, VolcanoAndSchedulerPluginsGetAPodGroupOfTheWorkers) {
  CommandResult r = Render70b("p5.48xlarge", 4, "--set cluster.gang_scheduler=volcano --set cluster.queue=gpu");
  ASSERT_EQ(r.code, 0) << r.out;
  YAML::Node job = MpiJob(r.out);
  const YAML::Node policy = job["spec"]["runPolicy"]["schedulingPolicy"];
  EXPECT_EQ(policy["minAvailable"].as<int>(), 4);
  EXPECT_EQ(policy["queue"].as<std::string>(), "gpu");
  EXPECT_FALSE(job["spec"]["runPolicy"]["suspend"]);
  EXPECT_EQ(job["spec"]["launcherCreationPolicy"].as<std::string>(), "WaitForWorkersReady");
  r = Render70b("p5.48xlarge", 2, "--set cluster.gang_scheduler=scheduler-plugins");
  ASSERT_EQ(r.code, 0) << r.out;
  job = MpiJob(r.out);
  EXPECT_EQ(job["spec"]["runPolicy"]["schedulingPolicy"]["minAvailable"].as<int>(), 2);
  EXPECT_FALSE(job["spec"]["runPolicy"]["schedulingPolicy"]["queue"]);
}

TEST(K8sRenderCluster, BadSchedulingValuesExitTwoNamingTheKey) {
  const std::pair<const char*, const char*> bad[] = {
      {"--set cluster.gang_scheduler=slurm", "cluster.gang_scheduler"},
      {"--set cluster.gang_scheduler=kueue", "needs cluster.queue"},
      {"--set cluster.queue=Team_A", "cluster.queue"},
      {"--set cluster.gang_scheduler=scheduler-plugins --set cluster.queue=q", "cluster.queue"},
      {"--set cluster.priority_class=-x", "cluster.priority_class"},
      {"--set cluster.checkpoint_write_gbps=0", "cluster.checkpoint_write_gbps"},
      {"--set 'cluster.image=foo bar'", "cluster.image"},
  };
  for (const auto& [extra, key] : bad) {
    CommandResult r = Render70b("p5.48xlarge", 2, extra);
    EXPECT_EQ(r.code, 2) << extra << ": " << r.out;
    EXPECT_NE(r.out.find(key), std::string::npos) << extra << ": " << r.out;
  }
}

TEST(K8sRenderCluster, TheNvmeVolumeTheJobNamesIsHonouredWithoutAnNvmeBudget) {
  // No NVMe budget, nvme_volume not named: a small emptyDir, saying why.
  CommandResult r = Render70b("p5.48xlarge", 2, "--set cache.nvme_budget=0 --set cluster.nvme_volume=local-pv");
  ASSERT_EQ(r.code, 0) << r.out;
  bool claim = false;
  for (const YAML::Node& v : WorkerPod(MpiJob(r.out))["volumes"]) {
    if (v["name"].as<std::string>() != "nvme") continue;
    ASSERT_TRUE(v["ephemeral"]) << "local-pv named: a claim, not an emptyDir";
    EXPECT_EQ(v["ephemeral"]["volumeClaimTemplate"]["spec"]["storageClassName"].as<std::string>(), "tencache-local-nvme");
    claim = true;
  }
  EXPECT_TRUE(claim);
  EXPECT_NE(r.out.find("the job names this volume"), std::string::npos) << r.out;
  r = testing::RunCommand("cd " + kSource + " && " + TENCACHE_LAUNCH_BIN +
                          " render configs/examples/quickstart.yaml --name q --set cluster.image=" + kImage + " 2>&1");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("sizeLimit: \"64Mi\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("the plan puts nothing on NVMe"), std::string::npos) << r.out;
}

TEST(K8sRenderCluster, SpotWarnsWhereTheGracePeriodOutlastsTheNotice) {
  // The shipped catalog's p5.48xlarge has a spot price and an interruption rate.
  CommandResult r = Render70b("p5.48xlarge", 2, "--set cluster.use_spot=true");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("warning: terminationGracePeriodSeconds"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("spot interruption notice (120 s"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace tencache
