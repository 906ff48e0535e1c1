#include "scheduler/trace.h"

#include <algorithm>
#include <fstream>
#include <istream>
#include <optional>
#include <ostream>

#include <nlohmann/json.hpp>

namespace tencache {

using nlohmann::json;

const char* PhaseName(Phase p) {
  switch (p) {
    case Phase::kForward: return "fwd";
    case Phase::kBackward: return "bwd";
    case Phase::kOptimizer: return "optimizer";
  }
  return "?";
}

const char* CollectiveKindName(CollectiveKind k) {
  return k == CollectiveKind::kAllGather ? "all_gather" : "reduce_scatter";
}

size_t Trace::num_tensors() const {
  size_t n = 0;
  for (const TraceEvent& e : events) {
    if (e.kind == EventKind::kAccess) n = std::max<size_t>(n, size_t(e.id) + 1);
  }
  return n;
}

std::vector<uint64_t> Trace::TensorBytes() const {
  std::vector<uint64_t> bytes(num_tensors(), 0);
  for (const TraceEvent& e : events) {
    if (e.kind == EventKind::kAccess) bytes[e.id] = e.bytes;
  }
  return bytes;
}

uint64_t Trace::TotalTensorBytes() const {
  uint64_t total = 0;
  for (uint64_t b : TensorBytes()) total += b;
  return total;
}

std::vector<std::string> Trace::TensorNames() const {
  std::vector<std::string> names(num_tensors());
  for (const TraceEvent& e : events) {
    if (e.kind == EventKind::kAccess) names[e.id] = e.name;
  }
  return names;
}

Status ValidateTrace(const Trace& trace, const std::string& ctx) {
  const size_t n = trace.num_tensors();
  std::vector<const TraceEvent*> first(n, nullptr);
  bool any_device = false;
  for (size_t i = 0; i < trace.events.size(); ++i) {
    const TraceEvent& e = trace.events[i];
    const std::string where = ctx + ": event " + std::to_string(i);
    if (e.bytes == 0) return Status::InvalidArgument(where + ": expected bytes > 0");
    if (!(e.end_s >= e.start_s)) {
      return Status::InvalidArgument(where + ": expected end_s >= start_s");
    }
    if (!(e.lead_s >= 0)) {
      return Status::InvalidArgument(where + ": expected lead_s >= 0");
    }
    if (!(e.wait_s >= 0)) {
      return Status::InvalidArgument(where + ": expected wait_s >= 0");
    }
    if (e.kind != EventKind::kAccess) continue;
    if (e.pieces_end != 0 && !(e.phase == Phase::kOptimizer && e.pieces_begin >= 0 && e.pieces_begin < e.pieces_end)) {
      return Status::InvalidArgument(where + ": expected pieces [begin, end) with 0 <= begin < end, on an optimizer access");
    }
    if (e.optimizer_lane && e.phase != Phase::kOptimizer) {
      return Status::InvalidArgument(where + ": expected the optimizer lane only on an optimizer access");
    }
    any_device |= e.is_device_access();
    const TraceEvent*& f = first[e.id];
    if (f == nullptr) {
      f = &e;
    } else if (f->bytes != e.bytes || f->name != e.name) {
      return Status::InvalidArgument(where + ": tensor id " + std::to_string(e.id) +
                                     " was '" + f->name + "' (" + std::to_string(f->bytes) +
                                     " bytes) earlier; expected the same name and size");
    }
  }
  for (size_t id = 0; id < n; ++id) {
    if (first[id] == nullptr) {
      return Status::InvalidArgument(ctx + ": tensor id " + std::to_string(id) +
                                     " never accessed; expected dense ids 0.." +
                                     std::to_string(n - 1));
    }
  }
  if (!any_device) return Status::InvalidArgument(ctx + ": expected at least one fwd/bwd access");
  return Status::Ok();
}

namespace {

// Typed field readers: each names the key and the expected type on failure.
struct Fields {
  const json& j;
  std::string where;

  Status Missing(const char* key, const char* type) const {
    return Status::InvalidArgument(where + ": key '" + key + "': expected " + type);
  }
  StatusOr<std::string> Str(const char* key) const {
    auto it = j.find(key);
    if (it == j.end() || !it->is_string()) return Missing(key, "a string");
    return it->get<std::string>();
  }
  StatusOr<double> Num(const char* key, std::optional<double> dflt = std::nullopt) const {
    auto it = j.find(key);
    if (it == j.end() && dflt) return *dflt;
    if (it == j.end() || !it->is_number()) return Missing(key, "a number");
    return it->get<double>();
  }
  StatusOr<uint64_t> UInt(const char* key, std::optional<uint64_t> dflt = std::nullopt) const {
    auto it = j.find(key);
    if (it == j.end() && dflt) return *dflt;
    if (it == j.end() || !it->is_number_unsigned()) return Missing(key, "a non-negative integer");
    return it->get<uint64_t>();
  }
  StatusOr<bool> Bool(const char* key, bool dflt) const {
    auto it = j.find(key);
    if (it == j.end()) return dflt;
    if (!it->is_boolean()) return Missing(key, "true or false");
    return it->get<bool>();
  }
};

StatusOr<TraceHeader> ParseHeader(const Fields& f) {
  TraceHeader h;
  TC_ASSIGN_OR_RETURN(std::string format, f.Str("format"));
  if (format != "tencache-trace") {
    return Status::InvalidArgument(f.where + ": key 'format': expected \"tencache-trace\", got \"" +
                                   format + "\"");
  }
  TC_ASSIGN_OR_RETURN(uint64_t version, f.UInt("version"));
  if (version != uint64_t(kTraceFormatVersion)) {
    return Status::InvalidArgument(f.where + ": key 'version': expected " +
                                   std::to_string(kTraceFormatVersion) + ", got " +
                                   std::to_string(version));
  }
  h.version = int(version);
  TC_ASSIGN_OR_RETURN(h.model, f.Str("model"));
  if (f.j.contains("dtype")) { TC_ASSIGN_OR_RETURN(h.dtype, f.Str("dtype")); }
  TC_ASSIGN_OR_RETURN(uint64_t ranks, f.UInt("ranks", 1));
  TC_ASSIGN_OR_RETURN(uint64_t mb, f.UInt("micro_batch", 1));
  TC_ASSIGN_OR_RETURN(uint64_t seq, f.UInt("seq_len", 0));
  TC_ASSIGN_OR_RETURN(h.device_flops, f.Num("device_flops", 0.0));
  TC_ASSIGN_OR_RETURN(h.deferred_updates, f.Bool("deferred_updates", false));
  if (ranks == 0) return Status::InvalidArgument(f.where + ": key 'ranks': expected >= 1");
  h.ranks = int(ranks);
  h.micro_batch = int(mb);
  h.seq_len = int(seq);
  return h;
}

StatusOr<Phase> ParsePhase(const Fields& f) {
  TC_ASSIGN_OR_RETURN(std::string p, f.Str("phase"));
  if (p == "fwd") return Phase::kForward;
  if (p == "bwd") return Phase::kBackward;
  if (p == "optimizer") return Phase::kOptimizer;
  return Status::InvalidArgument(f.where + ": key 'phase': expected fwd, bwd or optimizer, got \"" +
                                 p + "\"");
}

// The optional "lane": absent, the training thread; "optimizer", the
// optimizer lane, only on an optimizer access.
StatusOr<bool> ParseLane(const Fields& f, Phase phase) {
  if (!f.j.contains("lane")) return false;
  StatusOr<std::string> lane = f.Str("lane");
  if (!lane.ok() || *lane != "optimizer" || phase != Phase::kOptimizer) {
    return f.Missing("lane", "\"optimizer\" on an optimizer access, or no key");
  }
  return true;
}

StatusOr<TraceEvent> ParseEvent(const Fields& f) {
  TraceEvent e;
  TC_ASSIGN_OR_RETURN(std::string type, f.Str("type"));
  TC_ASSIGN_OR_RETURN(e.bytes, f.UInt("bytes"));
  TC_ASSIGN_OR_RETURN(e.start_s, f.Num("start_s"));
  TC_ASSIGN_OR_RETURN(e.end_s, f.Num("end_s"));
  TC_ASSIGN_OR_RETURN(uint64_t block, f.UInt("block", 0));
  e.block = int(block);
  if (type == "access") {
    e.kind = EventKind::kAccess;
    TC_ASSIGN_OR_RETURN(uint64_t id, f.UInt("id"));
    if (id > 0xffffffffull) return f.Missing("id", "an id below 2^32");
    e.id = TensorId(id);
    TC_ASSIGN_OR_RETURN(e.name, f.Str("name"));
    TC_ASSIGN_OR_RETURN(e.phase, ParsePhase(f));
    TC_ASSIGN_OR_RETURN(e.lead_s, f.Num("lead_s", 0.0));
    TC_ASSIGN_OR_RETURN(e.wait_s, f.Num("wait_s", 0.0));
    TC_ASSIGN_OR_RETURN(uint64_t pieces_begin, f.UInt("pieces_begin", 0));
    TC_ASSIGN_OR_RETURN(uint64_t pieces_end, f.UInt("pieces_end", 0));
    if (pieces_end > 1000000 || (pieces_end != 0 && pieces_begin >= pieces_end)) {
      return f.Missing("pieces_end", "pieces_begin < pieces_end <= 1000000");
    }
    e.pieces_begin = int(pieces_begin);
    e.pieces_end = int(pieces_end);
    TC_ASSIGN_OR_RETURN(e.optimizer_lane, ParseLane(f, e.phase));
    return e;
  }
  if (type == "collective") {
    e.kind = EventKind::kCollective;
    TC_ASSIGN_OR_RETURN(std::string kind, f.Str("kind"));
    if (kind == "all_gather") {
      e.collective = CollectiveKind::kAllGather;
    } else if (kind == "reduce_scatter") {
      e.collective = CollectiveKind::kReduceScatter;
    } else {
      return Status::InvalidArgument(f.where + ": key 'kind': expected all_gather or "
                                     "reduce_scatter, got \"" + kind + "\"");
    }
    return e;
  }
  return Status::InvalidArgument(f.where + ": key 'type': expected \"access\" or \"collective\", got \"" +
                                 type + "\"");
}

}  // namespace

StatusOr<Trace> ParseTrace(std::istream& in, const std::string& source) {
  Trace trace;
  std::string line;
  int lineno = 0;
  bool have_header = false;
  while (std::getline(in, line)) {
    ++lineno;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = source + ":" + std::to_string(lineno);
    json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) {
      return Status::InvalidArgument(where + ": expected one JSON object per line");
    }
    Fields f{j, where};
    if (!have_header) {
      TC_ASSIGN_OR_RETURN(trace.header, ParseHeader(f));
      have_header = true;
      continue;
    }
    TC_ASSIGN_OR_RETURN(TraceEvent e, ParseEvent(f));
    trace.events.push_back(std::move(e));
  }
  if (!have_header) {
    return Status::InvalidArgument(source + ": expected a header line "
                                   "{\"format\":\"tencache-trace\",\"version\":1,...}");
  }
  TC_RETURN_IF_ERROR(ValidateTrace(trace, source));
  return trace;
}

StatusOr<Trace> ReadTraceFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::NotFound("trace file '" + path + "' cannot be opened");
  return ParseTrace(in, path);
}

void WriteTrace(const Trace& trace, std::ostream& out) {
  const TraceHeader& h = trace.header;
  out << json{{"format", "tencache-trace"}, {"version", h.version}, {"model", h.model},
              {"dtype", h.dtype}, {"ranks", h.ranks}, {"micro_batch", h.micro_batch},
              {"seq_len", h.seq_len}, {"device_flops", h.device_flops},
              {"deferred_updates", h.deferred_updates}}
             .dump()
      << "\n";
  for (const TraceEvent& e : trace.events) {
    json j;
    if (e.kind == EventKind::kAccess) {
      j = json{{"type", "access"}, {"id", e.id}, {"name", e.name}, {"phase", PhaseName(e.phase)}};
    } else {
      j = json{{"type", "collective"}, {"kind", CollectiveKindName(e.collective)}};
    }
    j["block"] = e.block;
    j["bytes"] = e.bytes;
    j["start_s"] = e.start_s;
    j["end_s"] = e.end_s;
    if (e.kind == EventKind::kAccess && e.lead_s > 0) j["lead_s"] = e.lead_s;
    if (e.kind == EventKind::kAccess && e.wait_s > 0) j["wait_s"] = e.wait_s;
    if (e.kind == EventKind::kAccess && e.pieces_end > 0) {
      j["pieces_begin"] = e.pieces_begin;
      j["pieces_end"] = e.pieces_end;
    }
    if (e.kind == EventKind::kAccess && e.optimizer_lane) j["lane"] = "optimizer";
    out << j.dump() << "\n";
  }
}

Status WriteTraceFile(const Trace& trace, const std::string& path) {
  std::ofstream out(path);
  if (!out) return Status::IoError("cannot write trace file '" + path + "'");
  WriteTrace(trace, out);
  out.flush();
  if (!out) return Status::IoError("short write to trace file '" + path + "'");
  return Status::Ok();
}

}  // namespace tencache
