// tencache-launch: the user's entry point. `plan` prints what a job needs and
// costs on every candidate instance type and picks the cheapest feasible plan.
// This file is the CLI edge: it parses flags, converts every failure into one
// message on stderr and an exit code (2 for bad input), and nothing else.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "common/job_spec.h"
#include "launcher/catalog.h"
#include "launcher/planner.h"

namespace tencache {
namespace {

const char kUsage[] =
    "usage: tencache-launch plan JOB.yaml [--set KEY=VALUE]... [--json] [--all-nodes] [--catalog PATH]\n"
    "\n"
    "  plan        print per-rank memory, placement, step time and cost per epoch for every\n"
    "              candidate instance type, and choose the cheapest (or fastest) feasible plan\n"
    "  --set K=V   override one job key, e.g. --set train.micro_batch=2 (repeatable)\n"
    "  --json      print one JSON object instead of the table\n"
    "  --all-nodes list every node count, not only the best per instance type\n"
    "  --catalog   instance catalog directory or file (default: cluster.catalog, else the\n"
    "              catalog shipped in configs/instances)\n";

struct PlanArgs {
  std::string job_path;
  std::vector<std::string> overrides;
  bool json = false;
  bool all_nodes = false;
  std::string catalog;
};

Status ParsePlanArgs(int argc, char** argv, PlanArgs* args) {
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const char* flag, std::string* out) -> Status {
      if (i + 1 >= argc) return Status::InvalidArgument(std::string(flag) + ": expected a value after it");
      *out = argv[++i];
      return Status::Ok();
    };
    if (a == "--json") {
      args->json = true;
    } else if (a == "--all-nodes") {
      args->all_nodes = true;
    } else if (a == "--set") {
      std::string kv;
      TC_RETURN_IF_ERROR(value("--set", &kv));
      args->overrides.push_back(kv);
    } else if (a.rfind("--set=", 0) == 0) {
      args->overrides.push_back(a.substr(6));
    } else if (a == "--catalog") {
      TC_RETURN_IF_ERROR(value("--catalog", &args->catalog));
    } else if (a.rfind("--", 0) == 0) {
      return Status::InvalidArgument("unknown flag '" + a + "'; expected --set, --json, --all-nodes or --catalog");
    } else if (args->job_path.empty()) {
      args->job_path = a;
    } else {
      return Status::InvalidArgument("unexpected argument '" + a + "'; expected one JOB.yaml");
    }
  }
  if (args->job_path.empty()) return Status::InvalidArgument("plan: expected a JOB.yaml path");
  return Status::Ok();
}

Status RunPlan(int argc, char** argv) {
  PlanArgs args;
  TC_RETURN_IF_ERROR(ParsePlanArgs(argc, argv, &args));
  const auto start = std::chrono::steady_clock::now();
  TC_ASSIGN_OR_RETURN(JobSpec job, LoadJobFile(args.job_path, args.overrides));
  std::string catalog_path = !args.catalog.empty() ? args.catalog
                             : !job.cluster.catalog.empty() ? job.cluster.catalog
                                                            : DefaultCatalogPath();
  TC_ASSIGN_OR_RETURN(Catalog catalog, Catalog::Load(catalog_path));
  TC_ASSIGN_OR_RETURN(PlanResult plan, PlanJob(job, catalog, ModelAssumptions()));
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (args.json) {
    nlohmann::ordered_json j = PlanToJson(plan, args.all_nodes);
    j["planning_ms"] = ms;
    std::cout << j.dump(2) << "\n";
  } else {
    std::cout << RenderPlanTable(plan, args.all_nodes);
    std::printf("Planned %zu instance x node combinations in %.1f ms.\n", plan.evaluated.size(), ms);
  }
  return Status::Ok();
}

int Main(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0) {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  const std::string command = argv[1];
  Status status;
  if (command == "plan") {
    status = RunPlan(argc, argv);
  } else {
    status = Status::InvalidArgument("unknown command '" + command + "'; expected: plan");
  }
  if (!status.ok()) {
    std::fprintf(stderr, "tencache-launch: %s\n", status.message().c_str());
    if (ExitCodeFor(status) == 2 && command != "plan") std::fputs(kUsage, stderr);
  }
  return ExitCodeFor(status);
}

}  // namespace
}  // namespace tencache

int main(int argc, char** argv) { return tencache::Main(argc, argv); }
