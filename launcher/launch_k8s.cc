#include "launcher/launch_k8s.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "common/job_spec.h"
#include "launcher/catalog.h"
#include "launcher/k8s_render.h"
#include "launcher/planner.h"
#include "launcher/resolved_job.h"

namespace tencache {
namespace {

namespace fs = std::filesystem;

int Fail(const Status& s) {
  std::fprintf(stderr, "tencache-launch: %s\n", s.message().c_str());
  return ExitCodeFor(s);
}

}  // namespace

int RenderJob(const RenderOptions& o) {
  StatusOr<JobSpec> job = LoadJobFile(o.job_path, o.overrides);
  if (!job.ok()) return Fail(job.status());
  StatusOr<Catalog> catalog = Catalog::Load(!o.catalog.empty() ? o.catalog
                                            : !job->cluster.catalog.empty() ? job->cluster.catalog
                                                                            : DefaultCatalogPath());
  if (!catalog.ok()) return Fail(catalog.status());
  StatusOr<PlanResult> plan = PlanJob(*job, *catalog, ModelAssumptions());
  if (!plan.ok()) return Fail(plan.status());
  if (plan->chosen < 0) {
    std::fprintf(stderr, "tencache-launch: no feasible plan for %s; `tencache-launch plan %s` lists each instance "
                         "type's reason\n", o.job_path.c_str(), o.job_path.c_str());
    return 3;
  }
  const Candidate& chosen = plan->candidates[plan->chosen];
  StatusOr<ResolvedJob> resolved = ResolveJob(*job, chosen);
  if (!resolved.ok()) return Fail(resolved.status());
  StatusOr<std::string> name = o.name.empty() ? SubmissionName(job->name, SubmissionSuffix()) : StatusOr<std::string>(o.name);
  if (!name.ok()) return Fail(name.status());
  StatusOr<RenderedJob> rendered = RenderK8sJob(*resolved, chosen, *name);
  if (!rendered.ok()) return Fail(rendered.status());
  const std::string header = "# tencache-launch render " + o.job_path + ": " + std::to_string(chosen.nodes) + " x " +
                             chosen.instance->type + " (" + std::to_string(chosen.ranks) + " ranks), namespace " +
                             rendered->namespace_ + "\n";
  if (o.out.empty()) {
    std::cout << header << rendered->yaml;
    return 0;
  }
  std::error_code ec;
  fs::create_directories(o.out, ec);
  std::ofstream(fs::path(o.out) / "manifests.yaml") << header << rendered->yaml;
  std::ofstream(fs::path(o.out) / "job.resolved.yaml")
      << RenderResolvedJob(*resolved, {"tencache-launch render: the job as planned (host paths)."});
  if (!fs::exists(fs::path(o.out) / "manifests.yaml")) {
    return Fail(Status::IoError(o.out + ": cannot write manifests.yaml"));
  }
  std::printf("%s/manifests.yaml: ConfigMap %s-job and MPIJob %s for %d x %s\n", o.out.c_str(),
              rendered->name.c_str(), rendered->name.c_str(), chosen.nodes, chosen.instance->type.c_str());
  return 0;
}

}  // namespace tencache
