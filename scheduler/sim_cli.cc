#include "scheduler/sim_cli.h"

#include <cstdio>
#include <functional>
#include <map>
#include <ostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "common/byte_size.h"
#include "common/model_shape.h"
#include "common/suggest.h"
#include "scheduler/policies.h"

namespace tencache {

std::string SimUsage() {
  return R"(usage: tencache-sim (--model PRESET | --trace FILE) --device-budget SIZE --host-budget SIZE
                    [--nvme-budget SIZE] [--policy LIST] [--json] [options]
  --model PRESET         synthesise the trace of a preset (tiny, gpt2, opt-6.7b, llama-2-7b, ...)
  --trace FILE           read a JSON-lines trace (docs/trace-format.md)
  --device-budget SIZE   device memory for 16-bit parameters and gradient staging ("24GiB")
  --host-budget SIZE     pinned host memory ("200GiB")
  --nvme-budget SIZE     NVMe capacity (default: unlimited)
  --policy LIST          comma-separated: tencache, zero-infinity, 10cache-window, lru, belady
                         (default: all)
  --json                 one JSON object {"results": [...]} instead of a table
  --dtype T              bf16 | fp16 | fp32 (default bf16)          [--model only]
  --micro-batch N        sequences per rank per step (default 1)    [--model only]
  --seq-len N            tokens per sequence (default: the preset's) [--model only]
  --ranks N              data-parallel ZeRO-3 ranks (default 1)     [--model only]
  --device-tflops X      sustained device speed, TFLOP/s (default 250) [--model only]
  --host-adam-rate X     host Adam updates, parameters/s (default 1e9) [--model only]
  --h2d-gbps X           host->device GB/s (default 25)
  --d2h-gbps X           device->host GB/s (default 25)
  --nvme-read-gbps X     NVMe->host GB/s (default 3)
  --nvme-write-gbps X    host->NVMe GB/s (default 2)
  --net-gbps X           collective bandwidth per rank, GB/s (default 12.5)
  --separate-pcie        collectives do not share the PCIe lanes with host copies
  --steps N              steady-state steps to count after 2 warm-up steps (default 2)
  --write-trace FILE     also write the trace used to FILE
)";
}

namespace {

Status BadValue(const std::string& flag, const std::string& value, const std::string& expected) {
  return Status::InvalidArgument(flag + ": got '" + value + "', expected " + expected);
}

StatusOr<double> ParsePositive(const std::string& flag, const std::string& v) {
  char* end = nullptr;
  const double d = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0' || !(d > 0) || d > 1e30) {
    return BadValue(flag, v, "a positive number");
  }
  return d;
}

StatusOr<int> ParseCount(const std::string& flag, const std::string& v) {
  char* end = nullptr;
  const long n = std::strtol(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || n <= 0 || n > 1'000'000) {
    return BadValue(flag, v, "a positive integer");
  }
  return int(n);
}

StatusOr<uint64_t> ParseSize(const std::string& flag, const std::string& v) {
  StatusOr<uint64_t> s = ParseByteSize(v);
  if (!s.ok()) return s.status().WithContext(flag);
  return s;
}

using Setter = std::function<Status(SimCliOptions&, const std::string&)>;

const std::map<std::string, Setter>& ValueFlags() {
  static const auto* flags = new std::map<std::string, Setter>{
      {"--model", [](SimCliOptions& o, const std::string& v) { o.model = v; return Status::Ok(); }},
      {"--trace", [](SimCliOptions& o, const std::string& v) { o.trace_path = v; return Status::Ok(); }},
      {"--write-trace", [](SimCliOptions& o, const std::string& v) { o.write_trace = v; return Status::Ok(); }},
      {"--device-budget", [](SimCliOptions& o, const std::string& v) -> Status {
         TC_ASSIGN_OR_RETURN(o.sim.budgets.device, ParseSize("--device-budget", v)); return Status::Ok(); }},
      {"--host-budget", [](SimCliOptions& o, const std::string& v) -> Status {
         TC_ASSIGN_OR_RETURN(o.sim.budgets.host, ParseSize("--host-budget", v)); return Status::Ok(); }},
      {"--nvme-budget", [](SimCliOptions& o, const std::string& v) -> Status {
         TC_ASSIGN_OR_RETURN(o.sim.budgets.nvme, ParseSize("--nvme-budget", v)); return Status::Ok(); }},
      {"--policy", [](SimCliOptions& o, const std::string& v) -> Status {
         o.policies.clear();
         std::stringstream in(v);
         for (std::string p; std::getline(in, p, ',');) {
           if (p == "all") { o.policies = PolicyNames(); continue; }
           StatusOr<std::unique_ptr<SimPolicy>> made = MakePolicy(p);
           if (!made.ok()) return made.status().WithContext("--policy");
           o.policies.push_back(p);
         }
         if (o.policies.empty()) return BadValue("--policy", v, "a comma-separated list of policies");
         return Status::Ok(); }},
      {"--dtype", [](SimCliOptions& o, const std::string& v) -> Status {
         if (v == "bf16") o.synth.dtype = DType::kBf16;
         else if (v == "fp16") o.synth.dtype = DType::kFp16;
         else if (v == "fp32") o.synth.dtype = DType::kFp32;
         else return BadValue("--dtype", v, "bf16, fp16 or fp32");
         return Status::Ok(); }},
      {"--micro-batch", [](SimCliOptions& o, const std::string& v) -> Status {
         TC_ASSIGN_OR_RETURN(o.synth.micro_batch, ParseCount("--micro-batch", v)); return Status::Ok(); }},
      {"--seq-len", [](SimCliOptions& o, const std::string& v) -> Status {
         TC_ASSIGN_OR_RETURN(o.synth.seq_len, ParseCount("--seq-len", v)); return Status::Ok(); }},
      {"--ranks", [](SimCliOptions& o, const std::string& v) -> Status {
         TC_ASSIGN_OR_RETURN(o.synth.ranks, ParseCount("--ranks", v)); return Status::Ok(); }},
      {"--steps", [](SimCliOptions& o, const std::string& v) -> Status {
         TC_ASSIGN_OR_RETURN(o.sim.steps, ParseCount("--steps", v)); return Status::Ok(); }},
      {"--device-tflops", [](SimCliOptions& o, const std::string& v) -> Status {
         TC_ASSIGN_OR_RETURN(double x, ParsePositive("--device-tflops", v));
         o.synth.device_flops = x * 1e12; return Status::Ok(); }},
      {"--host-adam-rate", [](SimCliOptions& o, const std::string& v) -> Status {
         TC_ASSIGN_OR_RETURN(o.synth.host_adam_params_per_s, ParsePositive("--host-adam-rate", v));
         return Status::Ok(); }},
      {"--h2d-gbps", [](SimCliOptions& o, const std::string& v) -> Status {
         TC_ASSIGN_OR_RETURN(double x, ParsePositive("--h2d-gbps", v)); o.sim.links.h2d_bps = x * 1e9; return Status::Ok(); }},
      {"--d2h-gbps", [](SimCliOptions& o, const std::string& v) -> Status {
         TC_ASSIGN_OR_RETURN(double x, ParsePositive("--d2h-gbps", v)); o.sim.links.d2h_bps = x * 1e9; return Status::Ok(); }},
      {"--nvme-read-gbps", [](SimCliOptions& o, const std::string& v) -> Status {
         TC_ASSIGN_OR_RETURN(double x, ParsePositive("--nvme-read-gbps", v)); o.sim.links.nvme_read_bps = x * 1e9; return Status::Ok(); }},
      {"--nvme-write-gbps", [](SimCliOptions& o, const std::string& v) -> Status {
         TC_ASSIGN_OR_RETURN(double x, ParsePositive("--nvme-write-gbps", v)); o.sim.links.nvme_write_bps = x * 1e9; return Status::Ok(); }},
      {"--net-gbps", [](SimCliOptions& o, const std::string& v) -> Status {
         TC_ASSIGN_OR_RETURN(double x, ParsePositive("--net-gbps", v));
         o.sim.links.collective_bps = x * 1e9; o.synth.collective_bps = x * 1e9; return Status::Ok(); }},
  };
  return *flags;
}

std::vector<std::string> FlagNames() {
  std::vector<std::string> names = {"--json", "--help", "--separate-pcie"};
  for (const auto& [name, setter] : ValueFlags()) names.push_back(name);
  return names;
}

Status CheckRequired(const SimCliOptions& o) {
  if (o.model.empty() == o.trace_path.empty()) {
    return Status::InvalidArgument("expected exactly one of --model PRESET or --trace FILE");
  }
  if (o.sim.budgets.device == 0) return Status::InvalidArgument("--device-budget: expected a size such as 24GiB");
  if (o.sim.budgets.host == 0) return Status::InvalidArgument("--host-budget: expected a size such as 200GiB");
  return Status::Ok();
}

}  // namespace

StatusOr<SimCliOptions> ParseSimArgs(const std::vector<std::string>& args) {
  SimCliOptions o;
  o.policies = PolicyNames();
  for (size_t i = 0; i < args.size(); ++i) {
    std::string flag = args[i], value;
    const size_t eq = flag.find('=');
    const bool inline_value = flag.rfind("--", 0) == 0 && eq != std::string::npos;
    if (inline_value) {
      value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
    }
    if (flag == "--json" || flag == "--help" || flag == "-h" || flag == "--separate-pcie") {
      if (inline_value) return BadValue(flag, value, "no value");
      if (flag == "--json") o.json = true;
      else if (flag == "--separate-pcie") o.sim.links.collectives_share_pcie = false;
      else o.help = true;
      continue;
    }
    auto it = ValueFlags().find(flag);
    if (it == ValueFlags().end()) {
      return Status::InvalidArgument("unknown flag '" + flag + "'" + DidYouMean(flag, FlagNames()) +
                                     "; run tencache-sim --help");
    }
    if (!inline_value) {
      if (i + 1 >= args.size()) return Status::InvalidArgument(flag + ": expected a value");
      value = args[++i];
    }
    TC_RETURN_IF_ERROR(it->second(o, value));
  }
  if (!o.help) TC_RETURN_IF_ERROR(CheckRequired(o));
  return o;
}

std::string FormatResultsJson(const std::vector<PolicyResult>& results) {
  nlohmann::json arr = nlohmann::json::array();
  for (const PolicyResult& r : results) {
    arr.push_back({{"policy", r.policy}, {"device_hit_rate", r.device_hit_rate},
                   {"host_hit_rate", r.host_hit_rate}, {"bytes_h2d", r.bytes_h2d},
                   {"bytes_d2h", r.bytes_d2h}, {"bytes_nvme_read", r.bytes_nvme_read},
                   {"bytes_nvme_write", r.bytes_nvme_write}, {"stall_s", r.stall_s},
                   {"step_time_s", r.step_time_s}, {"collective_delay_s", r.collective_delay_s}});
  }
  return nlohmann::json{{"results", arr}}.dump(2) + "\n";
}

std::string FormatResultsTable(const std::vector<PolicyResult>& results) {
  std::string out;
  char line[256];
  std::snprintf(line, sizeof line, "%-15s %9s %9s %11s %11s %11s %11s %10s %10s\n", "POLICY",
                "DEV_HIT", "HOST_HIT", "H2D", "D2H", "NVME_READ", "NVME_WRITE", "STALL_S", "STEP_S");
  out += line;
  for (const PolicyResult& r : results) {
    std::snprintf(line, sizeof line, "%-15s %8.2f%% %8.2f%% %11s %11s %11s %11s %10.4f %10.4f\n",
                  r.policy.c_str(), 100 * r.device_hit_rate, 100 * r.host_hit_rate,
                  FormatBytes(r.bytes_h2d).c_str(), FormatBytes(r.bytes_d2h).c_str(),
                  FormatBytes(r.bytes_nvme_read).c_str(), FormatBytes(r.bytes_nvme_write).c_str(),
                  r.stall_s, r.step_time_s);
    out += line;
  }
  out += "(per steady-state step, after 2 warm-up steps; hit rates over device accesses)\n";
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
    TC_ASSIGN_OR_RETURN(std::unique_ptr<SimPolicy> policy, MakePolicy(name));
    results.push_back(sim->Run(*policy));
  }
  return o.json ? FormatResultsJson(results) : FormatResultsTable(results);
}

int SimMain(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  StatusOr<SimCliOptions> o = ParseSimArgs(args);
  if (!o.ok()) {
    err << "tencache-sim: " << o.status().message() << "\n";
    return ExitCodeFor(o.status());
  }
  if (o->help) {
    out << SimUsage();
    return 0;
  }
  StatusOr<std::string> text = RunSim(*o);
  if (!text.ok()) {
    err << "tencache-sim: " << text.status().message() << "\n";
    return ExitCodeFor(text.status());
  }
  out << *text;
  return 0;
}

}  // namespace tencache
