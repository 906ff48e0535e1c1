// tencache-job-docs: regenerates the key tables of docs/job-yaml.md from the
// job schema (common/job_keys.cc), or with --check says whether they are current.
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "common/cli.h"
#include "common/job_keys.h"

int main(int argc, char** argv) {
  auto app = tencache::MakeCliApp("tencache-job-docs",
                                  "Writes the job keys' tables into a Markdown file between its "
                                  "'<!-- job keys: SECTION -->' and '<!-- end job keys -->' lines.");
  std::string file;
  bool check = false;
  app->add_option("file", file, "the Markdown file, e.g. docs/job-yaml.md")->required();
  app->add_flag("--check", check, "change nothing; exit 1 when the tables differ from the schema");
  if (int code = tencache::ParseCli(*app, argc, argv); code >= 0) return code;

  std::ifstream in(file, std::ios::binary);
  if (!in) {
    std::cerr << "tencache-job-docs: " << file << ": cannot read it\n";
    return 2;
  }
  std::stringstream text;
  text << in.rdbuf();
  in.close();
  const tencache::StatusOr<std::string> updated = tencache::WithJobKeyTables(text.str(), file);
  if (!updated.ok()) {
    std::cerr << "tencache-job-docs: " << updated.status().message() << "\n";
    return 2;
  }
  if (*updated == text.str()) return 0;
  if (check) {
    std::cerr << "tencache-job-docs: " << file << ": the key tables differ from common/job_keys.cc; "
              << "run tencache-job-docs " << file << "\n";
    return 1;
  }
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out << *updated;
  if (!out.flush()) {
    std::cerr << "tencache-job-docs: " << file << ": cannot write it\n";
    return 2;
  }
  std::cout << "tencache-job-docs: " << file << ": key tables rewritten\n";
  return 0;
}
