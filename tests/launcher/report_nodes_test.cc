// Per-node figures: ranks grouped by the host they ran on, medians after
// warm-up, the slowest rank's step time, sums of stall and bytes, peaks.
#include "launcher/report_nodes.h"

#include <gtest/gtest.h>

namespace tencache {
namespace {

JobSpec HostsJob() {
  StatusOr<JobSpec> j = ParseJobText("model: {preset: tiny, dtype: fp32}\ntrain: {tokens_per_epoch: 1000, global_batch: 8}\n"
                                     "cluster: {target: hosts, hosts: [a:2, b:2]}\n",
                                     "j.yaml");
  EXPECT_TRUE(j.ok()) << j.status().message();
  return *j;
}

// Step `s` of a 4-rank run: rank r takes 1 + r/10 s (+ s on the warm-up
// steps), stalls 0.1 x (r + 1) and reads 100 x (r + 1) bytes from NVMe.
nlohmann::json Step(int s, bool warm) {
  nlohmann::json m = {{"step", s}};
  for (int r = 0; r < 4; ++r) {
    m["per_rank"]["step_time_s"].push_back(1 + r / 10.0 + (warm ? 0 : 5));
    m["per_rank"]["stall_s"].push_back(0.1 * (r + 1));
    m["per_rank"]["bytes_nvme_read"].push_back(100.0 * (r + 1) * (s + 1));
    m["per_rank"]["host_used_bytes"].push_back(1000.0 * (r + 1) + s);
  }
  return m;
}

TEST(ReportNodes, RankHostsFollowTheSlotsUnlessReported) {
  const JobSpec job = HostsJob();
  std::map<int, std::string> hosts = RankHosts(job, {}, "here");
  EXPECT_EQ(hosts, (std::map<int, std::string>{{0, "a"}, {1, "a"}, {2, "b"}, {3, "b"}}));
  hosts = RankHosts(job, {{1, "b"}}, "here");  // what the ranks said wins
  EXPECT_EQ(hosts.at(1), "b");
  StatusOr<JobSpec> local = ParseJobText("model: {preset: tiny}\ntrain: {tokens_per_epoch: 10, global_batch: 4}\n"
                                         "cluster: {nodes: 1, ranks_per_node: 2}\n", "l.yaml");
  ASSERT_TRUE(local.ok()) << local.status().message();
  EXPECT_EQ(RankHosts(*local, {}, "here"), (std::map<int, std::string>{{0, "here"}, {1, "here"}}));
}

TEST(ReportNodes, RankHostsRoundTripThroughJson) {
  const std::map<int, std::string> hosts = {{0, "a"}, {1, "a"}, {12, "tcn2"}};
  EXPECT_EQ(RankHostsFromJson(RankHostsToJson(hosts)), hosts);
  EXPECT_TRUE(RankHostsFromJson(nlohmann::json::parse(R"({"x": "a", "1": 5, "-1": "b"})")).empty());
}

TEST(ReportNodes, FiguresGroupRanksByHostAfterWarmup) {
  std::vector<nlohmann::json> metrics;
  for (int s = 0; s < 5; ++s) metrics.push_back(Step(s, s >= 2));
  const nlohmann::json nodes = NodeFigures(metrics, RankHosts(HostsJob(), {}, ""), 2);
  ASSERT_EQ(nodes.size(), 2u);
  EXPECT_EQ(nodes[0]["host"], "a");
  EXPECT_EQ(nodes[0]["ranks"], nlohmann::json::parse("[0, 1]"));
  EXPECT_DOUBLE_EQ(nodes[0]["step_time_s"].get<double>(), 1.1);  // the slower of ranks 0 and 1, warm-up left out
  EXPECT_DOUBLE_EQ(nodes[0]["stall_s"].get<double>(), 0.1 + 0.2);
  EXPECT_DOUBLE_EQ(nodes[0]["bytes_nvme_read"].get<double>(), 300.0 * 4);  // steps 2..4: median at step 3
  EXPECT_DOUBLE_EQ(nodes[0]["peak_host_bytes"].get<double>(), 2004);      // the peak over every step
  EXPECT_EQ(nodes[1]["host"], "b");
  EXPECT_DOUBLE_EQ(nodes[1]["step_time_s"].get<double>(), 1.3);
  EXPECT_DOUBLE_EQ(nodes[1]["stall_s"].get<double>(), 0.3 + 0.4);
  EXPECT_DOUBLE_EQ(nodes[1]["bytes_nvme_read"].get<double>(), 700.0 * 4);
  EXPECT_DOUBLE_EQ(nodes[1]["peak_host_bytes"].get<double>(), 4004);
  const auto rows = NodeRows(nodes);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[1][0], "a");
  EXPECT_EQ(rows[1][1], "0, 1");
  EXPECT_EQ(rows[2][1], "2, 3");
}

TEST(ReportNodes, MetricsWithoutPerRankColumnsGiveNoFigures) {
  const std::vector<nlohmann::json> metrics = {{{"step", 0}, {"loss", 1.0}}};
  EXPECT_TRUE(NodeFigures(metrics, RankHosts(HostsJob(), {}, ""), 0).empty());
  EXPECT_TRUE(NodeRows(nlohmann::json::array()).empty());
  EXPECT_TRUE(NodeRows(nlohmann::json::parse("[1]")).empty());
}

}  // namespace
}  // namespace tencache
