#include "scheduler/sim_cli.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <ostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "common/byte_size.h"
#include "common/cli.h"
#include "common/link.h"
#include "common/model_shape.h"
#include "scheduler/policies.h"

namespace tencache {

namespace {

std::array<double, kNumLinks> DefaultLinkGbps() {
  std::array<double, kNumLinks> gbps{};
  for (Link l : kLinks) gbps[int(l)] = LinkSpeeds().Bps(l) / 1e9;
  return gbps;
}

// A link's speed flag: --KEY-gbps with KEY its name, '-' for '_' (--nvme-read-gbps).
std::string LinkFlag(Link link) {
  std::string key = LinkName(link);
  std::replace(key.begin(), key.end(), '_', '-');
  return "--" + key + "-gbps";
}

// The flags that are not stored as they are written: rates in the units people
// write them (GB/s, TFLOP/s), the policy list and dtype as text. ApplyFlags turns
// them into SimCliOptions after parsing.
struct SimFlags {
  std::string policy = "all";
  std::string dtype = "bf16";
  double device_tflops = SynthOptions().device_flops / 1e12;
  double host_adam_rate = SynthOptions().host_adam_params_per_s;
  std::array<double, kNumLinks> link_gbps = DefaultLinkGbps();  // by Link
  double net_gbps = LinkSpeeds().collective_bps / 1e9;
  bool separate_pcie = false;
  double copy_latency_us = 0;
  std::string optimizer_overlap = "off";
};

// The policies of a --policy list, each checked ("all": every policy).
StatusOr<std::vector<std::string>> ParsePolicies(const std::string& list) {
  std::vector<std::string> names;
  std::stringstream in(list);
  for (std::string p; std::getline(in, p, ',');) {
    if (p == "all") {
      names = PolicyNames();
      continue;
    }
    TC_RETURN_IF_ERROR(MakePolicy(p).status());
    names.push_back(p);
  }
  if (names.empty()) return Status::InvalidArgument("got '" + list + "', expected a comma-separated list of policies");
  return names;
}

CLI::Validator PolicyList() {
  return CLI::Validator([](std::string& v) { return ParsePolicies(v).status().message(); }, "");
}

CLI::Validator PositiveNumber() {
  return CliCheck("a positive number", [](const std::string& v) {
    char* end = nullptr;
    const double d = std::strtod(v.c_str(), &end);
    return !v.empty() && *end == '\0' && d > 0 && d <= 1e30;
  });
}

CLI::Validator Count() { return CliWholeNumber(1, 1'000'000); }

void AddInputFlags(CLI::App& app, SimCliOptions& o, SimFlags& f) {
  app.add_option("--model", o.model, "synthesise the trace of a preset (tiny, gpt2, opt-6.7b, llama-2-7b, ...)")
      ->type_name("PRESET");
  app.add_option("--trace", o.trace_path, "read a JSON-lines trace (docs/trace-format.md)")->type_name("FILE");
  AddSizeOption(app, "--device-budget", &o.sim.budgets.device,
                "device memory that caches 16-bit parameter shards (\"24GiB\")")->required();
  AddSizeOption(app, "--host-budget", &o.sim.budgets.host, "pinned host memory (\"200GiB\")")->required();
  AddSizeOption(app, "--nvme-budget", &o.sim.budgets.nvme, "NVMe capacity (0: unlimited)", 0)
      ->default_str("unlimited");
  app.add_option("--policy", f.policy, "comma-separated: tencache, zero-infinity, 10cache-window, lru, belady; or all")
      ->type_name("LIST")->check(PolicyList());
  app.add_flag("--json", o.json, "one JSON object {\"results\": [...]} instead of a table");
  app.add_option("--steps", o.sim.steps, "steady-state steps to count after 2 warm-up steps")
      ->type_name("N")->transform(Count());
  app.add_option("--write-trace", o.write_trace, "also write the trace used to FILE")->type_name("FILE");
}

void AddModelFlags(CLI::App& app, SynthOptions& s, SimFlags& f) {
  const std::string group = "With --model";
  app.add_option("--dtype", f.dtype, "bf16, fp16 or fp32")->type_name("T")->check(CliOneOf({"bf16", "fp16", "fp32"}))
      ->group(group);
  app.add_option("--micro-batch", s.micro_batch, "sequences per rank per step")->type_name("N")->transform(Count())
      ->group(group);
  app.add_option("--seq-len", s.seq_len, "tokens per sequence (default: the preset's)")->type_name("N")
      ->transform(Count())->default_str("")->group(group);
  app.add_option("--ranks", s.ranks, "data-parallel ZeRO-3 ranks")->type_name("N")->transform(Count())->group(group);
  app.add_option("--device-tflops", f.device_tflops, "sustained device speed, TFLOP/s")->type_name("X")
      ->check(PositiveNumber())->group(group);
  app.add_option("--host-adam-rate", f.host_adam_rate, "host Adam updates, parameters per second")->type_name("X")
      ->check(PositiveNumber())->default_str("1000000000")->group(group);
  app.add_option("--optimizer-overlap", f.optimizer_overlap,
                 "on: every update runs on the optimizer lane beside the training thread (train.optimizer_overlap)")
      ->type_name("on|off")->check(CliOneOf({"on", "off"}))->group(group);
}

void AddLinkFlags(CLI::App& app, SimFlags& f) {
  const std::string group = "Links";
  auto gbps = [&](const std::string& name, double* value, const std::string& help) {
    app.add_option(name, *value, help)->type_name("GB/S")->check(PositiveNumber())->group(group);
  };
  for (Link l : kLinks) gbps(LinkFlag(l), &f.link_gbps[int(l)], std::string(NamesOf(l).path) + " GB/s");
  gbps("--net-gbps", &f.net_gbps, "collective bandwidth per rank, GB/s");
  app.add_flag("--separate-pcie", f.separate_pcie, "collectives do not share the PCIe lanes with host copies")
      ->group(group);
  app.add_option("--copy-latency-us", f.copy_latency_us, "fixed microseconds of every host<->device copy")
      ->type_name("US")->check(CLI::Range(0.0, 999'999.0))->group(group);
}

void AddZeroInfinityFlags(CLI::App& app, ZeroInfinityKnobs& k) {
  app.add_flag("--zero-infinity-pin-memory", k.pin_memory,
               "zero-infinity with offload_param.pin_memory: its copies do not hold the host thread (one rank)")
      ->group("Policies");
}

void ApplyFlags(const SimFlags& f, SimCliOptions* o) {
  o->policies = ParsePolicies(f.policy).value();  // checked while parsing
  o->synth.dtype = f.dtype == "fp16" ? DType::kFp16 : f.dtype == "fp32" ? DType::kFp32 : DType::kBf16;
  o->synth.device_flops = f.device_tflops * 1e12;
  o->synth.host_adam_params_per_s = f.host_adam_rate;
  o->synth.optimizer_lane = f.optimizer_overlap == "on";
  for (Link l : kLinks) o->sim.links.Bps(l) = f.link_gbps[int(l)] * 1e9;
  o->sim.links.collective_bps = o->synth.collective_bps = f.net_gbps * 1e9;
  o->sim.links.collectives_share_pcie = !f.separate_pcie;
  o->sim.copy_latency_s = f.copy_latency_us * 1e-6;
}

}  // namespace

int ParseSimArgs(const std::vector<std::string>& args, SimCliOptions* options, std::ostream& out,
                 std::ostream& err) {
  *options = SimCliOptions();
  SimFlags flags;
  std::unique_ptr<CLI::App> app = MakeCliApp(
      "tencache-sim", "Compares cache policies on a preset model (--model) or a recorded trace (--trace): hit "
                      "rates, bytes moved, stall and step time per steady-state step.");
  AddInputFlags(*app, *options, flags);
  AddModelFlags(*app, options->synth, flags);
  AddLinkFlags(*app, flags);
  AddZeroInfinityFlags(*app, options->zero_infinity);
  if (const int code = ParseCli(*app, args, out, err); code >= 0) return code;
  ApplyFlags(flags, options);
  if (options->model.empty() == options->trace_path.empty()) {
    err << "tencache-sim: expected exactly one of --model PRESET or --trace FILE; see tencache-sim --help\n";
    return 2;
  }
  return -1;
}

std::string FormatResultsJson(const std::vector<PolicyResult>& results) {
  nlohmann::json arr = nlohmann::json::array();
  for (const PolicyResult& r : results) {
    nlohmann::json o = {{"policy", r.policy},
                        {"device_hit_rate", r.device_hit_rate},
                        {"host_hit_rate", r.host_hit_rate},
                        {"stall_s", r.stall_s},
                        {"optimizer_wait_s", r.optimizer_wait_s},
                        {"step_time_s", r.step_time_s},
                        {"collective_delay_s", r.collective_delay_s},
                        {"lane_busy_s", r.lanes.ToJson()},
                        {"bound_lane", StepLaneName(r.lanes.Largest())},
                        {"overlap_efficiency", r.overlap_efficiency}};
    for (Link l : kLinks) o[std::string("bytes_") + LinkName(l)] = r.bytes[l];
    arr.push_back(o);
  }
  return nlohmann::json{{"results", arr}}.dump(2) + "\n";
}

std::string FormatResultsTable(const std::vector<PolicyResult>& results, bool optimizer_lane) {
  std::string out;
  char line[256], wait[32] = "";
  if (optimizer_lane) std::snprintf(wait, sizeof wait, " %10s", "OPT_WAIT_S");
  std::snprintf(line, sizeof line, "%-15s %9s %9s %11s %11s %11s %11s %10s%s %10s %8s %-11s\n", "POLICY",
                "DEV_HIT", "HOST_HIT", "H2D", "D2H", "NVME_READ", "NVME_WRITE", "STALL_S", wait, "STEP_S", "OVERLAP",
                "BOUND_LANE");
  out += line;
  for (const PolicyResult& r : results) {
    if (optimizer_lane) std::snprintf(wait, sizeof wait, " %10.4f", r.optimizer_wait_s);
    std::snprintf(line, sizeof line, "%-15s %8.2f%% %8.2f%% %11s %11s %11s %11s %10.4f%s %10.4f %8.3f %-11s\n",
                  r.policy.c_str(), 100 * r.device_hit_rate, 100 * r.host_hit_rate,
                  FormatBytes(r.bytes[Link::kH2D]).c_str(), FormatBytes(r.bytes[Link::kD2H]).c_str(),
                  FormatBytes(r.bytes[Link::kNvmeRead]).c_str(), FormatBytes(r.bytes[Link::kNvmeWrite]).c_str(),
                  r.stall_s, wait, r.step_time_s, r.overlap_efficiency, StepLaneName(r.lanes.Largest()));
    out += line;
  }
  out += "(per steady-state step, after 2 warm-up steps; hit rates over device accesses; OVERLAP: the busiest "
         "lane's time over the step time, BOUND_LANE that lane";
  out += optimizer_lane ? "; OPT_WAIT_S: the training thread's wait for the optimizer lane, in STEP_S)\n" : ")\n";
  return out;
}

StatusOr<std::string> RunSim(const SimCliOptions& o) {
  Trace trace;
  if (!o.trace_path.empty()) {
    TC_ASSIGN_OR_RETURN(trace, ReadTraceFile(o.trace_path));
  } else {
    StatusOr<ModelShape> shape = FindPreset(o.model);
    if (!shape.ok()) return shape.status().WithContext("--model");
    StatusOr<Trace> made = SynthesizeTrace(*shape, o.synth);
    if (!made.ok()) return made.status().WithContext("--model " + o.model);
    trace = std::move(made).value();
  }
  if (!o.write_trace.empty()) TC_RETURN_IF_ERROR(WriteTraceFile(trace, o.write_trace));
  StatusOr<CacheSimulator> sim = CacheSimulator::Create(trace, o.sim);
  if (!sim.ok()) {  // budgets too small for the model are the user's input too
    return Status::InvalidArgument("--device-budget/--host-budget/--nvme-budget: " +
                                   sim.status().message());
  }
  std::vector<PolicyResult> results;
  for (const std::string& name : o.policies) {
    std::unique_ptr<SimPolicy> policy;
    if (name == "zero-infinity") {
      policy = MakeZeroInfinityPolicy(o.zero_infinity);
    } else {
      TC_ASSIGN_OR_RETURN(policy, MakePolicy(name));
    }
    results.push_back(sim->Run(*policy));
  }
  if (o.json) return FormatResultsJson(results);
  const bool lane = std::any_of(trace.events.begin(), trace.events.end(),
                                [](const TraceEvent& e) { return e.optimizer_lane; });
  return FormatResultsTable(results, lane) + "NVMe traffic: the " + sim->host().Describe() + "\n";
}

int SimMain(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  SimCliOptions options;
  if (const int code = ParseSimArgs(args, &options, out, err); code >= 0) return code;
  StatusOr<std::string> text = RunSim(options);
  if (!text.ok()) {
    err << "tencache-sim: " << text.status().message() << "\n";
    return ExitCodeFor(text.status());
  }
  out << *text;
  return 0;
}

}  // namespace tencache
