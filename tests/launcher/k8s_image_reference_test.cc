// Image references by the distribution grammar: what cluster.image accepts.
#include "common/image_reference.h"

#include <gtest/gtest.h>

namespace tencache {
namespace {

TEST(ImageReference, AcceptsTheGrammarsForms) {
  for (const char* ok : {"nginx", "library/nginx:1.27", "ghcr.io/acme/tencache-worker:0.1.0", "localhost:5000/w",
                         "registry.example.com:443/team/sub/w_x__y.z-q:v1.2_rc-3", "a/b@sha256:" 
                         "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
                         "Registry.Example.com/w:Tag_1"}) {
    EXPECT_EQ(ImageReferenceProblem(ok), "") << ok;
  }
}

TEST(ImageReference, RefusesWhatAPullWouldRefuseSayingWhy) {
  const std::pair<const char*, const char*> bad[] = {
      {"foo bar", "whitespace"},
      {"", "empty"},
      {"ghcr.io/Acme/w:1", "'Acme'"},
      {"w:-x", "tag"},
      {"TAG129", "tag"},
      {"w@sha256:abc", "64 hex"},
      {"w@md5:0123", "algorithm"},
      {"a//b", "component ''"},
      {"a/b/", "component ''"},
      {"a..b", "'a..b'"},
      {"bad-.io:5000/x", "registry"},
      {"host:99999999/x", "registry"},
      {"w\x01", "control"},
  };
  for (const auto& [text, why] : bad) {
    const std::string ref = std::string(text) == "TAG129" ? "w:" + std::string(129, 'a') : text;
    const std::string problem = ImageReferenceProblem(ref);
    EXPECT_NE(problem, "") << ref;
    EXPECT_NE(problem.find(why), std::string::npos) << ref << ": " << problem;
  }
}

}  // namespace
}  // namespace tencache
