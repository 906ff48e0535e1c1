// libFuzzer target: ParseJobText on any bytes. Every input must give an ok
// JobSpec or an InvalidArgument / NotFound naming the source — never a crash,
// a hang, an exception out of the parser, a sanitizer report or a message
// over 4 KiB (one that echoes an enormous value whole). Lines
// "#--set KEY=VALUE" are comments to YAML and `--set` overrides to the parser,
// so one input exercises both. Built by TENCACHE_FUZZ=ON (bench/fuzz runs it).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/job_spec.h"

namespace {

constexpr char kSource[] = "fuzz/job.yaml";  // relative paths in the job resolve under fuzz/, which is absent

void Fail(const std::string& why) {
  std::fprintf(stderr, "job_parser_fuzz: %s\n", why.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> overrides;
  for (size_t at = 0; at < text.size();) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    if (text.compare(at, 7, "#--set ") == 0 && end - at > 7) overrides.push_back(text.substr(at + 7, end - at - 7));
    at = end + 1;
  }
  tencache::StatusOr<tencache::JobSpec> job = tencache::ParseJobText(text, kSource, overrides);
  if (job.ok()) {
    if (job->source != kSource) Fail("an ok JobSpec lost its source");
    return 0;
  }
  const tencache::Status& s = job.status();
  if (s.code() != tencache::StatusCode::kInvalidArgument && s.code() != tencache::StatusCode::kNotFound) {
    Fail("unexpected status code: " + s.message());
  }
  if (s.message().empty()) Fail("an error without a message");
  // As tests/launcher/bad_jobs_test.cc requires: an enormous value is never echoed whole.
  if (s.message().size() > 4096) Fail("the message echoes too much: " + s.message().substr(0, 300));
  return 0;
}
