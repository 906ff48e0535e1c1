// The key tables of docs/job-yaml.md, generated from JobKeys().
#include <set>
#include <sstream>

#include "common/job_keys.h"

namespace tencache {
namespace {

constexpr char kBegin[] = "<!-- job keys: ";
constexpr char kEnd[] = "<!-- end job keys -->";

// The docs' name of a section: the top level's keys are under "top".
std::string DocSection(const std::string& section) { return section.empty() ? "top" : section; }

}  // namespace

std::string JobKeyTable(const std::string& section) {
  std::string out = "| key | type | meaning | default | example |\n|---|---|---|---|---|\n";
  for (const JobKey& k : JobKeys()) {
    if (k.section() != section) continue;
    out += "| `" + k.path + "` | " + k.type + " | " + k.meaning + " | " + k.default_text + " | " + k.example + " |\n";
  }
  return out;
}

StatusOr<std::string> WithJobKeyTables(const std::string& doc, const std::string& source) {
  std::set<std::string> missing;
  for (const JobKey& k : JobKeys()) missing.insert(DocSection(k.section()));
  std::istringstream in(doc);
  std::string out, line, open;  // open: the section whose table is being replaced
  int line_no = 0, open_line = 0;
  while (std::getline(in, line)) {
    ++line_no;
    const std::string where = source + ":" + std::to_string(line_no);
    if (line.rfind(kBegin, 0) == 0) {
      if (!open.empty()) return Status::InvalidArgument(where + ": a table starts before the one at line " +
                                                        std::to_string(open_line) + " ends (" + kEnd + ")");
      const size_t close = line.find(" -->");
      open = line.substr(sizeof(kBegin) - 1, close == std::string::npos ? std::string::npos : close - (sizeof(kBegin) - 1));
      if (!missing.erase(open)) {
        return Status::InvalidArgument(where + ": '" + open + "' is not a section of job keys, or has two tables; "
                                       "expected one of top, model, train, cluster, cache, once each");
      }
      open_line = line_no;
      out += line + "\n" + JobKeyTable(open == "top" ? "" : open);
      continue;
    }
    if (line == kEnd) {
      if (open.empty()) return Status::InvalidArgument(where + ": " + kEnd + " without a table before it");
      open.clear();
    }
    if (open.empty()) out += line + "\n";
  }
  if (!open.empty()) {
    return Status::InvalidArgument(source + ":" + std::to_string(open_line) + ": the table of '" + open +
                                   "' has no " + kEnd);
  }
  if (!missing.empty()) {
    return Status::InvalidArgument(source + ": no table of the job keys of '" + *missing.begin() + "' (a line " +
                                   kBegin + *missing.begin() + " -->)");
  }
  return out;
}

}  // namespace tencache
