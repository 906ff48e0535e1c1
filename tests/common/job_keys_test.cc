// The job schema: one table of keys that reads, writes and documents a job.
#include "common/job_keys.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "common/every_key_job.h"

namespace tencache {
namespace {

namespace fs = std::filesystem;

std::string ReadText(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

fs::path TestDir(const std::string& name) {
  return fs::temp_directory_path() / ("tencache_job_keys_test_" + name);
}

TEST(JobKeys, DocsTablesAreCurrent) {
  const fs::path doc = fs::path(TENCACHE_SOURCE_DIR) / "docs/job-yaml.md";
  const std::string text = ReadText(doc);
  ASSERT_FALSE(text.empty()) << doc;
  StatusOr<std::string> updated = WithJobKeyTables(text, doc.string());
  ASSERT_TRUE(updated.ok()) << updated.status().message();
  EXPECT_EQ(*updated, text) << "docs/job-yaml.md's key tables differ from common/job_keys.cc: run "
                               "build/common/tencache-job-docs docs/job-yaml.md";
}

TEST(JobKeys, EveryKeyHasOnePathAndItsDocumentation) {
  std::set<std::string> paths;
  for (const JobKey& k : JobKeys()) {
    EXPECT_TRUE(paths.insert(k.path).second) << k.path << " is listed twice";
    EXPECT_FALSE(k.type.empty()) << k.path;
    EXPECT_FALSE(k.meaning.empty()) << k.path;
    EXPECT_FALSE(k.default_text.empty()) << k.path;
    EXPECT_FALSE(k.example.empty()) << k.path;
    EXPECT_NE(k.default_text, k.example) << k.path;
    EXPECT_EQ(FindJobKey(k.path), &k);
    EXPECT_TRUE(k.read && k.write) << k.path;
  }
  EXPECT_EQ(FindJobKey("train.micro_bach"), nullptr);
  EXPECT_EQ(JobKeyTable("train").rfind("| key | type | meaning | default | example |\n|---|", 0), 0u);
  EXPECT_NE(JobKeyTable("train").find("| `train.lr` | number > 0 | "), std::string::npos);
  EXPECT_NE(JobKeyTable("").find("| `name` | string | "), std::string::npos);
}

TEST(JobKeys, TableMarkersAreCheckedNamingTheLine) {
  std::string all;
  for (const char* s : {"top", "model", "train", "cluster", "cache"}) {
    all += std::string("<!-- job keys: ") + s + " -->\nSTALE ROW\n<!-- end job keys -->\n";
  }
  StatusOr<std::string> fresh = WithJobKeyTables("# title\n" + all, "doc.md");
  ASSERT_TRUE(fresh.ok()) << fresh.status().message();
  EXPECT_EQ(fresh->find("STALE ROW"), std::string::npos);
  EXPECT_NE(fresh->find("| `cache.prefetch` |"), std::string::npos);
  EXPECT_EQ(fresh->rfind("# title\n<!-- job keys: top -->\n| key |", 0), 0u) << *fresh;

  const auto error = [&](const std::string& doc) {
    StatusOr<std::string> r = WithJobKeyTables(doc, "doc.md");
    return r.ok() ? std::string("ok") : r.status().message();
  };
  EXPECT_NE(error(all + "<!-- job keys: cache -->\n<!-- end job keys -->\n").find("doc.md:16: 'cache'"),
            std::string::npos);
  EXPECT_NE(error("<!-- job keys: nope -->\n").find("doc.md:1: 'nope' is not a section"), std::string::npos);
  EXPECT_NE(error(all + "<!-- end job keys -->\n").find("doc.md:16: <!-- end job keys --> without a table"),
            std::string::npos);
  EXPECT_NE(error("<!-- job keys: top -->\n").find("doc.md:1: the table of 'top' has no"), std::string::npos);
  EXPECT_NE(error("<!-- job keys: top -->\n<!-- end job keys -->\n").find("no table of the job keys of 'cache'"),
            std::string::npos);
}

// The every-key job names every key of the schema, once.
TEST(JobKeys, TheEveryKeyJobSetsEveryKey) {
  const fs::path dir = TestDir("every");
  std::map<std::string, std::string> values = EveryKeyValues(dir);
  values["cluster.hostfile"] = HostfileValue();
  std::set<std::string> known;
  for (const JobKey& k : JobKeys()) known.insert(k.path);
  std::set<std::string> set;
  for (const auto& entry : values) set.insert(entry.first);
  EXPECT_EQ(set, known);
  StatusOr<JobSpec> job = ParseJobText("", (dir / "job.yaml").string(), AsOverrides(EveryKeyValues(dir)));
  ASSERT_TRUE(job.ok()) << job.status().message();
  fs::remove_all(dir);
}

// Each key reaches a field that JobSpec's equality compares: the job without
// it (at its default) differs from the job with it. Where the default would
// make the job invalid another value stands in; the keys that cluster.hosts
// fixes are set on a job without hosts instead.
TEST(JobKeys, EachKeyChangesTheJobItSets) {
  const fs::path dir = TestDir("each");
  const std::map<std::string, std::string> values = EveryKeyValues(dir);
  const std::map<std::string, std::string> instead = {
      {"train.global_batch", "16"},              // 1 is not a multiple of train.micro_batch
      {"cluster.hosts", "[node1:2, node3:2]"},  // cluster.target hosts needs hosts
  };
  const std::map<std::string, std::string> on_plain_job = {
      {"cluster.target", "k8s"}, {"cluster.nodes", "2"}, {"cluster.ranks_per_node", "2"}};
  const std::map<std::string, std::string> plain_values = {
      {"model.preset", "tiny"}, {"train.tokens_per_epoch", "1000"}, {"train.global_batch", "8"}};
  const std::string source = (dir / "job.yaml").string();
  StatusOr<JobSpec> full = ParseJobText("", source, AsOverrides(values));
  ASSERT_TRUE(full.ok()) << full.status().message();
  StatusOr<JobSpec> plain = ParseJobText("", source, AsOverrides(plain_values));
  ASSERT_TRUE(plain.ok()) << plain.status().message();
  EXPECT_TRUE(*full == *full);
  for (const JobKey& k : JobKeys()) {
    std::map<std::string, std::string> changed = values;
    const JobSpec* compared = &*full;
    if (auto p = on_plain_job.find(k.path); p != on_plain_job.end()) {
      changed = plain_values;
      changed[k.path] = p->second;
      compared = &*plain;
    } else if (auto i = instead.find(k.path); i != instead.end()) {
      changed[k.path] = i->second;
    } else if (k.path == "cluster.hostfile") {
      changed.erase("cluster.hosts");
      changed[k.path] = HostfileValue();
    } else {
      changed.erase(k.path);
    }
    StatusOr<JobSpec> other = ParseJobText("", source, AsOverrides(changed));
    ASSERT_TRUE(other.ok()) << k.path << ": " << other.status().message();
    EXPECT_FALSE(*other == *compared) << k.path << " changes nothing JobSpec compares";
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tencache
