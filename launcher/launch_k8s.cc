#include "launcher/launch_k8s.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>

#include <unistd.h>

#include "common/job_spec.h"
#include "common/text_file.h"
#include "launcher/catalog.h"
#include "launcher/k8s_render.h"
#include "launcher/k8s_runner.h"
#include "launcher/launch_run.h"
#include "launcher/planner.h"
#include "launcher/report_nodes.h"
#include "launcher/resolved_job.h"

namespace tencache {
namespace {

namespace fs = std::filesystem;

// The plan's choice for a Kubernetes run or render, resolved and rendered.
struct K8sPlan {
  JobSpec job;
  Catalog catalog;
  PlanResult plan;
  ResolvedJob resolved;
  RenderedJob rendered;
  const Candidate& chosen() const { return plan.candidates[plan.chosen]; }
};

// 0 and `*out` filled, or the exit code after printing why.
int PlanForK8s(const std::string& job_path, const std::vector<std::string>& overrides, const std::string& catalog_flag,
               const std::string& name_flag, K8sPlan* out) {
  StatusOr<JobSpec> job = LoadJobFile(job_path, overrides);
  if (!job.ok()) return Fail(job.status());
  out->job = *job;
  StatusOr<Catalog> catalog = Catalog::Load(CatalogPathFor(catalog_flag, job->cluster.catalog));
  if (!catalog.ok()) return Fail(catalog.status());
  out->catalog = std::move(*catalog);
  StatusOr<PlanResult> plan = PlanJob(out->job, out->catalog, ModelAssumptions());
  if (!plan.ok()) return Fail(plan.status());
  out->plan = std::move(*plan);
  if (out->plan.chosen < 0) {
    std::fprintf(stderr, "tencache-launch: no feasible plan for %s; `tencache-launch plan %s` lists each instance "
                         "type's reason\n", job_path.c_str(), job_path.c_str());
    return 3;
  }
  StatusOr<ResolvedJob> resolved = ResolveJob(out->job, out->chosen());
  if (!resolved.ok()) return Fail(resolved.status());
  out->resolved = std::move(*resolved);
  StatusOr<std::string> name = name_flag.empty() ? SubmissionName(out->job.name, SubmissionSuffix())
                                                 : StatusOr<std::string>(name_flag);
  if (!name.ok()) return Fail(name.status());
  StatusOr<RenderedJob> rendered = RenderK8sJob(out->resolved, out->chosen(), *name);
  if (!rendered.ok()) return Fail(rendered.status());
  out->rendered = std::move(*rendered);
  for (const std::string& w : out->rendered.warnings) std::fprintf(stderr, "tencache-launch: warning: %s\n", w.c_str());
  return 0;
}

std::string Header(const std::string& job_path, const K8sPlan& p) {
  const Candidate& c = p.chosen();
  return "# tencache-launch render " + job_path + ": " + std::to_string(c.nodes) + " x " + c.instance->type + " (" +
         std::to_string(c.ranks) + " ranks), namespace " + p.rendered.namespace_ + "\n";
}

}  // namespace

int RenderJob(const RenderOptions& o) {
  K8sPlan p;
  if (int code = PlanForK8s(o.job_path, o.overrides, o.catalog, o.name, &p); code != 0) return code;
  if (o.out.empty()) {
    std::cout << Header(o.job_path, p) << p.rendered.yaml;
    return 0;
  }
  std::error_code ec;
  fs::create_directories(o.out, ec);
  Status wrote = WriteFileAtomically((fs::path(o.out) / "manifests.yaml").string(), Header(o.job_path, p) + p.rendered.yaml);
  if (wrote.ok()) {
    wrote = WriteFileAtomically((fs::path(o.out) / "job.resolved.yaml").string(),
                                RenderResolvedJob(p.resolved, {"tencache-launch render: the job as planned (host paths)."}));
  }
  if (!wrote.ok()) {
    return Fail(wrote);
  }
  std::printf("%s/manifests.yaml: ConfigMap %s-job and MPIJob %s for %d x %s\n", o.out.c_str(),
              p.rendered.name.c_str(), p.rendered.name.c_str(), p.chosen().nodes, p.chosen().instance->type.c_str());
  return 0;
}

int LaunchK8s(const LaunchOptions& opt) {
  std::vector<std::string> overrides = opt.overrides;
  if (opt.steps >= 0) overrides.push_back("train.steps=" + std::to_string(opt.steps));
  if (!opt.namespace_.empty()) overrides.push_back("cluster.namespace=" + opt.namespace_);
  K8sPlan p;
  if (int code = PlanForK8s(opt.job_path, overrides, opt.catalog, "", &p); code != 0) return code;
  std::printf("%s\n", RenderPlanTable(p.plan, false).c_str());
  const fs::path out = !opt.out.empty() ? fs::path(opt.out) : fs::path("runs") / p.rendered.name;
  if (opt.dry_run) {
    std::printf("Dry run: nothing applied.\n\n%s%s", Header(opt.job_path, p).c_str(), p.rendered.yaml.c_str());
    return 0;
  }
  std::error_code ec;
  fs::create_directories(out, ec);
  const fs::path manifests = out / "manifests.yaml";
  for (const auto& [file, text] : std::vector<std::pair<fs::path, std::string>>{
           {manifests, Header(opt.job_path, p) + p.rendered.yaml},
           {out / "job.resolved.yaml", RenderResolvedJob(p.resolved, {"tencache-launch: the job as planned."})},
           {out / "plan.json", PlanToJson(p.plan, false).dump(2) + "\n"}}) {
    if (Status s = WriteFileAtomically(file.string(), text); !s.ok()) return Fail(s);
  }
  const nlohmann::ordered_json machine = {{"target", "k8s"},
                                          {"instance_type", p.chosen().instance->type},
                                          {"nodes", p.chosen().nodes},
                                          {"namespace", p.rendered.namespace_},
                                          {"mpijob", p.rendered.name}};
  if (Status s = WriteFileAtomically((out / "machine.json").string(), machine.dump(2) + "\n"); !s.ok()) return Fail(s);
  KubectlOptions k;
  k.kubectl = opt.kubectl;
  k.context = opt.context;
  k.namespace_ = p.rendered.namespace_;
  std::printf("Applying %s (MPIJob %s in namespace %s)\n", manifests.c_str(), p.rendered.name.c_str(),
              k.namespace_.c_str());
  if (Status s = ApplyManifests(k, manifests.string()); !s.ok()) return Fail(s);
  FollowOptions f;
  f.job_name = p.rendered.name;
  f.log_dir = (out / "logs").string();
  f.metrics_path = (out / "metrics.jsonl").string();
  f.total_steps = p.resolved.job.train.steps;
  f.progress_in_place = isatty(1);
  f.progress_every_s = opt.progress_every_s;
  StatusOr<RunOutcome> outcome = FollowK8sJob(k, f);
  if (!outcome.ok()) return Fail(outcome.status());
  const std::string status = outcome->exit_code == 0 ? "finished" : outcome->interrupted ? "interrupted" : "failed";
  nlohmann::ordered_json run_json = {{"status", status}, {"target", "k8s"}, {"mpijob", p.rendered.name},
                                     {"namespace", k.namespace_}, {"exit_code", outcome->exit_code},
                                     {"steps_done", outcome->steps_done}, {"failure", outcome->failure},
                                     {"last_stderr", outcome->last_stderr}, {"rank_hosts", RankHostsToJson(outcome->rank_hosts)}};
  std::ofstream(out / "run.json") << run_json.dump(2) << "\n";
  int code = outcome->steps_done > 0 ? WriteReport(out.string(), p.resolved.job, p.catalog, p.chosen(), machine,
                                                    status, {}, outcome->rank_hosts)
                                     : 0;
  if (outcome->interrupted) {
    std::fprintf(stderr, "tencache-launch: stopped following after %d step(s); the MPIJob %s keeps running "
                         "(tencache-launch delete %s stops it)\n", outcome->steps_done, p.rendered.name.c_str(),
                 p.rendered.name.c_str());
    return 130;
  }
  if (outcome->exit_code != 0) {
    std::fprintf(stderr, "tencache-launch: the MPIJob %s failed: %s\n", p.rendered.name.c_str(),
                 outcome->failure.c_str());
    for (const std::string& l : outcome->last_stderr) std::fprintf(stderr, "  %s\n", l.c_str());
    return 1;
  }
  return code;
}

}  // namespace tencache
