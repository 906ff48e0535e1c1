// One number per budget: the cache budgets the plan table and plan.json show
// are those job.resolved.yaml gives the worker and the rendered Kubernetes job
// pins, in the worker's accounting with the cache's slot rounding.
#include "launcher/cache_budgets.h"

#include <gtest/gtest.h>

#include "common/byte_size.h"
#include "common/shard_bytes.h"
#include "launcher/k8s_render.h"
#include "launcher/local_machine.h"
#include "launcher/planner.h"
#include "launcher/resolved_job.h"

namespace tencache {
namespace {

std::string Example(const std::string& name) {
  return std::string(TENCACHE_SOURCE_DIR) + "/configs/examples/" + name + ".yaml";
}

// The table's line for `c` (the row that starts with its instance type), each
// run of spaces between its columns made one.
std::string RowOf(const std::string& table, const std::string& type) {
  const size_t at = table.find("\n" + type + " ");
  if (at == std::string::npos) return "";
  std::string row;
  for (char ch : table.substr(at + 1, table.find('\n', at + 1) - at - 1)) {
    if (ch != ' ' || row.empty() || row.back() != ' ') row += ch;
  }
  return row;
}

TEST(CacheBudgets, EveryShardWithItsSlotRoundingAndNvmeOnlyForWhatTheHostCannotHold) {
  const JobSpec job = ParseJobText("model: {preset: tiny, dtype: fp32}\ntrain: {tokens_per_epoch: 1000, global_batch: 8}\n",
                                   "j.yaml").value();
  const ShardBytes s = ShardBytesPerRank(job.model, job.dtype, 2);
  CacheBudgets b = PlanCacheBudgets(job, 2, 1ull << 30, 1ull << 30, 1ull << 30);
  EXPECT_EQ(b.host, s.total() + s.tensors * kSlotAlignment);
  EXPECT_EQ(b.device, s.bytes[kStateParam] + uint64_t(job.model.num_blocks()) * kSlotAlignment);
  EXPECT_EQ(b.nvme, 0u);
  EXPECT_NE(b.host_why.find("= " + FormatBytes(b.host)), std::string::npos) << b.host_why;
  b = PlanCacheBudgets(job, 2, 1ull << 30, s.total() / 2, 1ull << 30);  // the host holds half
  EXPECT_EQ(b.host, s.total() / 2);
  EXPECT_EQ(b.nvme, s.total() + s.tensors * kSlotAlignment - s.total() / 2 + b.device);
  EXPECT_TRUE(b.error.empty());
}

// The 70B plan's CPU/rank was 0 B (the model places every state on the GPU)
// while its rendered job pinned every shard on the host: now the table, the
// resolved job and the rendered Kubernetes job show one host budget.
TEST(CacheBudgets, SeventyBPlanTableResolvedAndRenderedJobAgree) {
  StatusOr<JobSpec> job = LoadJobFile(Example("llama-2-70b"));
  ASSERT_TRUE(job.ok()) << job.status().message();
  const Catalog catalog = *Catalog::Load(CatalogPathFor("", job->cluster.catalog));
  StatusOr<PlanResult> plan = PlanJob(*job, catalog, ModelAssumptions());
  ASSERT_TRUE(plan.ok() && plan->chosen >= 0);
  const Candidate& chosen = plan->candidates[plan->chosen];
  StatusOr<ResolvedJob> resolved = ResolveJob(*job, chosen);
  ASSERT_TRUE(resolved.ok()) << resolved.status().message();
  EXPECT_GT(chosen.budgets.host, 30ull << 30);  // every shard of a rank, pinned
  EXPECT_EQ(*resolved->job.cache.host_budget, chosen.budgets.host);
  EXPECT_EQ(*resolved->job.cache.device_budget, chosen.budgets.device);
  EXPECT_EQ(*resolved->job.cache.nvme_budget, chosen.budgets.nvme);
  const std::string row = RowOf(RenderPlanTable(*plan, false), chosen.instance->type);
  EXPECT_NE(row.find(" " + FormatBytes(chosen.budgets.device) + " " + FormatBytes(chosen.budgets.host) + " " +
                     FormatBytes(chosen.budgets.nvme) + " "),
            std::string::npos) << row;
  EXPECT_EQ(PlanToJson(*plan, false)["candidates"][plan->chosen]["budgets"]["host"], chosen.budgets.host);
  StatusOr<RenderedJob> k8s = RenderK8sJob(*resolved, chosen, "llama70b-test");
  ASSERT_TRUE(k8s.ok()) << k8s.status().message();
  EXPECT_NE(k8s->yaml.find("host_budget: " + std::to_string(chosen.budgets.host) + "  #"), std::string::npos);
}

// The quickstart showed 4.81 MiB in the plan, 6.43 MiB in the resolved job's
// comment and 6.52 MiB in its value and the report: one figure now.
TEST(CacheBudgets, ThisMachinesPlanRowIsTheResolvedJobsBudgets) {
  StatusOr<JobSpec> job = LoadJobFile(Example("quickstart"));
  ASSERT_TRUE(job.ok()) << job.status().message();
  MachineFacts facts;
  facts.cores = 2;
  facts.memory.mem_total = {true, 16ull << 30, "/proc/meminfo MemTotal"};
  facts.nvme_free_bytes = 10ull << 30;
  facts.nvme_path = "/tmp";
  LocalProbes probes;
  probes.disk = {2, 1, 0, "x"};
  probes.compute.threads = 1;
  probes.compute.embed_s = probes.compute.head_s = 0.001;
  probes.compute.layer_s = 0.01;
  probes.compute.adamw_params_per_s = 1e9;
  probes.compute.copy_gbps = 10;
  probes.compute.allgather_gbps = 1;
  const LocalCandidate local = MakeLocalCandidate(*job, facts, probes, LocalRanks(*job, facts));
  const Catalog catalog = *Catalog::Load(CatalogPathFor("", job->cluster.catalog));
  StatusOr<PlanResult> plan = PlanJob(*job, catalog, ModelAssumptions(), &local);
  ASSERT_TRUE(plan.ok() && plan->local && plan->local->feasible);
  const Candidate& c = *plan->local;
  StatusOr<ResolvedJob> resolved = ResolveJob(*job, c);
  ASSERT_TRUE(resolved.ok()) << resolved.status().message();
  EXPECT_EQ(*resolved->job.cache.host_budget, c.budgets.host);
  EXPECT_EQ(*resolved->job.cache.device_budget, c.budgets.device);
  const std::string table = RenderPlanTable(*plan, false);
  const std::string row = RowOf(table, "local");
  EXPECT_NE(row.find(FormatBytes(c.budgets.host)), std::string::npos) << row;
  EXPECT_EQ(row.find(FormatBytes(c.placement.bytes[kCpu])), std::string::npos) << row;  // not the model's placement
  const std::string text = RenderResolvedJob(*resolved, {});
  EXPECT_NE(text.find("host_budget: " + std::to_string(c.budgets.host) + "  # planned: every shard"), std::string::npos);
  EXPECT_NE(text.find("of slot rounding = " + FormatBytes(c.budgets.host) + "\n"), std::string::npos) << text;
}

}  // namespace
}  // namespace tencache
