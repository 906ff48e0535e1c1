// TokenCorpus and BatchSampler: training data, memory-mapped and read in a
// deterministic order.
//
// A corpus is a text file read as bytes (byte-level tokens, vocab 256), a
// `.bin` / `.u16` file of little-endian uint16 tokens, or a `.u32` file of
// little-endian uint32 tokens (vocabularies above 65,536). The file is mapped
// read-only; nothing is copied until a batch is built. The sampler cuts the
// corpus into non-overlapping windows of seq_len + 1 tokens and visits them in a
// fresh permutation each epoch, drawn from the seed; sequence j of step s is a
// pure function of (seed, s, j), so any partition of a step's sequences over
// ranks and micro-batches sees the same data. TokenCorpus is immutable after
// Open (thread-safe); a BatchSampler is used by one thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/job_spec.h"
#include "common/status.h"

namespace tencache {

class TokenCorpus {
 public:
  // NotFound / InvalidArgument name the path: missing, empty, a size that is
  // not a whole number of tokens, a uint32 token above 2^31 - 1.
  static StatusOr<std::shared_ptr<TokenCorpus>> Open(const std::string& path);
  ~TokenCorpus();
  TokenCorpus(const TokenCorpus&) = delete;
  TokenCorpus& operator=(const TokenCorpus&) = delete;

  uint64_t size() const { return tokens_; }
  int token_bytes() const { return width_; }  // 1, 2 or 4
  int max_token() const { return max_token_; }
  int Token(uint64_t i) const {
    return width_ == 1   ? data_[i]
           : width_ == 2 ? reinterpret_cast<const uint16_t*>(data_)[i]
                         : int(reinterpret_cast<const uint32_t*>(data_)[i]);
  }
  const std::string& path() const { return path_; }
  // Non-overlapping windows of seq_len + 1 tokens (each window's last token is
  // the next one's first), and window `w`'s tokens. REQUIRES: w < windows(seq_len).
  uint64_t windows(int seq_len) const { return tokens_ > 0 ? (tokens_ - 1) / uint64_t(seq_len) : 0; }
  void Window(uint64_t w, int seq_len, int64_t* out) const {
    for (int i = 0; i <= seq_len; ++i) out[i] = Token(w * uint64_t(seq_len) + uint64_t(i));
  }

 private:
  TokenCorpus() = default;
  std::string path_;
  const uint8_t* data_ = nullptr;
  uint64_t bytes_ = 0;
  uint64_t tokens_ = 0;
  int width_ = 1;
  int max_token_ = 0;
};

// Ok when `job`'s model can train on `corpus`, the file at job key `key`
// (train.data, train.eval_data): every token below model.vocab, and at least
// one sequence (seq_len + 1 tokens). Else InvalidArgument naming the key, the
// file and what the model needs. The launcher checks before it starts a rank;
// the worker again when it opens the data.
Status CheckCorpusFitsModel(const TokenCorpus& corpus, const JobSpec& job, const std::string& key);

// CheckCorpusFitsModel for the job's train.data and train.eval_data, each one
// that is a regular file here of at most `max_bytes` (a path only the nodes
// have is left to them); `*skipped` gets the keys of larger files, unread.
Status CheckJobDataFitsModel(const JobSpec& job, uint64_t max_bytes, std::vector<std::string>* skipped = nullptr);

class BatchSampler {
 public:
  // Samples the corpus's first `windows` windows (0: all of them; the rest may
  // be held out for validation).
  // REQUIRES: corpus holds at least seq_len + 1 tokens; windows <= its windows.
  BatchSampler(std::shared_ptr<const TokenCorpus> corpus, int seq_len, int global_batch, uint64_t seed,
               uint64_t windows = 0);

  // The tokens of sequence `index` (0 <= index < global_batch) of `step`: seq_len
  // + 1 tokens, inputs are [0, seq_len) and targets [1, seq_len].
  void Sequence(int64_t step, int index, int64_t* out);
  uint64_t windows() const { return windows_; }

 private:
  const std::vector<uint32_t>& Permutation(uint64_t epoch);

  std::shared_ptr<const TokenCorpus> corpus_;
  const int seq_len_;
  const int global_batch_;
  const uint64_t seed_;
  const uint64_t windows_;
  uint64_t epoch_ = UINT64_MAX;
  std::vector<uint32_t> perm_;
};

}  // namespace tencache
