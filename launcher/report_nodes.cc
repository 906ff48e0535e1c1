#include "launcher/report_nodes.h"

#include <algorithm>

#include "common/byte_size.h"
#include "common/human_format.h"

namespace tencache {
namespace {

const char* const kSummed[] = {"stall_s", "bytes_h2d", "bytes_d2h", "bytes_nvme_read", "bytes_nvme_write"};

// metrics["per_rank"][key][rank], or 0 where absent.
double Column(const nlohmann::json& m, const char* key, int rank) {
  auto pr = m.find("per_rank");
  if (pr == m.end() || !pr->is_object()) return 0;
  auto col = pr->find(key);
  if (col == pr->end() || !col->is_array() || rank >= int(col->size()) || !(*col)[rank].is_number()) return 0;
  return (*col)[rank].get<double>();
}

}  // namespace

double NumberField(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : 0.0;
}

std::map<int, std::string> RankHosts(const JobSpec& job, const std::map<int, std::string>& reported,
                                     const std::string& this_host) {
  std::map<int, std::string> out;
  int rank = 0;
  if (job.cluster.target == Target::kHosts) {
    for (const HostSlots& h : job.cluster.hosts.list) {
      for (int s = 0; s < h.slots; ++s) out[rank++] = h.host;
    }
  } else if (job.cluster.target == Target::kLocal) {
    for (; rank < job.ranks(); ++rank) out[rank] = this_host;
  }
  for (const auto& [r, host] : reported) out[r] = host;
  return out;
}

nlohmann::ordered_json RankHostsToJson(const std::map<int, std::string>& hosts) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (const auto& [r, host] : hosts) j[std::to_string(r)] = host;
  return j;
}

std::map<int, std::string> RankHostsFromJson(const nlohmann::json& j) {
  std::map<int, std::string> out;
  if (!j.is_object()) return out;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& k = it.key();
    if (k.empty() || k.size() > 9 || k.find_first_not_of("0123456789") != std::string::npos) continue;
    if (it.value().is_string()) out[std::stoi(k)] = it.value().get<std::string>();
  }
  return out;
}

nlohmann::ordered_json NodeFigures(const std::vector<nlohmann::json>& metrics, const std::map<int, std::string>& hosts,
                                   int warmup) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  const bool has_columns = std::any_of(metrics.begin(), metrics.end(), [](const nlohmann::json& m) {
    return m.is_object() && m.contains("per_rank") && m["per_rank"].is_object() && !m["per_rank"].empty();
  });
  if (!has_columns) return out;
  std::vector<std::string> order;
  std::map<std::string, std::vector<int>> ranks;
  for (const auto& [r, host] : hosts) {
    if (!ranks.count(host)) order.push_back(host);
    ranks[host].push_back(r);
  }
  for (const std::string& host : order) {
    const std::vector<int>& rs = ranks[host];
    std::map<std::string, std::vector<double>> per_step;
    double peak_host = 0, peak_nvme = 0;
    for (size_t i = 0; i < metrics.size(); ++i) {
      const nlohmann::json& m = metrics[i];
      double slowest = 0;
      std::map<std::string, double> sums;
      for (int r : rs) {
        slowest = std::max(slowest, Column(m, "step_time_s", r));
        for (const char* k : kSummed) sums[k] += Column(m, k, r);
        peak_host = std::max(peak_host, Column(m, "host_used_bytes", r));
        peak_nvme = std::max(peak_nvme, Column(m, "nvme_used_bytes", r));
      }
      if (int(i) < warmup && int(metrics.size()) > warmup) continue;
      per_step["step_time_s"].push_back(slowest);
      for (const char* k : kSummed) per_step[k].push_back(sums[k]);
    }
    nlohmann::ordered_json node = {{"host", host}, {"ranks", rs}, {"step_time_s", Median(per_step["step_time_s"])}};
    for (const char* k : kSummed) node[k] = Median(per_step[k]);
    node["peak_host_bytes"] = peak_host;
    node["peak_nvme_bytes"] = peak_nvme;
    out.push_back(node);
  }
  return out;
}

std::vector<std::vector<std::string>> NodeRows(const nlohmann::json& nodes) {
  std::vector<std::vector<std::string>> rows;
  if (!nodes.is_array() || nodes.empty()) return rows;
  rows.push_back({"node", "ranks", "step time (slowest rank)", "stall", "NVMe read / step", "NVMe write / step",
                  "h2d / step", "d2h / step", "peak host", "peak NVMe"});
  for (const nlohmann::json& n : nodes) {
    if (!n.is_object()) return {};
    std::string ranks;
    if (n.contains("ranks") && n["ranks"].is_array()) {
      for (const nlohmann::json& r : n["ranks"]) {
        ranks += (ranks.empty() ? "" : ", ") + (r.is_number_integer() ? std::to_string(r.get<int>()) : "?");
      }
    }
    auto bytes = [&](const char* k) { return FormatBytes(uint64_t(std::max(0.0, NumberField(n, k)))); };
    rows.push_back({n.value("host", std::string("?")), ranks, FormatDuration(NumberField(n, "step_time_s")),
                    FormatDuration(NumberField(n, "stall_s")), bytes("bytes_nvme_read"), bytes("bytes_nvme_write"),
                    bytes("bytes_h2d"), bytes("bytes_d2h"), bytes("peak_host_bytes"), bytes("peak_nvme_bytes")});
  }
  return rows;
}

}  // namespace tencache
