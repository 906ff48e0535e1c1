#include "launcher/catalog.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>

#include "common/byte_size.h"
#include "launcher/planner.h"
#include "launcher/resource_model.h"

namespace tencache {
namespace {

namespace fs = std::filesystem;

TEST(Catalog, ShipsEveryInstanceOfTheFactsTable) {
  StatusOr<Catalog> c = Catalog::Load(DefaultCatalogPath());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  // The 20 instances of shared/catalog-facts.md with their on-demand prices.
  const std::vector<std::pair<std::string, double>> facts = {
      {"p4d.24xlarge", 21.96},   {"p4de.24xlarge", 40.97},  {"p5.48xlarge", 55.04},
      {"p5.4xlarge", 6.88},      {"p5en.48xlarge", 63.30},  {"g5.xlarge", 1.006},
      {"g5.12xlarge", 5.672},    {"g5.48xlarge", 16.288},   {"g6.2xlarge", 0.9776},
      {"g6.48xlarge", 13.35},    {"g6e.xlarge", 1.861},     {"g6e.48xlarge", 30.13},
      {"a2-highgpu-8g", 29.39},  {"a3-highgpu-8g", 87.83},  {"g2-standard-12", 1.00},
      {"Standard_NC24ads_A100_v4", 3.673}, {"Standard_NC96ads_A100_v4", 14.692},
      {"Standard_ND96asr_v4", 27.197},     {"Standard_ND96amsr_A100_v4", 32.77},
      {"Standard_NC40ads_H100_v5", 6.98},
  };
  EXPECT_GE(c->instances().size(), facts.size());
  for (const auto& [type, price] : facts) {
    StatusOr<const InstanceSpec*> s = c->FindInstance(type);
    ASSERT_TRUE(s.ok()) << type;
    EXPECT_DOUBLE_EQ((*s)->price_on_demand, price) << type;
    EXPECT_FALSE((*s)->price_source.empty()) << type;
    EXPECT_FALSE((*s)->price_recorded.empty()) << type;
    EXPECT_NE(c->FindGpu((*s)->gpu), nullptr) << type;
  }
  const InstanceSpec* p4d = *c->FindInstance("p4d.24xlarge");
  EXPECT_EQ(p4d->gpu_count, 8);
  EXPECT_EQ(p4d->nvme.disks, 8);
  EXPECT_EQ(p4d->nvme.capacity_bytes(), 8000000000000ull);
  EXPECT_FALSE(p4d->nvme.note.empty());  // the bandwidth is an assumption and says so
  for (const GpuSpec& g : c->gpus()) EXPECT_FALSE(g.source.empty()) << g.name;
}

TEST(Catalog, EveryShippedInstanceSaysWhereItsLocalNvmeCameFrom) {
  // "-" in the facts table meant unknown; every instance has since been checked
  // against its provider's specification, so none is left unknown, and every
  // known or none entry names its source.
  Catalog c = *Catalog::Load(DefaultCatalogPath());
  for (const InstanceSpec& s : c.instances()) {
    EXPECT_FALSE(s.nvme.unknown()) << s.type;
    EXPECT_FALSE(s.nvme.source.empty()) << s.type;
    EXPECT_FALSE(s.nvme.note.empty()) << s.type << ": the bandwidth assumption or why none";
    if (s.nvme.known()) {
      EXPECT_EQ(s.nvme.state, NvmeSpec::State::kKnown) << s.type;
    }
  }
  const auto nvme = [&](const std::string& type) { return (*c.FindInstance(type))->nvme; };
  EXPECT_EQ(nvme("p5.4xlarge").capacity_bytes(), 3800000000000ull);
  EXPECT_EQ(nvme("g6e.xlarge").capacity_bytes(), 250000000000ull);
  EXPECT_EQ(nvme("p5en.48xlarge").capacity_bytes(), 30400000000000ull);
  EXPECT_EQ(nvme("a3-highgpu-8g").disks, 16);
  EXPECT_NEAR(double(nvme("a3-highgpu-8g").capacity_bytes()), 16.0 * 375 * 1024 * 1024 * 1024, 1e6);  // 375 GiB each
  EXPECT_EQ(nvme("Standard_NC96ads_A100_v4").disks, 4);
  EXPECT_EQ(nvme("Standard_NC96ads_A100_v4").capacity_bytes(), 4 * 960000000000ull);
  // Attachable Local SSD is not part of the machine type or its price: none,
  // and the note says it can be attached.
  EXPECT_TRUE(nvme("a2-highgpu-8g").none());
  EXPECT_NE(nvme("a2-highgpu-8g").note.find("attachable"), std::string::npos);
  EXPECT_EQ(nvme("a2-highgpu-8g").capacity_bytes(), 0u);
}

TEST(Catalog, ShippedFactsMatchTheProvidersSpecSheets) {
  // Facts the catalog once had wrong, pinned to the providers' published specs.
  Catalog c = *Catalog::Load(DefaultCatalogPath());
  const auto inst = [&](const std::string& type) { return *c.FindInstance(type); };

  // Standard_NC40ads_H100_v5 carries one H100 NVL (94 GB HBM3, PCIe Gen5), not
  // an 80 GB H100 SXM (learn.microsoft.com ncadsh100v5-series).
  const InstanceSpec* nc40 = inst("Standard_NC40ads_H100_v5");
  EXPECT_EQ(nc40->gpu, "H100-NVL");
  EXPECT_EQ(nc40->gpu_memory_gib, 94);
  EXPECT_EQ(nc40->network_gbps, 40);
  EXPECT_TRUE(nc40->network_assumed.empty());
  const GpuSpec* nvl = c.FindGpu("H100-NVL");
  ASSERT_NE(nvl, nullptr);
  EXPECT_EQ(nvl->memory_gib, 94);
  EXPECT_EQ(nvl->memory_bw_gbps, 3900);
  EXPECT_EQ(nvl->bf16_tflops, 835);
  EXPECT_EQ(nvl->fp32_tflops, 60);
  EXPECT_EQ(nvl->pcie, "gen5");

  // NC A100 v4 carries A100 PCIe 80 GB (1,935 GB/s, no NVLink between its GPUs);
  // its network is published (20 / 80 Gbps), not assumed.
  for (const char* type : {"Standard_NC24ads_A100_v4", "Standard_NC96ads_A100_v4"}) {
    EXPECT_EQ(inst(type)->gpu, "A100-80GB-PCIe") << type;
    EXPECT_TRUE(inst(type)->network_assumed.empty()) << type;
  }
  EXPECT_EQ(inst("Standard_NC24ads_A100_v4")->network_gbps, 20);
  EXPECT_EQ(inst("Standard_NC96ads_A100_v4")->network_gbps, 80);
  const GpuSpec* a100_pcie = c.FindGpu("A100-80GB-PCIe");
  ASSERT_NE(a100_pcie, nullptr);
  EXPECT_EQ(a100_pcie->memory_bw_gbps, 1935);
  EXPECT_LT(a100_pcie->p2p_gbps, c.FindGpu("A100-80GB")->p2p_gbps);

  // ND96amsr_A100_v4 has 1,900 GiB of memory, not 1,800.
  EXPECT_EQ(inst("Standard_ND96amsr_A100_v4")->ram_gib, 1900);

  // The EC2 API's disk counts: p5en.48xlarge 8 x 3800 GB, g6.48xlarge 8 x 940 GB,
  // g6e.48xlarge 4 x 1900 GB (not one disk each).
  EXPECT_EQ(inst("p5en.48xlarge")->nvme.disks, 8);
  EXPECT_EQ(inst("p5en.48xlarge")->nvme.disk_gb, 3800);
  EXPECT_EQ(inst("g6.48xlarge")->nvme.disks, 8);
  EXPECT_EQ(inst("g6.48xlarge")->nvme.disk_gb, 940);
  EXPECT_EQ(inst("g6e.48xlarge")->nvme.disks, 4);
  EXPECT_EQ(inst("g6e.48xlarge")->nvme.disk_gb, 1900);

  // GCP's Local SSD disks are 375 GiB (16 on a3-highgpu-8g, 6,000 GiB in all);
  // A3 High's published network is 1,000 Gbps (GPUDirect-TCPX, which the note names).
  const InstanceSpec* a3 = inst("a3-highgpu-8g");
  EXPECT_EQ(a3->nvme.disks, 16);
  EXPECT_NEAR(double(a3->nvme.capacity_bytes()), 16.0 * 375 * kGiB, 1e6);
  EXPECT_EQ(a3->network_gbps, 1000);
  EXPECT_NE(a3->network_assumed.find("GPUDirect-TCPX"), std::string::npos) << a3->network_assumed;
}

TEST(Catalog, EveryShippedFactNamesItsSource) {
  Catalog c = *Catalog::Load(DefaultCatalogPath());
  for (const InstanceSpec& s : c.instances()) {
    for (const char* key : {"gpu", "gpu_count", "gpu_memory_gib", "vcpus", "ram_gib", "network_gbps"}) {
      EXPECT_NE(s.source_of(key).find("https://"), std::string::npos) << s.type << " " << key;
    }
  }
  for (const GpuSpec& g : c.gpus()) {
    for (const char* key : {"bf16_tflops", "fp32_tflops", "memory_gib", "memory_bw_gbps", "p2p_gbps", "h2d_gbps"}) {
      EXPECT_FALSE(g.source_of(key).empty()) << g.name << " " << key;
    }
  }
}

TEST(Catalog, UnknownInstanceSuggests) {
  Catalog c = *Catalog::Load(DefaultCatalogPath());
  StatusOr<const InstanceSpec*> s = c.FindInstance("p4d.24xlarg");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("did you mean 'p4d.24xlarge'"), std::string::npos);
}

class BadCatalog : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tencache_catalog_test_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    std::ofstream(dir_ / "gpus.yaml") << "gpus:\n  - {name: X1, bf16_tflops: 100, fp32_tflops: 10, memory_gib: 16,"
                                         " memory_bw_gbps: 500, p2p_gbps: 10, h2d_gbps: 10, source: test}\n";
  }
  void TearDown() override { fs::remove_all(dir_); }
  Status LoadWith(const std::string& instances) { return Load(instances).status(); }
  StatusOr<Catalog> Load(const std::string& instances) {
    std::ofstream(dir_ / "cloud.yaml") << "provider: test\ninstances:\n" << instances;
    return Catalog::Load(dir_.string());
  }
  // One instance t1 with 16 GiB of GPU and host memory and `nvme` as given
  // (empty: no nvme key).
  static std::string Entry(const std::string& nvme) {
    return "  - {type: t1, gpu: X1, gpu_count: 1, gpu_memory_gib: 16, vcpus: 4, ram_gib: 16, network_gbps: 10," +
           (nvme.empty() ? std::string() : " nvme: " + nvme + ",") + " price: {on_demand: 1, source: test}}\n";
  }
  fs::path dir_;
};

TEST_F(BadCatalog, MissingPriceNamesFileAndInstance) {
  Status s = LoadWith("  - {type: t1, gpu: X1, gpu_count: 1, gpu_memory_gib: 16, vcpus: 4, ram_gib: 16, network_gbps: 10}\n");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("cloud.yaml"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("instance 't1'"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("price"), std::string::npos) << s.message();
}

TEST_F(BadCatalog, UnknownGpuAndNegativeNumbers) {
  Status s = LoadWith("  - {type: t1, gpu: X2, gpu_count: 1, gpu_memory_gib: 16, vcpus: 4, ram_gib: 16,"
                      " network_gbps: 10, price: {on_demand: 1, source: test}}\n");
  EXPECT_NE(s.message().find("unknown GPU 'X2' (did you mean 'X1'?)"), std::string::npos) << s.message();
  s = LoadWith("  - {type: t1, gpu: X1, gpu_count: 1, gpu_memory_gib: -16, vcpus: 4, ram_gib: 16,"
               " network_gbps: 10, price: {on_demand: 1, source: test}}\n");
  EXPECT_NE(s.message().find("gpu_memory_gib': expected a positive number"), std::string::npos) << s.message();
  s = LoadWith("  - {type: t1, gpu: X1, gpu_count: 1, gpu_memory_gib: 16, vcpus: 4, ram_gib: 16,"
               " network_gbps: 10, price: {on_demand: 1, source: test}}\n"
               "  - {type: t1, gpu: X1, gpu_count: 1, gpu_memory_gib: 16, vcpus: 4, ram_gib: 16,"
               " network_gbps: 10, price: {on_demand: 1, source: test}}\n");
  EXPECT_NE(s.message().find("listed twice"), std::string::npos) << s.message();
}

// Spot: a price with its own source, and an interruption share below 1 with
// its source; a misspelt key in either is named, not ignored.
TEST_F(BadCatalog, SpotPriceAndInterruptionAreReadWithTheirSources) {
  const std::string head = "  - {type: t1, gpu: X1, gpu_count: 1, gpu_memory_gib: 16, vcpus: 4, ram_gib: 16, network_gbps: 10,";
  StatusOr<Catalog> c = Load(head + " price: {on_demand: 1, spot: 0.3, source: a, spot_source: b},"
                                    " spot_interruption: {monthly: 0.1, bucket: '5-10%', source: advisor}}\n");
  ASSERT_TRUE(c.ok()) << c.status().message();
  const InstanceSpec& t = **c->FindInstance("t1");
  EXPECT_EQ(t.price_spot, 0.3);
  EXPECT_EQ(t.spot_source, "b");
  ASSERT_TRUE(t.spot_interruption.has_value());
  EXPECT_EQ(t.spot_interruption->monthly, 0.1);
  EXPECT_EQ(t.spot_interruption->bucket, "5-10%");
  EXPECT_EQ(t.spot_interruption->source, "advisor");
  Status s = LoadWith(head + " price: {on_demand: 1, spto: 0.3, source: a}}\n");
  EXPECT_NE(s.message().find("instance 't1' price: key 'spto': expected one of on_demand, spot, source, spot_source "
                             "(did you mean 'spot'?)"),
            std::string::npos)
      << s.message();
  s = LoadWith(head + " price: {on_demand: 1, source: a}, spot_interruption: {monthly: 1.5, source: x}}\n");
  EXPECT_NE(s.message().find("key 'monthly': expected a share of nodes below 1"), std::string::npos) << s.message();
  s = LoadWith(head + " price: {on_demand: 1, source: a}, spot_interruption: {monthly: 0.1}}\n");
  EXPECT_NE(s.message().find("spot_interruption: key 'source'"), std::string::npos) << s.message();
}

TEST_F(BadCatalog, NetworkLatencyIsOptionalAndPositive) {
  StatusOr<Catalog> c = Load("  - {type: t1, gpu: X1, gpu_count: 1, gpu_memory_gib: 16, vcpus: 4, ram_gib: 16,"
                             " network_gbps: 10, network_latency_us: 12.5, price: {on_demand: 1, source: test}}\n"
                             "  - {type: t2, gpu: X1, gpu_count: 1, gpu_memory_gib: 16, vcpus: 4, ram_gib: 16,"
                             " network_gbps: 10, price: {on_demand: 1, source: test}}\n");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ((*c->FindInstance("t1"))->network_latency_us, 12.5);
  EXPECT_FALSE((*c->FindInstance("t2"))->network_latency_us.has_value());
  Status s = LoadWith("  - {type: t1, gpu: X1, gpu_count: 1, gpu_memory_gib: 16, vcpus: 4, ram_gib: 16,"
                      " network_gbps: 10, network_latency_us: -3, price: {on_demand: 1, source: test}}\n");
  EXPECT_NE(s.message().find("network_latency_us': expected a positive number"), std::string::npos) << s.message();
}

TEST_F(BadCatalog, SourcesNameEachFactOrTheSpec) {
  StatusOr<Catalog> c = Load("  - {type: t1, gpu: X1, gpu_count: 1, gpu_memory_gib: 16, vcpus: 4, ram_gib: 16,"
                             " network_gbps: 10, price: {on_demand: 1, source: test},"
                             " sources: {spec: 'https://a (spec sheet)', network_gbps: 'https://b'}}\n");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const InstanceSpec& t1 = c->instances()[0];
  EXPECT_EQ(t1.source_of("vcpus"), "https://a (spec sheet)");
  EXPECT_EQ(t1.source_of("network_gbps"), "https://b");
  EXPECT_EQ(c->FindGpu("X1")->source_of("bf16_tflops"), "");  // none recorded

  Status s = LoadWith("  - {type: t1, gpu: X1, gpu_count: 1, gpu_memory_gib: 16, vcpus: 4, ram_gib: 16,"
                      " network_gbps: 10, price: {on_demand: 1, source: test}, sources: {vcpu: x}}\n");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(ExitCodeFor(s), 2);
  EXPECT_NE(s.message().find("instance 't1' sources: key 'vcpu': expected one of spec, gpu,"), std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("did you mean 'vcpus'"), std::string::npos) << s.message();
  s = LoadWith("  - {type: t1, gpu: X1, gpu_count: 1, gpu_memory_gib: 16, vcpus: 4, ram_gib: 16,"
               " network_gbps: 10, price: {on_demand: 1, source: test}, sources: {spec: [a, b]}}\n");
  EXPECT_NE(s.message().find("key 'spec': expected a non-empty source string"), std::string::npos) << s.message();
  s = LoadWith("  - {type: t1, gpu: X1, gpu_count: 1, gpu_memory_gib: 16, vcpus: 4, ram_gib: 16,"
               " network_gbps: 10, price: {on_demand: 1, source: test}, sources: https://a}\n");
  EXPECT_NE(s.message().find("key 'sources': expected a mapping of spec, gpu"), std::string::npos) << s.message();
}

TEST_F(BadCatalog, LocalNvmeIsKnownNoneOrUnknown) {
  StatusOr<Catalog> c = Load(Entry("{disks: 2, disk_gb: 1000, read_gbps_per_disk: 3, write_gbps_per_disk: 1.5, "
                                   "note: assumed, source: spec}"));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const NvmeSpec& known = c->instances()[0].nvme;
  EXPECT_EQ(known.state, NvmeSpec::State::kKnown);
  EXPECT_TRUE(known.known());
  EXPECT_EQ(known.capacity_bytes(), 2000000000000ull);
  EXPECT_EQ(known.source, "spec");

  for (const char* none : {"none", "{state: none, note: not in the price, source: spec}"}) {
    c = Load(Entry(none));
    ASSERT_TRUE(c.ok()) << none << ": " << c.status().ToString();
    EXPECT_TRUE(c->instances()[0].nvme.none()) << none;
    EXPECT_FALSE(c->instances()[0].nvme.unknown()) << none;
    EXPECT_EQ(c->instances()[0].nvme.capacity_bytes(), 0u) << none;
  }
  EXPECT_EQ(Load(Entry("{state: none, note: not in the price, source: spec}"))->instances()[0].nvme.note,
            "not in the price");

  // A missing key is unknown, never none.
  for (const char* unknown : {"unknown", "{state: unknown, note: spec not found}", ""}) {
    c = Load(Entry(unknown));
    ASSERT_TRUE(c.ok()) << unknown << ": " << c.status().ToString();
    EXPECT_TRUE(c->instances()[0].nvme.unknown()) << unknown;
    EXPECT_FALSE(c->instances()[0].nvme.none()) << unknown;
    EXPECT_EQ(c->instances()[0].nvme.state, NvmeSpec::State::kUnknown) << unknown;
  }
}

TEST_F(BadCatalog, BadLocalNvmeNamesFileEntryAndTheExpectedForm) {
  Status s = LoadWith(Entry("maybe"));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(ExitCodeFor(s), 2);
  for (const char* part : {"cloud.yaml:", "instance 't1'", "key 'nvme'", "expected a mapping {disks, disk_gb",
                           "'none'", "'unknown'", "got 'maybe'"}) {
    EXPECT_NE(s.message().find(part), std::string::npos) << part << " in " << s.message();
  }
  s = LoadWith(Entry("{state: maybe}"));
  EXPECT_EQ(ExitCodeFor(s), 2);
  EXPECT_NE(s.message().find("instance 't1' nvme: key 'state': expected 'none' or 'unknown'"), std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("got 'maybe'"), std::string::npos) << s.message();
  s = LoadWith(Entry("{state: none, disks: 2}"));
  EXPECT_NE(s.message().find("key 'disks': expected no disks with state 'none'"), std::string::npos) << s.message();
  s = LoadWith(Entry("{disks: 2, disk_gb: 1000}"));
  EXPECT_NE(s.message().find("key 'read_gbps_per_disk': expected a positive number"), std::string::npos)
      << s.message();
  s = LoadWith(Entry("[1, 2]"));
  EXPECT_NE(s.message().find("key 'nvme': expected a mapping"), std::string::npos) << s.message();
}

TEST_F(BadCatalog, UnknownLocalNvmeIsAssumedNoneAndThePlanSaysSo) {
  StatusOr<Catalog> c = Load(Entry("unknown"));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  StatusOr<JobSpec> job = ParseJobText("model: {preset: llama-2-7b}\n"
                                       "train: {tokens_per_epoch: 1e9, micro_batch: 1, global_batch: 8}\n",
                                       "job.yaml", {});
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  const InstanceSpec& t1 = c->instances()[0];
  const std::string line =
      "local NVMe unknown in the catalog for t1: assumed none (set cluster.volume to assume an attached volume)";

  // 108 GB of states, 16 GiB of GPU and host memory: the NVMe tier is needed.
  Candidate cand = EvaluateCandidate(*job, t1, *c->FindGpu("X1"), 1, ModelAssumptions());
  ASSERT_FALSE(cand.feasible);
  EXPECT_NE(cand.reason.find("NVMe per node; local NVMe unknown in the catalog"), std::string::npos) << cand.reason;
  EXPECT_EQ(cand.reason.find("has 0"), std::string::npos) << cand.reason;
  EXPECT_EQ(cand.assumptions, std::vector<std::string>{line});

  // The plan prints it: the reason in the table, the assumption in the JSON.
  PlanResult plan = *PlanJob(*job, *c, ModelAssumptions());
  const std::string table = RenderPlanTable(plan, false);
  EXPECT_NE(table.find("t1: needs"), std::string::npos) << table;
  EXPECT_NE(table.find("local NVMe unknown in the catalog"), std::string::npos) << table;
  EXPECT_EQ(PlanToJson(plan, false)["candidates"][0]["assumptions"][0], line);

  // With cluster.volume the volume is the NVMe tier, and the plan says that the
  // local NVMe was unknown and what it assumed instead (two nodes: one node's
  // host memory is below what the worker's cache needs for 7B).
  job->cluster.volume.size = 2 * kTiB;
  cand = EvaluateCandidate(*job, t1, *c->FindGpu("X1"), 2, ModelAssumptions());
  ASSERT_TRUE(cand.feasible) << cand.reason;
  EXPECT_GT(cand.placement.bytes[kNvme], 0u);
  const std::string volume_line = "local NVMe unknown in the catalog for t1: assumed an attached volume of " +
                                  FormatBytes(2 * kTiB) + " per node (cluster.volume)";
  EXPECT_NE(std::find(cand.assumptions.begin(), cand.assumptions.end(), volume_line), cand.assumptions.end())
      << ::testing::PrintToString(cand.assumptions);

  // A job that fits in GPU and host memory needs no NVMe tier: nothing to say.
  job = ParseJobText("model: {preset: gpt2}\ntrain: {tokens_per_epoch: 1e9, micro_batch: 1, global_batch: 8}\n",
                     "job.yaml", {});
  cand = EvaluateCandidate(*job, t1, *c->FindGpu("X1"), 1, ModelAssumptions());
  ASSERT_TRUE(cand.feasible) << cand.reason;
  EXPECT_TRUE(cand.assumptions.empty());
}

TEST_F(BadCatalog, NoneLocalNvmeKeepsTheHasZeroReason) {
  StatusOr<Catalog> c = Load(Entry("none"));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  JobSpec job = *ParseJobText("model: {preset: llama-2-7b}\n"
                              "train: {tokens_per_epoch: 1e9, micro_batch: 1, global_batch: 8}\n",
                              "job.yaml", {});
  Candidate cand = EvaluateCandidate(job, c->instances()[0], *c->FindGpu("X1"), 1, ModelAssumptions());
  ASSERT_FALSE(cand.feasible);
  EXPECT_NE(cand.reason.find("NVMe per node, has 0 (no local NVMe; set cluster.volume)"), std::string::npos)
      << cand.reason;
  EXPECT_TRUE(cand.assumptions.empty());
}

TEST(Catalog, MissingPath) {
  StatusOr<Catalog> c = Catalog::Load("/nonexistent/catalog");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(ExitCodeFor(c.status()), 2);
}

}  // namespace
}  // namespace tencache
