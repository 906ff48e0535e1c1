// JobKeys: the job.yaml schema, one table. Each key has its dotted path, the
// form its value takes, what it means, its default and an example (the key
// tables of docs/job-yaml.md are generated from these), how it is read into a
// JobSpec and how it is written from one (the resolved job a run executes).
// Reading checks the key's own form; checks across keys (a preset's shape, a
// queue needing a gang scheduler, paths relative to the job file) are
// job_spec.cc's. The table is built once and constant; thread-safe to read.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "common/job_spec.h"
#include "common/status.h"

namespace tencache {

class JobReader;

struct JobKey {
  std::string path;          // "train.lr"; its section is the part before the first dot ("" for "name")
  std::string type;          // the form of its value, in Markdown ("number > 0", "`auto` or size")
  std::string meaning;       // Markdown, one paragraph, with its unit
  std::string default_text;  // Markdown
  std::string example;       // Markdown, a value other than the default
  // Reads the key, when the job sets it, into the spec; an error names the key.
  std::function<Status(JobReader&, JobSpec*)> read;
  // The key's value as YAML text for one line of a mapping ("" when the job
  // leaves it unset). ParseJobText reads every written value back unchanged.
  std::function<std::string(const JobSpec&)> write;

  std::string section() const { return path.find('.') == std::string::npos ? "" : path.substr(0, path.find('.')); }
};

// Every key a job file may hold, section by section (top level, model, train,
// cluster, cache) in the order the resolved job lists them.
const std::vector<JobKey>& JobKeys();

// The key at `path`, or nullptr.
const JobKey* FindJobKey(const std::string& path);

// The Markdown table of `section`'s keys (key, type, meaning, default,
// example), one line a key, ending in a line break.
std::string JobKeyTable(const std::string& section);

// `doc` with the text between each "<!-- job keys: SECTION -->" line and the
// next "<!-- end job keys -->" line replaced by JobKeyTable(SECTION) (the top
// level is "top"). InvalidArgument naming `source` and the line when a marker
// is unpaired or names no section; every section with keys must have a table.
StatusOr<std::string> WithJobKeyTables(const std::string& doc, const std::string& source);

}  // namespace tencache
