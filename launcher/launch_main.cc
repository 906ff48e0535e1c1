// tencache-launch: the user's entry point. `tencache-launch JOB.yaml` (= `run`)
// plans the job, runs it on this machine with the plan's budgets driving every
// worker, and reports measured against predicted cost; `plan` only plans;
// `report DIR` rebuilds a run's report; `export DIR` writes its weights for
// transformers. This file is the CLI edge: it parses
// flags (CLI11, as every tencache program) and turns failures into one message
// on stderr and an exit code (2 for bad input).
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "common/cli.h"
#include "common/human_format.h"
#include "common/job_spec.h"
#include "common/suggest.h"
#include "common/token_corpus.h"
#include "launcher/catalog.h"
#include "launcher/exit_code.h"
#include "launcher/export_weights.h"
#include "launcher/k8s_runner.h"
#include "launcher/launch_k8s.h"
#include "launcher/launch_run.h"
#include "launcher/local_machine.h"
#include "launcher/planner.h"
#include "launcher/report_writer.h"

namespace tencache {
namespace {

constexpr uint64_t kPlanReadsDataUpTo = 256ull << 20;  // ~0.1 s to read and scan

struct PlanArgs {
  std::string job_path;
  std::vector<std::string> overrides;
  bool json = false;
  bool all_nodes = false;
  std::string catalog;
};

int RunPlan(const PlanArgs& args) {
  const auto start = std::chrono::steady_clock::now();
  StatusOr<JobSpec> job = LoadJobFile(args.job_path, args.overrides);
  Status st = job.status();
  // The data, where it is at hand and small enough to read within planning's
  // second; a larger file is checked when the run starts.
  std::vector<std::string> unread;
  if (st.ok()) st = CheckJobDataFitsModel(*job, kPlanReadsDataUpTo, &unread);
  StatusOr<Catalog> catalog = Status::Ok();
  if (st.ok()) {
    catalog = Catalog::Load(CatalogPathFor(args.catalog, job->cluster.catalog));
    st = catalog.status();
  }
  StatusOr<PlanResult> plan = Status::Ok();
  if (st.ok()) {
    plan = PlanJob(*job, *catalog, ModelAssumptions());
    st = plan.status();
  }
  if (!st.ok()) return FailCommand(st);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (args.json) {
    nlohmann::ordered_json j = PlanToJson(*plan, args.all_nodes);
    j["planning_ms"] = ms;
    std::cout << j.dump(2) << "\n";
  } else {
    std::cout << RenderPlanTable(*plan, args.all_nodes);
    std::printf("Planned %zu instance x node combinations in %.1f ms.\n", plan->evaluated.size(), ms);
    for (const std::string& key : unread) {
      std::printf("%s is larger than %s: its tokens are checked against model.vocab when the run starts.\n",
                  key.c_str(), FormatBytes(kPlanReadsDataUpTo).c_str());
    }
    if (job->cluster.target == Target::kLocal) {
      std::printf("This machine is measured and added as a candidate when the job runs (tencache-launch %s).\n",
                  args.job_path.c_str());
    }
  }
  if (plan->chosen < 0) {
    std::fprintf(stderr, "tencache-launch: no feasible plan for %s: each instance type's reason is listed above; "
                         "raise cluster.max_nodes, add instance types (cluster.instance_types), set cluster.volume "
                         "for instances without local NVMe, or lower train.micro_batch\n", args.job_path.c_str());
    return kExitNoFeasiblePlan;
  }
  return 0;
}

void AddKubectlOptions(CLI::App* cmd, std::string* kubectl, std::string* context, std::string* ns) {
  cmd->add_option("--kubectl", *kubectl, "the kubectl program (cluster.target k8s)");
  cmd->add_option("--context", *context, "kubectl context (default: the current one)");
  cmd->add_option("--namespace", *ns, "namespace (default: cluster.namespace, tencache)");
}

void AddJobOptions(CLI::App* cmd, std::string* job, std::vector<std::string>* overrides, std::string* catalog) {
  cmd->add_option("job", *job, "the job file (see docs/job-yaml.md)")->required();
  cmd->add_option("--set", *overrides, "override one job key, KEY=VALUE, e.g. --set train.micro_batch=2 (repeatable)");
  cmd->add_option("--catalog", *catalog, "instance catalog folder or file (default: cluster.catalog, else "
                                         "configs/instances)");
}

int Main(int argc, char** argv) {
  // `tencache-launch JOB.yaml ...` is `tencache-launch run JOB.yaml ...`.
  std::vector<std::string> args(argv, argv + argc);
  if (argc > 1 && argv[1][0] != '-' && std::strcmp(argv[1], "plan") != 0 && std::strcmp(argv[1], "run") != 0 &&
      std::strcmp(argv[1], "report") != 0 && std::strcmp(argv[1], "render") != 0 &&
      std::strcmp(argv[1], "status") != 0 && std::strcmp(argv[1], "logs") != 0 && std::strcmp(argv[1], "delete") != 0 &&
      std::strcmp(argv[1], "export") != 0) {
    const std::string first = argv[1];
    const bool yaml = first.size() > 5 && (first.rfind(".yaml") == first.size() - 5 || first.rfind(".yml") == first.size() - 4);
    if (!yaml && first.find('/') == std::string::npos) {
      std::fprintf(stderr, "tencache-launch: unknown command '%s'%s; expected plan, run, render, report, export, status, "
                           "logs, delete or a JOB.yaml (see tencache-launch --help)\n", Excerpt(first).c_str(),
                   DidYouMean(first, {"plan", "run", "render", "report", "export", "status", "logs", "delete"}).c_str());
      return kExitBadInput;
    }
    args.insert(args.begin() + 1, "run");
  }
  std::vector<const char*> cargv;
  for (const std::string& a : args) cargv.push_back(a.c_str());

  auto app = MakeCliApp("tencache-launch", "Plan a training job, run it with the plan's budgets, and report "
                                           "measured against predicted cost.\n"
                                           "  tencache-launch JOB.yaml [options]   is   tencache-launch run JOB.yaml");
  app->require_subcommand(1);
  PlanArgs plan;
  CLI::App* plan_cmd = app->add_subcommand("plan", "print what the job needs and costs on every candidate instance "
                                                   "type, and choose the cheapest (or fastest) feasible plan");
  AddJobOptions(plan_cmd, &plan.job_path, &plan.overrides, &plan.catalog);
  plan_cmd->add_flag("--json", plan.json, "print one JSON object instead of the table");
  plan_cmd->add_flag("--all-nodes", plan.all_nodes, "list every node count, not only the best per instance type");

  LaunchOptions run;
  CLI::App* run_cmd = app->add_subcommand("run", "plan, run on this machine (cluster.target local), report");
  AddJobOptions(run_cmd, &run.job_path, &run.overrides, &run.catalog);
  run_cmd->add_option("--out", run.out, "the run folder (default: runs/NAME-YYYYmmdd-HHMMSS); one that holds an "
                                        "earlier run is refused unless --resume continues it or --overwrite");
  run_cmd->add_flag("--overwrite", run.overwrite, "replace the results of an earlier run in --out");
  run_cmd->add_option("--steps", run.steps, "train this many steps (sets train.steps; 1000 or 1e3)")
      ->transform(CliWholeNumber(1, 100000000))->type_name("N")->default_str("");
  run_cmd->add_option("--max-restarts", run.max_restarts,
                      "start a failed run again from its newest checkpoint up to N times (sets cluster.max_restarts)")
      ->check(CLI::Range(0, 100))->type_name("N")->default_str("");
  run_cmd->add_flag("--dry-run", run.dry_run, "print the resolved job and the exact command, start nothing");
  run_cmd->add_flag("--reprobe", run.reprobe, "measure this machine again even when its probes are cached");
  run_cmd->add_option("--worker", run.worker, "tencache-worker to run (default: the one beside this program)");
  run_cmd->add_option("--mpirun", run.mpirun, "the mpirun program");
  run_cmd->add_option("--target", run.target, "where to run: local (this machine), hosts (cluster.hosts over Open "
                                             "MPI) or k8s (a Kubeflow MPIJob); default: cluster.target")
      ->check(CLI::IsMember({"local", "hosts", "k8s"}));
  run_cmd->add_option("--resume", run.resume_from,
                      "continue from the newest complete checkpoint: the run folder RUN_DIR's (its checkpoints/), "
                      "or train.checkpoint_dir's when the job sets it")
      ->expected(0, 1)->type_name("[RUN_DIR]");
  AddKubectlOptions(run_cmd, &run.kubectl, &run.context, &run.namespace_);
  run_cmd->add_option("--progress-every", run.progress_every_s,
                      "seconds between progress lines when stdout is not a terminal")->check(CLI::Range(0.0, 3600.0));

  std::string report_dir, report_catalog;
  CLI::App* report_cmd = app->add_subcommand("report", "rebuild report.json, report.md and the pictures of a "
                                                       "finished or interrupted run");
  report_cmd->add_option("dir", report_dir, "the run folder")->required()->check(CLI::ExistingDirectory);
  report_cmd->add_option("--catalog", report_catalog, "instance catalog (default: the run's)");

  ExportOptions exp;
  CLI::App* export_cmd = app->add_subcommand("export", "write a finished run's weights in Hugging Face's layout "
                                                       "(safetensors shards, their index, config.json) for transformers");
  export_cmd->add_option("dir", exp.run_dir, "the run folder")->required()->check(CLI::ExistingDirectory);
  export_cmd->add_option("--format", exp.format, "safetensors")->capture_default_str();
  export_cmd->add_option("--out", exp.out, "the folder to write")->required();
  export_cmd->add_option("--dtype", exp.dtype, "bf16, fp16 or fp32 (default: the job's model.dtype)");
  export_cmd->add_option("--max-shard-size", exp.max_shard_size,
                         "the largest shard (transformers' max_shard_size); one model.safetensors when all fits")
      ->capture_default_str();

  RenderOptions render;
  CLI::App* render_cmd = app->add_subcommand("render", "print (or write to --out) the Kubernetes objects that run "
                                                       "the chosen plan: a ConfigMap and a Kubeflow MPIJob");
  AddJobOptions(render_cmd, &render.job_path, &render.overrides, &render.catalog);
  render_cmd->add_option("--out", render.out, "write OUT/manifests.yaml and OUT/job.resolved.yaml instead of printing");
  render_cmd->add_option("--name", render.name, "the MPIJob's name (default: the job's name and a unique suffix)");

  // What SkyPilot users expect of sky status | logs | down, for Kubernetes runs.
  KubectlOptions kube;
  std::string job_name;
  bool follow = false;
  CLI::App* status_cmd = app->add_subcommand("status", "the tencache MPIJobs on the cluster, or one of them");
  status_cmd->add_option("name", job_name, "an MPIJob's name (default: every tencache job)");
  CLI::App* logs_cmd = app->add_subcommand("logs", "the launcher's log of a Kubernetes run");
  logs_cmd->add_option("name", job_name, "the MPIJob's name")->required();
  logs_cmd->add_flag("-f,--follow", follow, "keep printing as the log grows");
  CLI::App* delete_cmd = app->add_subcommand("delete", "delete a Kubernetes run (its MPIJob and ConfigMap)");
  delete_cmd->add_option("name", job_name, "the MPIJob's name")->required();
  for (CLI::App* cmd : {status_cmd, logs_cmd, delete_cmd}) AddKubectlOptions(cmd, &kube.kubectl, &kube.context, &kube.namespace_);

  if (int code = ParseCli(*app, int(cargv.size()), cargv.data()); code >= 0) return code;
  if (*render_cmd) return RenderJob(render);
  if (*export_cmd) return ExportWeights(exp);
  if (*status_cmd) return K8sStatus(kube, job_name);
  if (*logs_cmd) return K8sLogs(kube, job_name, follow);
  if (*delete_cmd) return K8sDelete(kube, job_name);
  if (*plan_cmd) return RunPlan(plan);
  if (*run_cmd) {
    run.resume = run_cmd->count("--resume") > 0;
    return LaunchRun(run);
  }
  return RebuildReport(report_dir, report_catalog);
}

}  // namespace
}  // namespace tencache

int main(int argc, char** argv) { return tencache::Main(argc, argv); }
