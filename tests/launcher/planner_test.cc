#include "launcher/planner.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "common/byte_size.h"
#include "common/human_format.h"

namespace tencache {
namespace {

class PlannerTest : public ::testing::Test {
 protected:
  void SetUp() override { catalog_ = *Catalog::Load(DefaultCatalogPath()); }
  JobSpec Job(const std::string& text, const std::vector<std::string>& overrides = {}) {
    StatusOr<JobSpec> job = ParseJobText(text, "job.yaml", overrides);
    EXPECT_TRUE(job.ok()) << job.status().ToString();
    return *job;
  }
  Catalog catalog_;
};

const char kLlama7b[] =
    "name: l7\nmodel: {preset: llama-2-7b}\n"
    "train: {tokens_per_epoch: 2e9, micro_batch: 1, global_batch: 64}\n"
    "cluster: {max_nodes: 4, volume: {size: 2TiB}}\n";

// The node counts the planner evaluates for every instance type of `catalog`:
// 1, and each count up to max_nodes whose ranks divide global_batch.
size_t NodeCountsEvaluated(const Catalog& catalog, int max_nodes, int global_batch) {
  size_t n = 0;
  for (const InstanceSpec& s : catalog.instances()) {
    for (int nodes = 1; nodes <= max_nodes; ++nodes) n += nodes == 1 || global_batch % (nodes * s.gpu_count) == 0;
  }
  return n;
}

TEST_F(PlannerTest, ChoosesTheCheapestFeasiblePlan) {
  PlanResult plan = *PlanJob(Job(kLlama7b), catalog_, ModelAssumptions());
  ASSERT_EQ(plan.chosen, 0);
  EXPECT_EQ(plan.candidates.size(), catalog_.instances().size());  // one row per instance type
  EXPECT_EQ(plan.evaluated.size(), NodeCountsEvaluated(catalog_, 4, 64));
  const Candidate& chosen = plan.candidates[0];
  for (const Candidate& c : plan.evaluated) {
    if (c.feasible) {
      EXPECT_LE(chosen.cost_per_epoch_usd, c.cost_per_epoch_usd) << c.instance->type << " x" << c.nodes;
    }
  }
  // Feasible rows are sorted by cost, infeasible ones come last.
  bool seen_infeasible = false;
  for (size_t i = 1; i < plan.candidates.size(); ++i) {
    if (!plan.candidates[i].feasible) {
      seen_infeasible = true;
    } else {
      EXPECT_FALSE(seen_infeasible);
    }
    if (plan.candidates[i].feasible) {
      EXPECT_LE(plan.candidates[i - 1].cost_per_epoch_usd, plan.candidates[i].cost_per_epoch_usd);
    }
  }
}

// Issue #40: the plan says where checkpoints go and how long one takes to
// write (the chosen candidate's bytes per node over the checkpoint disk).
TEST_F(PlannerTest, ThePlanSaysWhereCheckpointsGoAndHowLongOneTakes) {
  const JobSpec job = Job(kLlama7b, {"cluster.target=k8s", "cluster.checkpoint_claim=ckpt-pvc",
                                     "cluster.checkpoint_write_gbps=2", "train.checkpoint_every=100"});
  PlanResult plan = *PlanJob(job, catalog_, ModelAssumptions());
  ASSERT_GE(plan.chosen, 0);
  const Candidate& c = plan.candidates[size_t(plan.chosen)];
  const uint64_t node = c.states.checkpoint(job.dtype) * uint64_t(c.ranks / c.nodes);
  EXPECT_EQ(plan.checkpoints, CheckpointPlan(job, c));
  EXPECT_NE(plan.checkpoints.find("every 100 steps and on a stop, to the PersistentVolumeClaim ckpt-pvc"),
            std::string::npos) << plan.checkpoints;
  EXPECT_NE(plan.checkpoints.find(FormatBytes(node) + " a node, written in " +
                                  FormatDuration(double(node) / 2e9) + " at 2.00 GB/s"),
            std::string::npos) << plan.checkpoints;
  EXPECT_NE(RenderPlanTable(plan, false).find(plan.checkpoints), std::string::npos);
  EXPECT_EQ(PlanToJson(plan, false)["checkpoints"], plan.checkpoints);
  // Without a claim the nodes' disk is named as not durable; a job that writes none says so.
  EXPECT_NE(CheckpointPlan(Job(kLlama7b, {"cluster.target=k8s"}), c).find("not durable"), std::string::npos);
  EXPECT_EQ(CheckpointPlan(Job(kLlama7b, {"train.checkpoint_on_stop=false"}), c),
            "checkpoints: none (train.checkpoint_every 0, train.checkpoint_on_stop false)");
}

TEST_F(PlannerTest, ObjectiveTimeChoosesTheFastest) {
  PlanResult plan = *PlanJob(Job(kLlama7b, {"cluster.objective=time"}), catalog_, ModelAssumptions());
  ASSERT_EQ(plan.chosen, 0);
  for (const Candidate& c : plan.evaluated) {
    if (c.feasible) {
      EXPECT_LE(plan.candidates[0].epoch_hours, c.epoch_hours);
    }
  }
  PlanResult by_cost = *PlanJob(Job(kLlama7b), catalog_, ModelAssumptions());
  EXPECT_LT(plan.candidates[0].epoch_hours, by_cost.candidates[0].epoch_hours);
}

TEST_F(PlannerTest, InfeasibleInstancesKeepTheirReason) {
  PlanResult plan = *PlanJob(Job(kLlama7b, {"cluster.volume.size=1KiB", "cluster.max_nodes=1"}), catalog_,
                             ModelAssumptions());
  int infeasible = 0;
  for (const Candidate& c : plan.candidates) {
    if (c.feasible) continue;
    ++infeasible;
    // One g5.xlarge's 16 GiB cannot hold the gradients the worker keeps on the host.
    EXPECT_TRUE(c.reason.find("NVMe per node") != std::string::npos ||
                c.reason.find("the worker's cache needs") != std::string::npos) << c.reason;
  }
  EXPECT_GT(infeasible, 0);
  std::string table = RenderPlanTable(plan, false);
  EXPECT_NE(table.find("Infeasible:"), std::string::npos);
  EXPECT_NE(table.find("CHOSEN"), std::string::npos);
  EXPECT_NE(table.find("$/EPOCH"), std::string::npos);
}

// An instance whose host memory per rank is below the least the worker's
// cache accepts (three slots of each shard size) is infeasible, with that
// reason in the Infeasible list, and not a row: g5.xlarge (16 GiB RAM) for
// Llama-2 7B where 60 % of its memory is kept for the OS.
TEST_F(PlannerTest, AnInstanceTheWorkerCannotRunIsInfeasibleWithTheReason) {
  ModelAssumptions a;
  a.host_reserved_fraction = 0.6;
  PlanResult plan = *PlanJob(Job(kLlama7b, {"cluster.instance_types=[g5.xlarge, p5.4xlarge]", "cluster.max_nodes=1"}),
                             catalog_, a);
  const Candidate* g5 = nullptr;
  for (const Candidate& c : plan.candidates) {
    if (c.instance->type == "g5.xlarge") g5 = &c;
  }
  ASSERT_NE(g5, nullptr);
  EXPECT_FALSE(g5->feasible);
  const uint64_t least = LeastHostBudget(plan.model, plan.dtype, 1);
  EXPECT_NE(g5->reason.find("per rank is below the " + FormatBytes(least) + " the worker's cache needs"),
            std::string::npos) << g5->reason;
  for (const std::string& a : g5->assumptions) EXPECT_EQ(a.find("the worker does not yet"), std::string::npos) << a;
  const std::string table = RenderPlanTable(plan, false);
  EXPECT_EQ(table.find("\ng5.xlarge "), std::string::npos) << table;  // no feasible row
  EXPECT_NE(table.find("  g5.xlarge: host memory "), std::string::npos) << table;
  EXPECT_EQ(plan.candidates[plan.chosen].instance->type, "p5.4xlarge");
  EXPECT_FALSE(PlanToJson(plan, false)["candidates"][1]["feasible"].get<bool>());
}

TEST_F(PlannerTest, NothingFeasible) {
  PlanResult plan = *PlanJob(Job("model: {preset: llama-2-70b}\ntrain: {tokens_per_epoch: 1000}\n"
                                 "cluster: {instance_types: [g5.xlarge]}\n"),
                             catalog_, ModelAssumptions());
  EXPECT_EQ(plan.chosen, -1);
  EXPECT_NE(RenderPlanTable(plan, false).find("No feasible plan"), std::string::npos);
  EXPECT_TRUE(PlanToJson(plan, false)["chosen"].is_null());
}

TEST_F(PlannerTest, UnknownInstanceTypeNamesTheKey) {
  StatusOr<PlanResult> plan =
      PlanJob(Job(kLlama7b, {"cluster.instance_types=[p4d.24xlarg]"}), catalog_, ModelAssumptions());
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(ExitCodeFor(plan.status()), 2);
  const std::string& m = plan.status().message();
  EXPECT_NE(m.find("--set cluster.instance_types=[p4d.24xlarg]: key 'cluster.instance_types'"), std::string::npos) << m;
  EXPECT_NE(m.find("did you mean 'p4d.24xlarge'"), std::string::npos) << m;
}

TEST_F(PlannerTest, JsonCarriesTheDocumentedFields) {
  PlanResult plan = *PlanJob(Job(kLlama7b), catalog_, ModelAssumptions());
  nlohmann::ordered_json j = PlanToJson(plan, false);
  EXPECT_EQ(j["model"]["name"], "llama-2-7b");
  EXPECT_EQ(j["model"]["params"], 6738415616ull);
  EXPECT_EQ(j["model"]["model_state_bytes"], 18ull * 6738415616ull);  // 18 bytes a parameter in bf16
  ASSERT_EQ(j["candidates"].size(), plan.candidates.size());
  for (const auto& c : j["candidates"]) {
    for (const char* key : {"instance_type", "provider", "nodes", "gpus_per_node", "price_per_hour_usd", "feasible",
                            "reason", "per_rank", "step_time_s", "tokens_per_s", "epoch_hours", "cost_per_epoch_usd"}) {
      EXPECT_TRUE(c.contains(key)) << key;
    }
    for (const char* key : {"gpu_bytes", "cpu_bytes", "nvme_bytes"}) EXPECT_TRUE(c["per_rank"].contains(key));
  }
  EXPECT_EQ(j["chosen"], plan.candidates[0].instance->type);
}

// The optimizer lane's share of the step (train.optimizer_overlap, auto by
// default): in every feasible candidate's JSON step, and in the text under
// the chosen plan where it hides anything; off, it hides nothing and the
// chosen plan's step is longer by what on hid.
TEST_F(PlannerTest, ThePlanShowsWhatTheOptimizerLaneHides) {
  PlanResult on = *PlanJob(Job(kLlama7b), catalog_, ModelAssumptions());
  PlanResult off = *PlanJob(Job(kLlama7b, {"train.optimizer_overlap=off"}), catalog_, ModelAssumptions());
  ASSERT_GE(on.chosen, 0);
  ASSERT_GE(off.chosen, 0);
  const Candidate& c = on.candidates[on.chosen];
  ASSERT_GT(c.step.optimizer_hidden_s, 0.0);
  const nlohmann::ordered_json j = PlanToJson(on, false);
  EXPECT_EQ(j["candidates"][on.chosen]["step"]["optimizer_hidden_s"], c.step.optimizer_hidden_s);
  EXPECT_EQ(j["candidates"][on.chosen]["step"]["optimizer_exposed_s"], c.step.optimizer_exposed_s);
  EXPECT_NE(RenderPlanTable(on, false).find("optimizer lane (train.optimizer_overlap): "), std::string::npos)
      << RenderPlanTable(on, false);
  EXPECT_EQ(RenderPlanTable(off, false).find("optimizer lane"), std::string::npos);
  for (const Candidate& o : off.candidates) {
    if (o.feasible) {
      EXPECT_EQ(o.step.optimizer_hidden_s, 0.0) << o.instance->type;
    }
    if (o.instance != c.instance || o.nodes != c.nodes) continue;
    EXPECT_NEAR(o.step.step_s - c.step.step_s, c.step.optimizer_hidden_s, 1e-9 * o.step.step_s);
  }
}

TEST_F(PlannerTest, MultiNodePlansArePricedForAllTheirNodes) {
  // cost per epoch = epoch hours x price per node-hour x nodes, for every
  // instance type and node count of the whole catalog; the JSON's
  // price_per_hour_usd is the price of all nodes together. (2 x g6e.xlarge at
  // $1.861 per node-hour is $3.722 per hour: an epoch of 691 h costs $2,572.)
  PlanResult plan = *PlanJob(Job(kLlama7b, {"cluster.max_nodes=4"}), catalog_, ModelAssumptions());
  ASSERT_EQ(plan.evaluated.size(), NodeCountsEvaluated(catalog_, 4, 64));
  int multi_node_feasible = 0;
  for (const Candidate& c : plan.evaluated) {
    if (!c.feasible) continue;
    if (c.nodes > 1) ++multi_node_feasible;
    const double expect = c.epoch_hours * c.price_per_node_hour * c.nodes;
    EXPECT_NEAR(c.cost_per_epoch_usd, expect, 1e-12 * expect) << c.instance->type << " x" << c.nodes;
    EXPECT_DOUBLE_EQ(c.price_per_node_hour, c.instance->price_on_demand) << c.instance->type;
  }
  EXPECT_GT(multi_node_feasible, 0);
  const nlohmann::ordered_json j = PlanToJson(plan, true);
  ASSERT_EQ(j["candidates"].size(), plan.evaluated.size());
  for (size_t i = 0; i < plan.evaluated.size(); ++i) {
    const Candidate& c = plan.evaluated[i];
    const auto& jc = j["candidates"][i];
    ASSERT_EQ(jc["instance_type"], c.instance->type);
    ASSERT_EQ(jc["nodes"], c.nodes);
    const double hourly = c.price_per_node_hour * c.nodes;
    EXPECT_NEAR(jc["price_per_hour_usd"].get<double>(), hourly, 1e-12 * hourly) << c.instance->type << " x" << c.nodes;
    if (c.feasible) {
      EXPECT_NEAR(jc["cost_per_epoch_usd"].get<double>(), jc["epoch_hours"].get<double>() * hourly,
                  1e-12 * c.cost_per_epoch_usd)
          << c.instance->type << " x" << c.nodes;
    }
  }
}

// A catalog of one GPU and the instance entries given (`- {...}` lines), loaded
// from a temporary folder.
Catalog TestCatalog(const std::string& instances) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("tencache_planner_spot_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "gpus.yaml") << "gpus:\n  - {name: X1, bf16_tflops: 100, fp32_tflops: 10, memory_gib: 80,"
                                       " memory_bw_gbps: 2000, p2p_gbps: 10, h2d_gbps: 25, source: test}\n";
  std::ofstream(dir / "cloud.yaml") << "provider: test\ninstances:\n" << instances;
  StatusOr<Catalog> catalog = Catalog::Load(dir.string());
  std::filesystem::remove_all(dir);
  EXPECT_TRUE(catalog.ok()) << catalog.status().ToString();
  return catalog.ok() ? *catalog : Catalog();
}

const char kInstance[] = "  - {type: %s, gpu: X1, gpu_count: 1, gpu_memory_gib: 80, vcpus: 16, ram_gib: 256, network_gbps: 10,"
                         " nvme: none, price: {%s}%s}\n";
std::string Entry(const std::string& type, const std::string& price, const std::string& more = "") {
  char buf[512];
  std::snprintf(buf, sizeof buf, kInstance, type.c_str(), price.c_str(), more.c_str());
  return buf;
}

TEST_F(PlannerTest, UseSpotIsRefusedWhenTheCatalogHasNoSpotPrice) {
  const Catalog catalog = TestCatalog(Entry("a", "on_demand: 4, source: test") + Entry("b", "on_demand: 3, source: test"));
  StatusOr<PlanResult> plan = PlanJob(Job(kLlama7b, {"cluster.use_spot=true"}), catalog, ModelAssumptions());
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(ExitCodeFor(plan.status()), 2);
  const std::string& m = plan.status().message();
  EXPECT_NE(m.find("--set cluster.use_spot=true: key 'cluster.use_spot'"), std::string::npos) << m;
  EXPECT_NE(m.find("has no spot price for any candidate"), std::string::npos) << m;
  EXPECT_TRUE(PlanJob(Job(kLlama7b, {"cluster.use_spot=false"}), catalog, ModelAssumptions()).ok());
}

TEST_F(PlannerTest, UseSpotPricesTheCandidatesThatHaveASpotPrice) {
  // One instance type with a spot price and a rate, one with a price and no
  // rate, one with neither: the first is priced at spot, preemptions included;
  // the others are infeasible, saying what is missing.
  const Catalog catalog =
      TestCatalog(Entry("with-spot", "on_demand: 4, spot: 1.5, source: test",
                        ", spot_interruption: {monthly: 0.1, bucket: \"5-10%\", source: advisor}") +
                  Entry("no-rate", "on_demand: 4, spot: 1.2, source: test") +
                  Entry("no-spot", "on_demand: 3, source: test"));
  StatusOr<PlanResult> plan =
      PlanJob(Job(kLlama7b, {"cluster.use_spot=true", "cluster.max_nodes=2"}), catalog, ModelAssumptions());
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  ASSERT_EQ(plan->chosen, 0);
  const Candidate& spot = plan->candidates[0];
  EXPECT_EQ(spot.instance->type, "with-spot");
  EXPECT_TRUE(spot.spot);
  EXPECT_DOUBLE_EQ(spot.price_per_node_hour, 1.5);
  ASSERT_TRUE(spot.spot_estimate.known) << spot.spot_estimate.missing;
  EXPECT_DOUBLE_EQ(spot.epoch_hours, spot.spot_estimate.epoch_hours);
  EXPECT_NEAR(spot.cost_per_epoch_usd, spot.epoch_hours * 1.5 * spot.nodes, 1e-12 * spot.cost_per_epoch_usd);
  EXPECT_GT(spot.spot_estimate.preemptions, 0);
  EXPECT_EQ(spot.checkpoint.bandwidth, "cluster.volume's write");  // no NVMe: the job's volume
  ASSERT_EQ(plan->candidates.size(), 3u);
  for (size_t i = 1; i < 3; ++i) EXPECT_FALSE(plan->candidates[i].feasible) << plan->candidates[i].instance->type;
  auto reason = [&](const std::string& type) {
    for (const Candidate& c : plan->candidates)
      if (c.instance->type == type) return c.reason;
    return std::string();
  };
  EXPECT_NE(reason("no-spot").find("no spot price in the catalog (cluster.use_spot)"), std::string::npos)
      << reason("no-spot");
  EXPECT_NE(reason("no-rate").find("set cluster.spot_interruption_rate"), std::string::npos) << reason("no-rate");
  // The job's rate fills in where the catalog has none, printed as an assumption.
  plan = PlanJob(Job(kLlama7b, {"cluster.use_spot=true", "cluster.max_nodes=2", "cluster.spot_interruption_rate=0.3"}),
                 catalog, ModelAssumptions());
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  const std::string table = RenderPlanTable(*plan, false);
  EXPECT_NE(table.find("spot interruptions assumed 30 % of nodes a month (cluster.spot_interruption_rate; the "
                       "catalog has none): no-rate"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("spot interruptions 5-10% of nodes a month (advisor): with-spot"), std::string::npos) << table;
  EXPECT_NE(table.find("spot restart: 5 min 0 s after a preemption assumed (cluster.spot_restart_s)"), std::string::npos)
      << table;
}

// On-demand and spot side by side for every instance type with a spot price
// and a rate (the shipped catalog's AWS entries); cluster.use_spot ranks by
// the spot column, and checkpoint_every auto becomes Young/Daly's interval.
TEST_F(PlannerTest, OnDemandAndSpotSideBySide) {
  const JobSpec od = Job(kLlama7b, {"cluster.instance_types=[p4d.24xlarge, g5.48xlarge, g6e.48xlarge]"});
  PlanResult plan = *PlanJob(od, catalog_, ModelAssumptions());
  const std::string table = RenderPlanTable(plan, false);
  EXPECT_NE(table.find("SPOT $/EPOCH"), std::string::npos) << table;
  int priced = 0;
  for (const Candidate& c : plan.candidates) {
    if (!c.feasible) continue;
    EXPECT_FALSE(c.spot);
    EXPECT_DOUBLE_EQ(c.cost_per_epoch_usd, c.on_demand_cost_per_epoch_usd);
    ASSERT_TRUE(c.spot_estimate.known) << c.instance->type << ": " << c.spot_estimate.missing;
    EXPECT_FALSE(c.spot_estimate.rate_assumed);  // the AWS Spot Advisor's bucket
    EXPECT_LT(c.spot_estimate.cost_per_epoch_usd, c.on_demand_cost_per_epoch_usd) << c.instance->type;
    EXPECT_GT(c.spot_estimate.epoch_hours, c.epoch_hours);
    EXPECT_NE(table.find(FormatUsd(c.spot_estimate.cost_per_epoch_usd)), std::string::npos) << table;
    ++priced;
  }
  EXPECT_GT(priced, 0);
  const nlohmann::ordered_json j = PlanToJson(plan, false)["candidates"][0];
  EXPECT_TRUE(j["spot_estimate"]["known"].get<bool>());
  EXPECT_GT(j["spot_estimate"]["mtbp_s"].get<double>(), 0);

  PlanResult spot = *PlanJob(Job(kLlama7b, {"cluster.instance_types=[p4d.24xlarge, g5.48xlarge, g6e.48xlarge]",
                                            "cluster.use_spot=true", "train.checkpoint_every=auto",
                                            "train.checkpoint_on_stop=false"}),
                             catalog_, ModelAssumptions());
  ASSERT_GE(spot.chosen, 0);
  for (size_t i = 1; i < spot.candidates.size(); ++i) {
    if (spot.candidates[i].feasible) {
      EXPECT_LE(spot.candidates[i - 1].cost_per_epoch_usd, spot.candidates[i].cost_per_epoch_usd);
    }
  }
  const Candidate& c = spot.candidates[size_t(spot.chosen)];
  EXPECT_DOUBLE_EQ(c.cost_per_epoch_usd, c.spot_estimate.cost_per_epoch_usd);
  EXPECT_EQ(c.checkpoint_every,
            YoungDalyEvery(c.checkpoint.write_s, c.spot_estimate.mtbp_s, c.step.step_s));
  EXPECT_NE(spot.checkpoints.find("every " + std::to_string(c.checkpoint_every) +
                                  " steps (train.checkpoint_every auto, planned: Young/Daly"),
            std::string::npos)
      << spot.checkpoints;
  EXPECT_NE(RenderPlanTable(spot, false).find("  on spot: " + FormatUsd(c.cost_per_epoch_usd) + " expected"),
            std::string::npos)
      << RenderPlanTable(spot, false);
}

TEST_F(PlannerTest, TableShowsTheJobsBudgetsAsWrittenAndInBinaryUnits) {
  // Decimal units are accepted; the table says what they come to in binary ones.
  PlanResult plan = *PlanJob(Job(kLlama7b, {"cache.host_budget=8GB", "cache.device_budget=512MiB", "cache.nvme_budget=0"}),
                             catalog_, ModelAssumptions());
  EXPECT_NE(RenderPlanTable(plan, false).find("\nbudgets per rank from the job: cache.device_budget 512MiB, "
                                              "cache.host_budget 8GB = 7.45 GiB, cache.nvme_budget 0\n"),
            std::string::npos)
      << RenderPlanTable(plan, false);
  plan = *PlanJob(Job(std::string(kLlama7b) + "cache: {host_budget: 1.5 TB, device_budget: 1.5GiB, nvme_budget: 4096}\n"),
                  catalog_, ModelAssumptions());
  EXPECT_NE(RenderPlanTable(plan, false).find("budgets per rank from the job: cache.device_budget 1.5GiB, "
                                              "cache.host_budget 1.5 TB = 1.36 TiB, cache.nvme_budget 4096 = 4.00 KiB\n"),
            std::string::npos)
      << RenderPlanTable(plan, false);
  // Budgets left auto: no such line.
  plan = *PlanJob(Job(kLlama7b, {"cache.host_budget=auto"}), catalog_, ModelAssumptions());
  EXPECT_EQ(RenderPlanTable(plan, false).find("budgets per rank"), std::string::npos);
}

TEST_F(PlannerTest, WholeCatalogPlansWellUnderASecond) {
  JobSpec job = Job(kLlama7b, {"cluster.max_nodes=8"});
  const auto start = std::chrono::steady_clock::now();
  PlanResult plan = *PlanJob(job, catalog_, ModelAssumptions());
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(plan.evaluated.size(), NodeCountsEvaluated(catalog_, 8, 64));
  EXPECT_LT(s, 1.0);
}

TEST_F(PlannerTest, MoreRanksThanSequencesAreInfeasibleNotACrash) {
  // 8 GPUs a node and a batch of 2: no micro-batch divides a share of 0.
  PlanResult plan = *PlanJob(Job(kLlama7b, {"train.global_batch=2", "train.micro_batch=auto", "cluster.max_nodes=2"}),
                             catalog_, ModelAssumptions());
  for (const Candidate& c : plan.evaluated) {
    EXPECT_GE(c.micro_batch, 1) << c.instance->type;
    if (c.instance->gpu_count > 2) {
      EXPECT_FALSE(c.feasible) << c.instance->type;
      EXPECT_NE(c.reason.find("train.global_batch 2 is not a multiple"), std::string::npos) << c.reason;
    }
  }
}

TEST_F(PlannerTest, AHostileJobPlansUnderASecond) {
  // The largest values a job may name: the planner's work is bounded by the
  // batch's divisors, not by cluster.max_nodes. (The times hold for an
  // optimized build; under AddressSanitizer only the work is bounded.)
#if defined(__SANITIZE_ADDRESS__)
  const double limit_s = 1e9;
#else
  const double limit_s = 1.0;
#endif
  for (const char* batch : {"train.global_batch=1048576", "train.global_batch=720720"}) {
    JobSpec job = Job(kLlama7b, {"cluster.max_nodes=4096", batch, "train.micro_batch=auto"});
    const auto start = std::chrono::steady_clock::now();
    PlanResult plan = *PlanJob(job, catalog_, ModelAssumptions());
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_LT(plan.evaluated.size(), catalog_.instances().size() * 300) << batch;
    EXPECT_LT(s, limit_s) << batch;
  }
  JobSpec deep = Job(kLlama7b, {"model.layers=1024", "cluster.max_nodes=1"});
  const auto start = std::chrono::steady_clock::now();
  (void)*PlanJob(deep, catalog_, ModelAssumptions());
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), limit_s);
}

// A model of 1.06e10 parameters whose embedding alone has 4.19e9 (256000 x
// 16384, past 2^32): its counts reach the plan and its JSON whole, and every
// evaluated placement accounts for each byte of the states.
TEST_F(PlannerTest, AModelWithAnEmbeddingPastTwoToThe32ParametersIsPlannedInExactBytes) {
  const JobSpec job = Job(
      "name: big\nmodel: {layers: 2, hidden: 16384, heads: 128, ffn_hidden: 65536, seq_len: 2048, vocab: 256000,"
      " position: rotary, norm: rmsnorm, bias: false}\n"
      "train: {tokens_per_epoch: 1e9, micro_batch: 1, global_batch: 64}\n"
      "cluster: {max_nodes: 2, volume: {size: 8TiB}}\n");
  ASSERT_EQ(job.model.Tensors()[0].numel, 4194304000ull);
  PlanResult plan = *PlanJob(job, catalog_, ModelAssumptions());
  EXPECT_EQ(plan.params, 10636836864ull);
  EXPECT_EQ(plan.model_state_bytes, 18 * 10636836864ull);
  const nlohmann::ordered_json j = PlanToJson(plan, false);
  EXPECT_EQ(j["model"]["params"].get<uint64_t>(), 10636836864ull);
  EXPECT_EQ(j["model"]["model_state_bytes"].get<uint64_t>(), 18 * 10636836864ull);
  int placed = 0;
  for (const Candidate& c : plan.evaluated) {
    if (!c.feasible) continue;
    const Placement& p = c.placement;
    EXPECT_EQ(p.bytes[kGpu] + p.bytes[kCpu] + p.bytes[kNvme] + p.unplaced, c.states.total()) << c.instance->type;
    ++placed;
  }
  EXPECT_GT(placed, 0) << RenderPlanTable(plan, true);
}

}  // namespace
}  // namespace tencache
