// LaunchK8s: `tencache-launch render` — the chosen plan of a job as the
// Kubernetes objects that run it (launcher/k8s_render.h), printed or written
// to a folder with the resolved job beside them — and a run on Kubernetes:
// render, apply, follow, report. Single-threaded.
#pragma once

#include <string>
#include <vector>

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
// `tencache-launch JOB.yaml` with cluster.target k8s: plan, resolve, render
// into the run folder, `kubectl apply`, follow the job (launcher/k8s_runner.h)
// with the same progress and report as a local run. Exit codes as LaunchRun's.
int LaunchK8s(const LaunchOptions& options);

}  // namespace tencache
