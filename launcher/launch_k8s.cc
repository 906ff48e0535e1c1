#include "launcher/launch_k8s.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include <unistd.h>

#include "common/job_spec.h"
#include "common/text_file.h"
#include "launcher/catalog.h"
#include "launcher/exit_code.h"
#include "launcher/k8s_pod_sizing.h"
#include "launcher/k8s_render.h"
#include "launcher/k8s_runner.h"
#include "launcher/launch_run.h"
#include "launcher/planner.h"

namespace tencache {
namespace {

namespace fs = std::filesystem;

// The run folder's manifests: the first attempt's, and the ones a restart
// applies when it resumes.
constexpr char kManifests[] = "manifests.yaml";
constexpr char kResumeManifests[] = "manifests.resume.yaml";

// A job planned for Kubernetes; plan.chosen < 0 when no instance type is feasible.
struct K8sPlan {
  JobSpec job;
  Catalog catalog;
  PlanResult plan;
  const Candidate& chosen() const { return plan.candidates[plan.chosen]; }
};

// REQUIRES: `out` outlives nothing planned before (the plan points into out->catalog).
// `resume`: --resume. Restarts and --resume read the pods' checkpoints back,
// which only cluster.checkpoint_claim keeps (an emptyDir goes with the pod).
Status PlanForK8s(const std::string& job_path, const std::vector<std::string>& overrides,
                  const std::string& catalog_flag, bool resume, K8sPlan* out) {
  TC_ASSIGN_OR_RETURN(out->job, LoadJobFile(job_path, overrides));
  if (out->job.cluster.k8s.checkpoint_claim.empty()) {
    if (out->job.cluster.max_restarts > 0) {
      return Status::InvalidArgument(out->job.Where("cluster.max_restarts") + ": a restart resumes from the "
                                     "checkpoints, and without cluster.checkpoint_claim they are in an emptyDir "
                                     "that goes with the pod; name a PersistentVolumeClaim (ReadWriteMany for more "
                                     "than one node) in cluster.checkpoint_claim, or set cluster.max_restarts to 0");
    }
    if (resume) {
      return Status::InvalidArgument("--resume: " + out->job.Where("cluster.checkpoint_claim") + " is not set, "
                                     "so the pods' checkpoints were in an emptyDir, gone with the pods; a "
                                     "Kubernetes run resumes from the claim's");
    }
  }
  TC_ASSIGN_OR_RETURN(out->catalog, Catalog::Load(CatalogPathFor(catalog_flag, out->job.cluster.catalog)));
  TC_ASSIGN_OR_RETURN(out->plan, PlanJob(out->job, out->catalog, ModelAssumptions()));
  return Status::Ok();
}

StatusOr<std::string> MpiJobName(const JobSpec& job, const std::string& name_flag) {
  return name_flag.empty() ? SubmissionName(job.name, SubmissionSuffix()) : StatusOr<std::string>(name_flag);
}

// The chosen candidate's objects; prints what a cluster admin should hear.
StatusOr<RenderedJob> Render(const ResolvedJob& resolved, const Candidate& chosen, const std::string& name,
                             bool resume = false) {
  TC_ASSIGN_OR_RETURN(RenderedJob rendered, RenderK8sJob(resolved, chosen, name, resume));
  for (const std::string& w : rendered.warnings) std::fprintf(stderr, "tencache-launch: warning: %s\n", w.c_str());
  return rendered;
}

std::string Header(const std::string& job_path, const Candidate& c, const RenderedJob& r, bool resume = false) {
  return "# tencache-launch render " + job_path + ": " + std::to_string(c.nodes) + " x " + c.instance->type + " (" +
         std::to_string(c.ranks) + " ranks), namespace " + r.namespace_ +
         (resume ? "; the ranks resume from the newest complete checkpoint" : "") + "\n";
}


// cluster.target k8s: a Kubeflow MPIJob applied through kubectl and followed
// (launcher/k8s_runner.h).
class MpiJobRunner : public Runner {
 public:
  explicit MpiJobRunner(const LaunchOptions& opt) : opt_(opt) {}

  StatusOr<PlannedRun> Plan() override {
    if (!opt_.resume_from.empty()) {
      return Status::InvalidArgument("--resume " + opt_.resume_from + ": a Kubernetes run resumes from the "
                                     "checkpoints on cluster.checkpoint_claim (train.checkpoint_dir there is "
                                     "the job's own folder), not from a run folder; use --resume alone");
    }
    std::vector<std::string> overrides = opt_.overrides;
    if (opt_.steps >= 0) overrides.push_back("train.steps=" + std::to_string(opt_.steps));
    if (!opt_.namespace_.empty()) overrides.push_back("cluster.namespace=" + opt_.namespace_);
    TC_RETURN_IF_ERROR(PlanForK8s(opt_.job_path, overrides, opt_.catalog, opt_.resume, &p_));
    PlannedRun run;
    run.job = p_.job;
    run.catalog = &p_.catalog;
    run.plan = p_.plan;
    run.chosen = p_.plan.chosen;
    if (run.chosen < 0) return run;
    TC_ASSIGN_OR_RETURN(name_, MpiJobName(p_.job, ""));
    run.out = (!opt_.out.empty() ? fs::path(opt_.out) : fs::path("runs") / name_).string();
    return run;
  }

  StatusOr<RunFiles> Prepare(const PlannedRun& run, const ResolvedJob& resolved) override {
    resolved_ = resolved;
    const Candidate& c = run.candidate();
    TC_ASSIGN_OR_RETURN(rendered_, Render(resolved, c, name_, opt_.resume));
    machine_ = {{"target", "k8s"},
                {"instance_type", c.instance->type},
                {"nodes", c.nodes},
                {"namespace", rendered_.namespace_},
                {"mpijob", rendered_.name}};
    return RunFiles{{kManifests, Header(opt_.job_path, c, rendered_, opt_.resume) + rendered_.yaml},
                    {"job.resolved.yaml", RenderResolvedJob(resolved, {"tencache-launch: the job as planned."})},
                    {"plan.json", PlanToJson(run.plan, false).dump(2) + "\n"},
                    {"machine.json", machine_.dump(2) + "\n"}};
  }

  std::string DryRun(const PlannedRun& run, const RunFiles&) override {
    return "Dry run: nothing applied.\n\n" + Header(opt_.job_path, run.candidate(), rendered_, opt_.resume) +
           rendered_.yaml;
  }

  Status Start(const PlannedRun& run) override {
    kubectl_.kubectl = opt_.kubectl;
    kubectl_.context = opt_.context;
    kubectl_.namespace_ = rendered_.namespace_;
    const std::string manifests = (fs::path(run.out) / manifests_).string();
    std::printf("Applying %s (MPIJob %s in namespace %s)\n", manifests.c_str(), rendered_.name.c_str(),
                kubectl_.namespace_.c_str());
    return ApplyManifests(kubectl_, manifests);
  }

  StatusOr<RunOutcome> Follow(const PlannedRun& run) override {
    FollowOptions f;
    f.job_name = rendered_.name;
    f.log_dir = (fs::path(run.out) / "logs").string();
    f.metrics_path = (fs::path(run.out) / "metrics.jsonl").string();
    f.total_steps = resolved_.job.train.steps;
    f.progress_in_place = isatty(1);
    f.progress_every_s = opt_.progress_every_s;
    StatusOr<RunOutcome> o = FollowK8sJob(kubectl_, f);
    if (o.ok()) checkpoint_step_ = std::max(checkpoint_step_, o->checkpoint_step);
    return o;
  }

  Candidate Predicted(const PlannedRun& run, const ResolvedJob&) override { return run.candidate(); }

  // The failed MPIJob is deleted (its pods with it) and applied again under
  // the same name: resuming (manifests.resume.yaml) from the newest checkpoint
  // the ranks said they committed or resumed from in any attempt; afresh
  // (manifests.yaml) where they said none. The launcher cannot read the claim:
  // a checkpoint committed after the last line its log delivered is newer than
  // the step returned, and the ranks resume from it all the same.
  StatusOr<RestartPlan> PrepareRestart(PlannedRun* planned, ResolvedJob*, const RunOutcome&) override {
    const PlannedRun& run = *planned;
    const double grace_s = TerminationGrace(resolved_.job, run.candidate()).seconds;
    std::printf("Deleting the MPIJob %s and its pods (to apply it again)\n", rendered_.name.c_str());
    std::fflush(stdout);
    TC_RETURN_IF_ERROR(DeleteForRestart(kubectl_, rendered_.name, grace_s + kDeleteSlackS));
    if (checkpoint_step_ <= 0) {
      manifests_ = kManifests;
      return RestartPlan{};
    }
    if (!opt_.resume) {
      TC_ASSIGN_OR_RETURN(const RenderedJob resumed, RenderK8sJob(resolved_, run.candidate(), name_, true));
      TC_RETURN_IF_ERROR(RunFolder(run.out).Write(
          kResumeManifests, Header(opt_.job_path, run.candidate(), resumed, true) + resumed.yaml));
      manifests_ = kResumeManifests;
    }
    return RestartPlan{checkpoint_step_, ""};
  }

  void RunFields(const PlannedRun&, const RunOutcome&, nlohmann::ordered_json* run_json) override {
    (*run_json)["mpijob"] = rendered_.name;
    (*run_json)["namespace"] = kubectl_.namespace_;
  }

  void ExplainEnd(const PlannedRun&, const RunOutcome& outcome) override {
    if (outcome.interrupted) {
      std::fprintf(stderr, "tencache-launch: stopped following after %d step(s); the MPIJob %s keeps running "
                           "(tencache-launch delete %s stops it)\n", outcome.steps_done, rendered_.name.c_str(),
                   rendered_.name.c_str());
    } else if (outcome.exit_code != 0) {
      std::fprintf(stderr, "tencache-launch: the MPIJob %s failed: %s\n", rendered_.name.c_str(),
                   outcome.failure.c_str());
      for (const std::string& l : outcome.last_stderr) std::fprintf(stderr, "  %s\n", l.c_str());
    }
  }

 private:
  const LaunchOptions& opt_;
  K8sPlan p_;
  std::string name_;
  ResolvedJob resolved_;
  RenderedJob rendered_;
  nlohmann::ordered_json machine_;
  KubectlOptions kubectl_;
  std::string manifests_ = kManifests;  // what Start applies, in the run folder
  int64_t checkpoint_step_ = -1;               // the newest checkpoint any attempt's ranks said; -1: none
  // Beyond the pods' grace period, for the API server and the kubelets to remove them.
  static constexpr double kDeleteSlackS = 120;
};

}  // namespace

int RenderJob(const RenderOptions& o) {
  K8sPlan p;
  if (Status s = PlanForK8s(o.job_path, o.overrides, o.catalog, /*resume=*/false, &p); !s.ok()) return FailCommand(s);
  if (p.plan.chosen < 0) return FailNoFeasiblePlan(o.job_path);
  StatusOr<ResolvedJob> resolved = ResolveJob(p.job, p.chosen());
  if (!resolved.ok()) return FailCommand(resolved.status());
  StatusOr<std::string> name = MpiJobName(p.job, o.name);
  if (!name.ok()) return FailCommand(name.status());
  StatusOr<RenderedJob> rendered = Render(*resolved, p.chosen(), *name);
  if (!rendered.ok()) return FailCommand(rendered.status());
  const std::string header = Header(o.job_path, p.chosen(), *rendered);
  if (o.out.empty()) {
    std::cout << header << rendered->yaml;
    return kExitOk;
  }
  const RunFolder folder(o.out);
  Status wrote = folder.Create();
  if (wrote.ok()) wrote = folder.Write(kManifests, header + rendered->yaml);
  if (wrote.ok()) {
    wrote = folder.Write("job.resolved.yaml",
                         RenderResolvedJob(*resolved, {"tencache-launch render: the job as planned (host paths)."}));
  }
  if (!wrote.ok()) return FailCommand(wrote);
  std::printf("%s/manifests.yaml: ConfigMap %s-job and MPIJob %s for %d x %s\n", o.out.c_str(),
              rendered->name.c_str(), rendered->name.c_str(), p.chosen().nodes, p.chosen().instance->type.c_str());
  return kExitOk;
}

std::unique_ptr<Runner> MakeMpiJobRunner(const LaunchOptions& options) {
  return std::make_unique<MpiJobRunner>(options);
}

}  // namespace tencache
