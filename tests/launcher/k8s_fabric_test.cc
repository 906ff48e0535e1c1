// Fabrics: the catalog's fabrics: list attached to its instance types (and
// refused when it names an unknown type or a bad count), and what a worker pod
// requests from it on one node and on several.
#include "launcher/k8s_fabric.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace tencache {
namespace {

namespace fs = std::filesystem;

const Catalog& Shipped() {
  static const Catalog c = *Catalog::Load(DefaultCatalogPath());
  return c;
}

std::string Env(const FabricRequest& f, const std::string& var) {
  for (const auto& [k, v] : f.env) {
    if (k == var) return v;
  }
  return "";
}

TEST(Fabric, P5OnSeveralNodesRequestsEveryEfaInterface) {
  const InstanceSpec* p5 = *Shipped().FindInstance("p5.48xlarge");
  const FabricRequest f = FabricFor(*p5, 4);
  ASSERT_EQ(f.resources.size(), 1u);
  EXPECT_EQ(f.resources[0].first, "vpc.amazonaws.com/efa");
  EXPECT_EQ(f.resources[0].second, 32);
  EXPECT_EQ(Env(f, "FI_PROVIDER"), "efa");
  EXPECT_EQ(Env(f, "FI_EFA_USE_DEVICE_RDMA"), "1");
  EXPECT_NE(f.comment.find("3200 Gb/s"), std::string::npos) << f.comment;
  EXPECT_NE(f.comment.find("https://"), std::string::npos) << "the comment cites its source: " << f.comment;
  // EFA without RDMA read on g6e: no FI_EFA_USE_DEVICE_RDMA.
  const FabricRequest g6e = FabricFor(**Shipped().FindInstance("g6e.48xlarge"), 2);
  EXPECT_EQ(Env(g6e, "FI_PROVIDER"), "efa");
  EXPECT_EQ(Env(g6e, "FI_EFA_USE_DEVICE_RDMA"), "");
}

TEST(Fabric, AzureInfinibandThroughTheRdmaSharedDevicePlugin) {
  const FabricRequest f = FabricFor(**Shipped().FindInstance("Standard_ND96amsr_A100_v4"), 2);
  ASSERT_EQ(f.resources.size(), 1u);
  EXPECT_EQ(f.resources[0].first, "rdma/rdma_shared_device_a");
  EXPECT_EQ(Env(f, "NCCL_IB_DISABLE"), "0");
}

TEST(Fabric, NoneOnOneNodeOrWhereTheCatalogHasNoneAndTheCommentSaysWhy) {
  const FabricRequest one = FabricFor(**Shipped().FindInstance("p5.48xlarge"), 1);
  EXPECT_TRUE(one.resources.empty() && one.env.empty());
  EXPECT_NE(one.comment.find("one node"), std::string::npos) << one.comment;
  const FabricRequest plain = FabricFor(**Shipped().FindInstance("g6.2xlarge"), 2);
  EXPECT_TRUE(plain.resources.empty() && plain.env.empty());
  EXPECT_NE(plain.comment.find("records no fabric"), std::string::npos) << plain.comment;
  const FabricRequest a3 = FabricFor(**Shipped().FindInstance("a3-highgpu-8g"), 2);
  EXPECT_TRUE(a3.resources.empty());
  EXPECT_NE(a3.comment.find("GPUDirect-TCPX"), std::string::npos) << a3.comment;
}

class FabricCatalog : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tencache_fabric_" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    for (const char* f : {"aws.yaml", "gcp.yaml", "azure.yaml", "gpus.yaml"}) {
      fs::copy_file(fs::path(DefaultCatalogPath()) / f, dir_ / f);
    }
  }
  void TearDown() override { fs::remove_all(dir_); }
  Status LoadWith(const std::string& fabrics) {
    std::ofstream(dir_ / "fabrics.yaml") << fabrics;
    return Catalog::Load(dir_.string()).status();
  }
  fs::path dir_;
};

TEST_F(FabricCatalog, AnUnknownTypeABadCountOrADoubleEntryIsRefusedByName) {
  Status s = LoadWith("fabrics:\n  - {name: x, types: [p5.48xlarg], resources: {vpc.amazonaws.com/efa: 4}, source: s}\n");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("fabrics.yaml"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("'p5.48xlarg'"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("did you mean"), std::string::npos) << s.message();
  s = LoadWith("fabrics:\n  - {name: x, types: [p5.48xlarge], resources: {vpc.amazonaws.com/efa: lots}, source: s}\n");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("positive integer"), std::string::npos) << s.message();
  s = LoadWith("fabrics:\n  - {name: x, types: [p5.48xlarge], env: {A: b}, source: s}\n"
               "  - {name: y, types: [p5.48xlarge], env: {A: b}, source: s}\n");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("already has the fabric 'x'"), std::string::npos) << s.message();
  s = LoadWith("fabrics:\n  - {name: x, types: [p5.48xlarge], source: s}\n");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("'note'"), std::string::npos) << "a fabric of nothing must say why: " << s.message();
  EXPECT_TRUE(LoadWith("fabrics:\n  - {name: x, types: [p5.48xlarge], env: {A: b}, source: s}\n").ok());
}

TEST_F(FabricCatalog, WithoutAFabricsListNoInstanceHasOne) {
  StatusOr<Catalog> c = Catalog::Load(dir_.string());
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_TRUE((*c->FindInstance("p5.48xlarge"))->fabric.name.empty());
}

}  // namespace
}  // namespace tencache
