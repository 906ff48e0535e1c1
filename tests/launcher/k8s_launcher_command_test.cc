// The Launcher container's command, taken from a rendered MPIJob, run on this
// machine as the MPI Operator would run it: the ConfigMap's job file at its
// mount path, a hostfile of this machine in OMPI_MCA_orte_default_hostfile (the
// operator's launcher sets that variable), and the worker binary from this
// build in place of the image's path. It must train. Root only (the mount path
// is under /etc); skipped otherwise.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "command_runner.h"
#include "launcher/k8s_render.h"

namespace tencache {
namespace {

namespace fs = std::filesystem;

TEST(K8sLauncherCommand, TrainsTheQuickstartHere) {
  if (getuid() != 0) GTEST_SKIP() << "needs root: the job file goes to " << kK8sJobFile;
  if (fs::exists(kK8sJobFile)) GTEST_SKIP() << kK8sJobFile << " exists; not overwriting it";
  const fs::path weights = K8sWeightsDir("quickstart");
  if (fs::exists(weights)) GTEST_SKIP() << weights << " exists; not overwriting it";
  const bool volume_existed = fs::exists(kK8sCheckpointDir);
  const fs::path dir = fs::temp_directory_path() / ("tencache_k8s_cmd_" + std::to_string(getpid()));
  testing::CommandResult r = testing::RunCommand(
      "cd " + std::string(TENCACHE_SOURCE_DIR) + " && " + TENCACHE_LAUNCH_BIN +
      " render configs/examples/quickstart.yaml --name qs-local --set cluster.image=local/test "
      "--set train.steps=4 --out " + dir.string() + " 2>&1");
  ASSERT_EQ(r.code, 0) << r.out;
  const std::vector<YAML::Node> docs = YAML::LoadAllFromFile((dir / "manifests.yaml").string());
  std::string job_text;
  std::vector<std::string> command;
  for (const YAML::Node& d : docs) {
    if (d["kind"].as<std::string>() == "ConfigMap") job_text = d["data"]["job.resolved.yaml"].as<std::string>();
    if (d["kind"].as<std::string>() == "MPIJob") {
      for (const YAML::Node& a : d["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]["command"]) {
        command.push_back(a.as<std::string>());
      }
    }
  }
  ASSERT_FALSE(job_text.empty());
  ASSERT_FALSE(command.empty());
  fs::create_directories(kK8sJobDir);
  std::ofstream(kK8sJobFile) << job_text;
  std::ofstream(dir / "hostfile") << "localhost slots=8\n";
  std::string cmd = "OMPI_MCA_orte_default_hostfile=" + (dir / "hostfile").string() +
                    " OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1";
  for (const std::string& a : command) cmd += " '" + (a == kK8sWorkerBinary ? std::string(TENCACHE_WORKER_BIN) : a) + "'";
  testing::CommandResult run = testing::RunCommand(cmd + " 2>&1");
  fs::remove(kK8sJobFile);
  fs::remove(kK8sJobDir);
  fs::remove_all(dir);
  EXPECT_EQ(run.code, 0) << cmd << "\n" << run.out;
  size_t steps = 0;
  for (size_t at = run.out.find("TENCACHE_METRICS"); at != std::string::npos; at = run.out.find("TENCACHE_METRICS", at + 1)) {
    ++steps;
  }
  EXPECT_EQ(steps, 4u) << run.out;
  // The trained weights, where the pod's checkpoint volume is.
  EXPECT_TRUE(fs::is_regular_file(weights / "model.safetensors")) << run.out;
  EXPECT_TRUE(fs::is_regular_file(weights / "config.json")) << run.out;
  fs::remove_all(weights.parent_path());
  if (!volume_existed) fs::remove(kK8sCheckpointDir);  // the pods' volume path, made here by the run
}

}  // namespace
}  // namespace tencache
