#include "launcher/memory_limits.h"

#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>
#include <vector>

#include "common/byte_size.h"
#include "common/proc_meminfo.h"

namespace tencache {
namespace {

namespace fs = std::filesystem;

constexpr int kCapIpcLock = 14;  // linux/capability.h
// cgroup v1 writes "no limit" as the page counter's maximum, 2^63 less a page;
// nothing above 2^62 bytes (4 EiB) is a real limit.
constexpr uint64_t kCgroupV1NoLimit = uint64_t(1) << 62;

std::optional<std::string> ReadText(const fs::path& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return std::nullopt;
  return text.str();
}

std::string Trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

MemoryLimit ReadMeminfo(const fs::path& root, const std::string& field) {
  MemoryLimit m;
  m.source = "/proc/meminfo " + field;
  if (const std::optional<uint64_t> bytes = MeminfoBytes(field, root / "proc/meminfo")) {
    m.known = true;
    m.bytes = *bytes;
  }
  return m;
}

// The process's cgroups from /proc/self/cgroup ("0::/PATH" for v2,
// "N:...memory...:/PATH" for v1); empty where it has no such line.
struct CgroupPaths {
  std::optional<std::string> v2, v1;
};

CgroupPaths ReadCgroupPaths(const fs::path& root) {
  CgroupPaths p;
  std::ifstream in(root / "proc/self/cgroup");
  std::string line;
  while (std::getline(in, line)) {
    const size_t a = line.find(':');
    const size_t b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string id = line.substr(0, a), controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    if (path.empty() || path[0] != '/') continue;
    if (id == "0" && controllers.empty()) {
      p.v2 = path;
      continue;
    }
    std::istringstream list(controllers);
    for (std::string c; std::getline(list, c, ',');) {
      if (c == "memory") p.v1 = path;
    }
  }
  return p;
}

// The folders from the cgroup's up to the hierarchy's root, deepest first,
// relative to that root. A path that climbs out of the namespace ("/../x": a
// cgroup outside it) is not visible there: the namespace's root alone.
std::vector<fs::path> CgroupFolders(const std::string& cgroup) {
  std::vector<fs::path> parts;
  for (const fs::path& part : fs::path(cgroup).relative_path()) {
    if (part == "..") return {fs::path()};
    if (!part.empty() && part != ".") parts.push_back(part);
  }
  std::vector<fs::path> folders;
  for (size_t n = parts.size() + 1; n-- > 0;) {
    fs::path rel;
    for (size_t i = 0; i < n; ++i) rel /= parts[i];
    folders.push_back(rel);
  }
  return folders;
}

// The smallest `file` in the cgroup's folders under `base` (relative to root);
// "max" or a value of at least `no_limit` is no limit. Folders that are missing
// or hold something else are passed over.
MemoryLimit SmallestCgroupLimit(const fs::path& root, const std::string& base, const std::string& cgroup,
                                const std::string& file, uint64_t no_limit) {
  MemoryLimit m;
  for (const fs::path& rel : CgroupFolders(cgroup)) {
    const fs::path shown = (fs::path("/") / base / rel / file).lexically_normal();
    const std::optional<std::string> text = ReadText(root / shown.relative_path());
    if (!text) continue;
    const std::string value = Trim(*text);
    const bool none = value == "max";
    const std::optional<uint64_t> parsed = ParseDecimal(value);
    if (!none && !parsed) continue;
    const uint64_t bytes = parsed.value_or(0);
    if (!m.known) m.source = shown.string();
    m.known = true;
    if (!none && bytes < no_limit && (!m.bytes || bytes < *m.bytes)) {
      m.bytes = bytes;
      m.source = shown.string();
    }
  }
  return m;
}

// CAP_IPC_LOCK in /proc/self/status's CapEff (hexadecimal).
bool ReadIpcLock(const fs::path& root) {
  std::ifstream in(root / "proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("CapEff:", 0) != 0) continue;
    const std::string hex = Trim(line.substr(7));
    if (hex.empty() || hex.size() > 16 || hex.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos) {
      return false;
    }
    return (std::stoull(hex, nullptr, 16) >> kCapIpcLock) & 1;
  }
  return false;
}

MemoryLimit ReadMemlock(const std::function<int(struct rlimit*)>& get) {
  MemoryLimit m;
  m.source = "RLIMIT_MEMLOCK";
  struct rlimit r {};
  const int rc = get ? get(&r) : getrlimit(RLIMIT_MEMLOCK, &r);
  if (rc != 0) return m;
  m.known = true;
  if (r.rlim_cur != RLIM_INFINITY) m.bytes = uint64_t(r.rlim_cur);
  return m;
}

// The limit that bounds the host memory and its name, in bound_by()'s order.
std::pair<const MemoryLimit*, std::string> Binder(const MemoryLimits& l) {
  const std::pair<const MemoryLimit*, std::string> limits[] = {
      {&l.mem_total, "MemTotal"},
      {&l.cgroup_v2, "cgroup v2 memory.max (" + l.cgroup_v2.source + ")"},
      {&l.cgroup_v1, "cgroup v1 memory.limit_in_bytes (" + l.cgroup_v1.source + ")"},
      {l.memlock_bounds() ? &l.memlock : nullptr, "RLIMIT_MEMLOCK"}};
  std::pair<const MemoryLimit*, std::string> best{nullptr, "nothing readable"};
  for (const auto& [limit, name] : limits) {
    if (limit == nullptr || !limit->bounds()) continue;
    if (best.first == nullptr || *limit->bytes < *best.first->bytes) best = {limit, name};
  }
  return best;
}

std::string Shown(const MemoryLimit& m, const std::string& none) {
  if (!m.known) return "unknown";
  return m.bytes ? FormatBytes(*m.bytes) : none;
}

std::string CgroupShown(const MemoryLimits& l, const MemoryLimit* binder) {
  std::string out;
  for (const auto& [m, name] : {std::pair{&l.cgroup_v2, "v2"}, std::pair{&l.cgroup_v1, "v1"}}) {
    if (m->bounds() && m != binder) out += std::string(out.empty() ? "" : ", ") + "cgroup " + name + " " +
                                           FormatBytes(*m->bytes) + " (" + m->source + ")";
  }
  if (!out.empty()) return out;
  if (l.cgroup_v2.bounds() || l.cgroup_v1.bounds()) return "";  // the binder, said already
  return l.cgroup_v2.known || l.cgroup_v1.known ? "cgroup none" : "cgroup unknown";
}

std::string MemlockShown(const MemoryLimits& l, const MemoryLimit* binder) {
  if (binder == &l.memlock) return "";
  std::string out = "memlock " + Shown(l.memlock, "unlimited");
  if (!l.memlock.bounds()) return out;
  if (!l.pins_host_memory) return out + ": not needed, no GPU pinning";
  if (l.ipc_lock) return out + ": lifted by CAP_IPC_LOCK";
  return out;
}

nlohmann::ordered_json LimitJson(const MemoryLimit& m) {
  return {{"known", m.known}, {"bytes", m.bytes ? nlohmann::json(*m.bytes) : nlohmann::json()}, {"source", m.source}};
}

MemoryLimit LimitFromJson(const nlohmann::json& j, const std::string& name) {
  const nlohmann::json& o = j.at(name);
  MemoryLimit m;
  m.known = o.at("known").get<bool>();
  if (!o.at("bytes").is_null()) m.bytes = o.at("bytes").get<uint64_t>();
  m.source = o.at("source").get<std::string>();
  return m;
}

}  // namespace

bool MemoryLimits::memlock_bounds() const { return pins_host_memory && !ipc_lock && memlock.bounds(); }

uint64_t MemoryLimits::usable_bytes() const {
  const MemoryLimit* b = Binder(*this).first;
  return b == nullptr ? 0 : *b->bytes;
}

std::string MemoryLimits::bound_by() const { return Binder(*this).second; }

std::string MemoryLimits::Describe() const {
  const auto [binder, name] = Binder(*this);
  std::vector<std::string> parts;
  if (binder != &mem_total) parts.push_back("MemTotal " + Shown(mem_total, "none"));
  parts.push_back("MemAvailable " + Shown(mem_available, "none"));
  for (const std::string& s : {CgroupShown(*this, binder), MemlockShown(*this, binder)}) {
    if (!s.empty()) parts.push_back(s);
  }
  std::string out = binder ? FormatBytes(*binder->bytes) + " usable (bound by " + name : "unknown (" + name;
  if (binder == &memlock) out += ": the host tier is pinned for the GPU";
  for (size_t i = 0; i < parts.size(); ++i) out += (i == 0 ? "; " : ", ") + parts[i];
  return out + ")";
}

nlohmann::ordered_json MemoryLimits::ToJson() const {
  return {{"usable_bytes", usable_bytes()},         {"bound_by", bound_by()},
          {"mem_total", LimitJson(mem_total)},      {"mem_available", LimitJson(mem_available)},
          {"cgroup_v2", LimitJson(cgroup_v2)},      {"cgroup_v1", LimitJson(cgroup_v1)},
          {"memlock", LimitJson(memlock)},          {"ipc_lock", ipc_lock},
          {"pins_host_memory", pins_host_memory}};
}

StatusOr<MemoryLimits> MemoryLimits::FromJson(const nlohmann::json& j) {
  MemoryLimits l;
  try {
    l.mem_total = LimitFromJson(j, "mem_total");
    l.mem_available = LimitFromJson(j, "mem_available");
    l.cgroup_v2 = LimitFromJson(j, "cgroup_v2");
    l.cgroup_v1 = LimitFromJson(j, "cgroup_v1");
    l.memlock = LimitFromJson(j, "memlock");
    l.ipc_lock = j.at("ipc_lock").get<bool>();
    l.pins_host_memory = j.at("pins_host_memory").get<bool>();
  } catch (const nlohmann::json::exception& e) {
    return Status::InvalidArgument(std::string("memory limits: ") + e.what());
  }
  return l;
}

MemoryLimits ReadMemoryLimits(const MemoryLimitsOptions& options) {
  const fs::path root = options.root.empty() ? fs::path("/") : fs::path(options.root);
  MemoryLimits l;
  l.mem_total = ReadMeminfo(root, "MemTotal");
  l.mem_available = ReadMeminfo(root, "MemAvailable");
  const CgroupPaths cgroups = ReadCgroupPaths(root);
  if (cgroups.v2) l.cgroup_v2 = SmallestCgroupLimit(root, "sys/fs/cgroup", *cgroups.v2, "memory.max", UINT64_MAX);
  if (cgroups.v1) {
    l.cgroup_v1 = SmallestCgroupLimit(root, "sys/fs/cgroup/memory", *cgroups.v1, "memory.limit_in_bytes",
                                      kCgroupV1NoLimit);
  }
  l.memlock = ReadMemlock(options.get_memlock);
  l.ipc_lock = ReadIpcLock(root);
  l.pins_host_memory = options.pins_host_memory;
  return l;
}

}  // namespace tencache
