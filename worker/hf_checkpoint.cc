#include "worker/hf_checkpoint.h"

#include <filesystem>
#include <fstream>
#include <map>

namespace tencache {
namespace {

namespace fs = std::filesystem;

std::string Dims(const std::vector<int64_t>& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + "]";
}

// The architecture's tensors of one block, in the block's order: (index in
// arch.tensors, our parameter slot). Both run in the same order (hf_layout's
// table lists each block's tensors as the block lays them out).
std::vector<std::pair<size_t, const ParamSlot*>> TensorsOfBlock(const HfArch& arch, const BlockLayout& layout) {
  std::vector<std::pair<size_t, const ParamSlot*>> out;
  size_t i = 0;
  for (size_t k = 0; k < arch.tensors.size() && i < layout.params.size(); ++k) {
    if (arch.tensors[k].ours == layout.params[i].name) out.push_back({k, &layout.params[i++]});
  }
  return out;
}

}  // namespace

StatusOr<HfCheckpointReader> HfCheckpointReader::Open(const std::string& path, const DecoderModel& model,
                                                      const std::string& key) {
  StatusOr<HfArch> arch = HfArchFor(model.shape());
  if (!arch.ok()) return arch.status().WithContext(key);
  StatusOr<SafetensorsReader> reader = SafetensorsReader::Open(path);
  if (!reader.ok()) return Status::InvalidArgument(key + ": " + reader.status().message());
  HfCheckpointReader r(std::move(*reader), model, std::move(*arch));
  std::map<const StTensor*, bool> used;
  for (const HfTensor& t : r.arch_.tensors) {
    const StTensor* s = r.reader_.Find(t.theirs);
    if (s == nullptr && !t.prefix.empty()) s = r.reader_.Find(t.theirs.substr(t.prefix.size()));
    if (s == nullptr) {
      return Status::InvalidArgument(key + ": " + path + ": tensor '" + t.theirs + "' (the " + r.arch_.model_type +
                                     " layout of our " + t.ours + ") is missing");
    }
    if (s->shape != t.their_dims) {
      return Status::InvalidArgument(key + ": " + path + ": tensor '" + s->name + "' has shape " + Dims(s->shape) +
                                     "; the job's model needs " + Dims(t.their_dims));
    }
    used[s] = true;
    r.found_.push_back(s);
  }
  for (int b = 0; b < model.num_blocks(); ++b) {
    if (TensorsOfBlock(r.arch_, model.layout(b)).size() != model.layout(b).params.size()) {
      return Status::Internal(key + ": the " + r.arch_.model_type + " name table does not cover block " +
                              std::to_string(b) + " in its order (common/hf_layout.cc)");
    }
  }
  for (const StTensor& s : r.reader_.tensors()) {
    if (!used.count(&s) && !r.arch_.Ignorable(s.name)) {
      return Status::InvalidArgument(key + ": " + path + ": tensor '" + s.name + "' is not part of the job's " +
                                     r.arch_.model_type + " model (" + std::to_string(model.shape().layers) +
                                     " layers): is the checkpoint another model or size?");
    }
  }
  return r;
}

Status HfCheckpointReader::ReadBlock(int block, float* out, int64_t begin, int64_t end) const {
  for (const auto& [k, slot] : TensorsOfBlock(arch_, model_->layout(block))) {
    if (slot->offset >= end || slot->offset + slot->numel <= begin) continue;  // another rank's part
    std::vector<float> theirs(found_[k]->numel());
    TC_RETURN_IF_ERROR(reader_.ReadF32(*found_[k], theirs.data()));
    HfReorder(arch_.tensors[k], model_->shape(), /*to_theirs=*/false, theirs.data(), out + slot->offset);
  }
  return Status::Ok();
}

StatusOr<HfCheckpointWriter> HfCheckpointWriter::Begin(const std::string& dir, const DecoderModel& model,
                                                      StDType dtype, DType config_dtype, uint64_t max_shard_bytes) {
  TC_ASSIGN_OR_RETURN(HfArch arch, HfArchFor(model.shape()));
  TC_ASSIGN_OR_RETURN(nlohmann::ordered_json config, HfConfig(model.shape(), config_dtype));
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Status::IoError(dir + ": cannot create: " + ec.message());
  std::ofstream(fs::path(dir) / "config.json") << config.dump(2) << "\n";
  std::vector<SafetensorsWriter::Entry> entries;
  for (const HfTensor& t : arch.tensors) entries.push_back({t.theirs, dtype, t.their_dims});
  TC_ASSIGN_OR_RETURN(ShardedSafetensorsWriter w,
                      ShardedSafetensorsWriter::Begin(dir, std::move(entries), {{"format", "pt"}}, max_shard_bytes));
  return HfCheckpointWriter(std::move(w), model, std::move(arch), dtype);
}

Status HfCheckpointWriter::WriteBlock(int block, const float* flat) {
  for (const auto& [k, slot] : TensorsOfBlock(arch_, model_->layout(block))) {
    const HfTensor& t = arch_.tensors[k];
    std::vector<float> theirs(slot->numel);
    HfReorder(t, model_->shape(), /*to_theirs=*/true, flat + slot->offset, theirs.data());
    std::vector<char> bytes(size_t(slot->numel) * StDTypeBytes(dtype_));
    ConvertFromF32(dtype_, theirs.data(), uint64_t(slot->numel), bytes.data());
    TC_RETURN_IF_ERROR(writer_.Write(t.theirs, bytes.data(), bytes.size()));
  }
  return Status::Ok();
}

Status HfCheckpointWriter::Finish() { return writer_.Finish(); }

Status WriteInitialWeights(const DecoderModel& model, uint64_t seed, DType config_dtype, const std::string& dir,
                           uint64_t max_shard_bytes, StDType stored) {
  TC_ASSIGN_OR_RETURN(HfCheckpointWriter out, HfCheckpointWriter::Begin(dir, model, stored, config_dtype, max_shard_bytes));
  for (int b = 0; b < model.num_blocks(); ++b) {
    std::vector<float> flat(size_t(model.layout(b).numel));
    model.InitBlock(b, seed, flat.data());
    TC_RETURN_IF_ERROR(out.WriteBlock(b, flat.data()));
  }
  return out.Finish();
}

}  // namespace tencache
