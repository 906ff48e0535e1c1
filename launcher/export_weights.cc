#include "launcher/export_weights.h"

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "common/byte_size.h"
#include "common/hf_layout.h"
#include "common/job_spec.h"
#include "common/safetensors.h"
#include "common/safetensors_shards.h"
#include "common/text_file.h"
#include "launcher/exit_code.h"

namespace tencache {
namespace {

namespace fs = std::filesystem;

StatusOr<DType> ExportDType(const std::string& flag, DType job) {
  if (flag.empty()) return job;
  if (flag == "bf16") return DType::kBf16;
  if (flag == "fp16") return DType::kFp16;
  if (flag == "fp32") return DType::kFp32;
  return Status::InvalidArgument("--dtype '" + flag + "': expected bf16, fp16 or fp32");
}

StDType Stored(DType d) {
  return d == DType::kFp32 ? StDType::kF32 : d == DType::kFp16 ? StDType::kF16 : StDType::kBF16;
}

Status Export(const ExportOptions& o) {
  if (o.format != "safetensors") {
    return Status::InvalidArgument("--format '" + o.format + "': expected safetensors");
  }
  const fs::path run(o.run_dir);
  TC_ASSIGN_OR_RETURN(JobSpec job, LoadJobFile((run / "job.resolved.yaml").string()));
  const fs::path weights = run / "weights";
  std::error_code ec;
  if (!fs::exists(weights / "model.safetensors", ec) && !fs::exists(weights / "model.safetensors.index.json", ec)) {
    return Status::InvalidArgument(o.run_dir + ": no weights/model.safetensors or model.safetensors.index.json: the "
                                   "run did not finish (the workers write them after the last step)");
  }
  const StatusOr<uint64_t> max_shard_size = ParseByteSize(o.max_shard_size);
  if (!max_shard_size.ok() || *max_shard_size == 0) {
    return Status::InvalidArgument("--max-shard-size '" + o.max_shard_size + "': expected a positive size such as 5GB or 2GiB");
  }
  const uint64_t max_shard = *max_shard_size;
  TC_ASSIGN_OR_RETURN(DType dtype, ExportDType(o.dtype, job.dtype));
  TC_ASSIGN_OR_RETURN(HfArch arch, HfArchFor(job.model));
  TC_ASSIGN_OR_RETURN(nlohmann::ordered_json config, HfConfig(job.model, dtype));
  TC_ASSIGN_OR_RETURN(SafetensorsReader in, SafetensorsReader::Open(weights.string()));
  // The run's file must be the job's model, tensor for tensor.
  std::vector<SafetensorsWriter::Entry> entries;
  for (const HfTensor& t : arch.tensors) {
    const StTensor* s = in.Find(t.theirs);
    if (s == nullptr || s->shape != t.their_dims) {
      return Status::InvalidArgument(weights.string() + ": tensor '" + t.theirs + "' " +
                                     (s == nullptr ? "is missing" : "has another shape") + " for the job's model");
    }
    entries.push_back({t.theirs, Stored(dtype), t.their_dims});
  }
  fs::create_directories(o.out, ec);
  if (ec) return Status::IoError(o.out + ": cannot create: " + ec.message());
  TC_ASSIGN_OR_RETURN(ShardedSafetensorsWriter out,
                      ShardedSafetensorsWriter::Begin(o.out, entries, {{"format", "pt"}}, max_shard));
  for (const SafetensorsWriter::Entry& e : entries) {
    const StTensor* s = in.Find(e.name);
    std::vector<float> values(s->numel());
    TC_RETURN_IF_ERROR(in.ReadF32(*s, values.data()));
    std::vector<char> bytes(values.size() * StDTypeBytes(e.dtype));
    ConvertFromF32(e.dtype, values.data(), values.size(), bytes.data());
    TC_RETURN_IF_ERROR(out.Write(e.name, bytes.data(), bytes.size()));
  }
  TC_RETURN_IF_ERROR(out.Finish());
  TC_RETURN_IF_ERROR(WriteFileAtomically((fs::path(o.out) / "config.json").string(), config.dump(2) + "\n"));
  std::printf("Exported %zu tensors of %s (%s, %s) to %s: %zu safetensors file(s)%s and config.json\n", entries.size(),
              job.model.name.c_str(), arch.architecture.c_str(), DTypeName(dtype), o.out.c_str(), out.files().size(),
              out.files().size() > 1 ? " with model.safetensors.index.json" : "");
  return Status::Ok();
}

}  // namespace

int ExportWeights(const ExportOptions& options) {
  Status s = Export(options);
  return s.ok() ? 0 : FailCommand(s);
}

}  // namespace tencache
