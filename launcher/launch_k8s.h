// Kubernetes launches: `tencache-launch render` — the chosen plan of a job as the
// Kubernetes objects that run it (launcher/k8s_render.h), printed or written
// to a folder with the resolved job beside them — and the runner of a run on
// Kubernetes (launcher/run_pipeline.h): plan, resolve, render into the run
// folder, `kubectl apply`, follow. Single-threaded.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "launcher/run_pipeline.h"

namespace tencache {

struct RenderOptions {
  std::string job_path;
  std::vector<std::string> overrides;  // --set KEY=VALUE
  std::string catalog;                 // --catalog
  std::string out;                     // "": print to stdout; else write OUT/manifests.yaml, OUT/job.resolved.yaml
  std::string name;                    // "": the job's name plus a suffix unique to this submission
};

// Exit code: 0, 2 for bad input (named), 3 when no instance type is feasible.
int RenderJob(const RenderOptions& options);

struct LaunchOptions;
// The runner of cluster.target k8s: the job loaded from options.job_path
// (with --set, --steps and --namespace), rendered as a Kubeflow MPIJob into
// the run folder (manifests.yaml beside job.resolved.yaml), applied, and
// followed (launcher/k8s_runner.h) with the same progress and report as a
// local run. `options` must outlive it.
std::unique_ptr<Runner> MakeMpiJobRunner(const LaunchOptions& options);

}  // namespace tencache
