#include "launcher/report_writer.h"

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "launcher/exit_code.h"
#include "launcher/local_machine.h"
#include "launcher/report_nodes.h"
#include "launcher/report_render.h"
#include "launcher/run_recovery.h"
#include "launcher/run_report.h"

namespace tencache {

namespace {

namespace fs = std::filesystem;

// The JSON objects of a metrics.jsonl, one a line; a line that is not one (a
// line cut short when the run stopped) is left out.
std::vector<nlohmann::json> ReadMetrics(const std::string& path) {
  std::vector<nlohmann::json> lines;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_discarded() && j.is_object()) lines.push_back(j);
  }
  return lines;
}

}  // namespace

int WriteReport(const RunFolder& folder, const JobSpec& job, const Catalog& catalog, const Candidate& predicted,
                const nlohmann::ordered_json& machine, const std::string& status,
                const std::vector<std::string>& notes, const std::map<int, std::string>& rank_hosts,
                const nlohmann::ordered_json& attempts) {
  ReportInputs in;
  in.job = &job;
  in.catalog = &catalog;
  in.predicted = &predicted;
  in.metrics = ReadMetrics(folder.Path("metrics.jsonl"));
  in.status = status;
  in.machine = machine;
  in.assumptions = notes;
  std::string this_host;
  if (machine.contains("facts") && machine["facts"].is_object()) this_host = machine["facts"].value("hostname", "");
  in.rank_hosts = RankHosts(job, rank_hosts, this_host);
  StatusOr<RunReport> report = BuildReport(in);
  if (!report.ok()) {
    std::fprintf(stderr, "tencache-launch: no report for %s: %s\n", folder.dir().c_str(),
                 report.status().message().c_str());
    return kExitFailed;
  }
  report->attempts = attempts;
  report->spot = SpotAgainstAttempts(predicted.spot_estimate, job.cluster.use_spot, predicted.nodes, attempts);
  if (Status s = folder.Write("report.json", report->ToJson().dump(2) + "\n"); !s.ok()) return FailCommand(s);
  std::string summary;
  std::vector<std::string> warnings;
  Status rendered = RenderReport(folder.dir(), &summary, &warnings);
  for (const std::string& w : warnings) std::fprintf(stderr, "tencache-launch: report: %s\n", w.c_str());
  if (!rendered.ok()) {
    std::fprintf(stderr, "tencache-launch: report: %s\n", rendered.message().c_str());
    // A picture gnuplot could not draw leaves report.md (which says so) and report.json standing.
    std::error_code ec;
    if (rendered.code() != StatusCode::kInternal || !fs::exists(folder.Path("report.md"), ec)) return kExitFailed;
  }
  std::printf("\n%s\nReport: %s/report.md (report.json, pictures beside it)\n", summary.c_str(),
              folder.dir().c_str());
  return 0;
}

int RebuildReport(const std::string& dir_arg, const std::string& catalog_flag) {
  const RunFolder folder(dir_arg);
  const std::string machine_file = folder.Path("machine.json");
  StatusOr<JobSpec> job = LoadJobFile(folder.Path("job.resolved.yaml"));
  if (!job.ok()) return FailCommand(job.status().WithContext(dir_arg + ": not a tencache-launch run folder"));
  StatusOr<Catalog> catalog = Catalog::Load(CatalogPathFor(catalog_flag, job->cluster.catalog));
  if (!catalog.ok()) return FailCommand(catalog.status());
  std::ifstream in(machine_file);
  nlohmann::json m = nlohmann::json::parse(in, nullptr, false);
  if (m.is_discarded() || !m.is_object()) {
    return FailCommand(Status::InvalidArgument(machine_file + ": missing or not JSON"));
  }
  std::string status = "interrupted";
  std::ifstream run_in(folder.Path("run.json"));
  nlohmann::json run = nlohmann::json::parse(run_in, nullptr, false);
  std::map<int, std::string> rank_hosts;
  nlohmann::ordered_json attempts;  // null: none recorded
  if (!run.is_discarded() && run.is_object()) {
    status = run.value("status", status);
    if (run.contains("rank_hosts")) rank_hosts = RankHostsFromJson(run["rank_hosts"]);
    if (run.contains("attempts") && run["attempts"].is_array()) attempts = run["attempts"];
  }
  if (m.value("target", "") == "k8s") {  // predicted: the plan's instance type, as run
    JobSpec planned = *job;
    planned.cluster.instance_types = {m.value("instance_type", "")};
    StatusOr<PlanResult> plan = PlanJob(planned, *catalog, ModelAssumptions());
    if (!plan.ok()) return FailCommand(plan.status());
    if (plan->chosen < 0) {
      return FailCommand(Status::InvalidArgument(dir_arg + ": the run's instance type is no longer feasible"));
    }
    return WriteReport(folder, *job, *catalog, plan->candidates[plan->chosen], m, status, {}, rank_hosts, attempts);
  }
  if (job->cluster.target == Target::kHosts && m.contains("instance_type")) {  // described by the catalog
    StatusOr<LocalCandidate> local = MakeCatalogHostsCandidate(*job, *catalog);
    if (!local.ok()) return FailCommand(local.status());
    const Candidate predicted = EvaluateCandidate(*job, local->instance, local->gpu, local->nodes, local->assumptions);
    return WriteReport(folder, *job, *catalog, predicted, m, status, local->notes, rank_hosts, attempts);
  }
  MachineFacts facts;
  LocalProbes probes;
  int ranks = 1, mb = 1;
  try {
    StatusOr<MachineFacts> read_facts = MachineFacts::FromJson(m.at("facts"));
    if (!read_facts.ok()) return FailCommand(read_facts.status().WithContext(machine_file));
    facts = *read_facts;
    ranks = m.at("ranks").get<int>();
    mb = m.at("probe_micro_batch").get<int>();
    StatusOr<LocalProbes> read = LocalProbes::FromJson(m.at("probes"));
    if (!read.ok()) return FailCommand(read.status().WithContext(machine_file));
    probes = *read;
  } catch (const nlohmann::json::exception& e) {
    return FailCommand(Status::InvalidArgument(machine_file + ": " + e.what()));
  }
  JobSpec probed = *job;
  probed.train.micro_batch = mb;
  const int nodes = job->cluster.target == Target::kHosts ? job->cluster.nodes : 1;
  const LocalCandidate local = MakeLocalCandidate(probed, facts, probes, ranks, nodes);
  const Candidate predicted = EvaluateCandidate(*job, local.instance, local.gpu, local.nodes, local.assumptions);
  return WriteReport(folder, *job, *catalog, predicted, m, status, local.notes, rank_hosts, attempts);
}

}  // namespace tencache
