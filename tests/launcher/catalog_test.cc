#include "launcher/catalog.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

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
  Status LoadWith(const std::string& instances) {
    std::ofstream(dir_ / "cloud.yaml") << "provider: test\ninstances:\n" << instances;
    return Catalog::Load(dir_.string()).status();
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

TEST(Catalog, MissingPath) {
  StatusOr<Catalog> c = Catalog::Load("/nonexistent/catalog");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(ExitCodeFor(c.status()), 2);
}

}  // namespace
}  // namespace tencache
