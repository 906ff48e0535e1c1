#include "common/token_corpus.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <random>

namespace tencache {

StatusOr<std::shared_ptr<TokenCorpus>> TokenCorpus::Open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return Status::NotFound(path + ": cannot open the training data (" + std::strerror(errno) +
                            "); expected a text file, a .bin/.u16 file of uint16 tokens or a .u32 file of uint32 tokens");
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || st.st_size == 0) {
    ::close(fd);
    return Status::InvalidArgument(path + ": the training data is empty");
  }
  std::shared_ptr<TokenCorpus> c(new TokenCorpus());
  c->path_ = path;
  c->bytes_ = static_cast<uint64_t>(st.st_size);
  c->width_ = DataBytesPerToken(path);
  if (c->bytes_ % c->width_ != 0) {
    ::close(fd);
    return Status::InvalidArgument(path + ": a uint" + std::to_string(8 * c->width_) +
                                   " token file must hold a whole number of " + std::to_string(c->width_) +
                                   "-byte tokens, has " + std::to_string(c->bytes_) + " bytes");
  }
  void* map = ::mmap(nullptr, c->bytes_, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED) return Status::IoError(path + ": mmap failed: " + std::strerror(errno));
  c->data_ = static_cast<const uint8_t*>(map);
  c->tokens_ = c->bytes_ / c->width_;
  for (uint64_t i = 0; i < c->tokens_; ++i) {
    if (c->width_ == 4 && reinterpret_cast<const uint32_t*>(c->data_)[i] > 0x7fffffffu) {
      return Status::InvalidArgument(path + ": token " + std::to_string(i) + " is " +
                                     std::to_string(reinterpret_cast<const uint32_t*>(c->data_)[i]) +
                                     ": expected ids below 2^31");
    }
    c->max_token_ = std::max(c->max_token_, c->Token(i));
  }
  return c;
}

Status CheckCorpusFitsModel(const TokenCorpus& corpus, const JobSpec& job, const std::string& key) {
  const ModelShape& m = job.model;
  if (corpus.max_token() >= m.vocab) {
    return Status::InvalidArgument(job.Where("model.vocab") + ": the data '" + corpus.path() + "' (" + key +
                                   ") holds token " + std::to_string(corpus.max_token()) + ", beyond the vocabulary of " +
                                   std::to_string(m.vocab) + "; expected model.vocab of at least " +
                                   std::to_string(corpus.max_token() + 1));
  }
  if (corpus.size() < uint64_t(m.seq_len) + 1) {
    return Status::InvalidArgument(job.Where(key) + ": '" + corpus.path() + "' holds " + std::to_string(corpus.size()) +
                                   " tokens, fewer than one sequence of " + std::to_string(m.seq_len + 1));
  }
  return Status::Ok();
}

Status CheckJobDataFitsModel(const JobSpec& job, uint64_t max_bytes, std::vector<std::string>* skipped) {
  for (const auto& [key, path] : {std::pair<const char*, std::string>{"train.data", job.train.data},
                                  {"train.eval_data", job.train.eval_data}}) {
    struct stat st;
    if (path.empty() || ::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    if (uint64_t(st.st_size) > max_bytes) {
      if (skipped != nullptr) skipped->push_back(key);
      continue;
    }
    StatusOr<std::shared_ptr<TokenCorpus>> corpus = TokenCorpus::Open(path);
    if (!corpus.ok()) return Status::InvalidArgument(job.Where(key) + ": " + corpus.status().message());
    TC_RETURN_IF_ERROR(CheckCorpusFitsModel(**corpus, job, key));
  }
  return Status::Ok();
}

TokenCorpus::~TokenCorpus() {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), bytes_);
}

BatchSampler::BatchSampler(std::shared_ptr<const TokenCorpus> corpus, int seq_len, int global_batch, uint64_t seed,
                           uint64_t windows)
    : corpus_(std::move(corpus)),
      seq_len_(seq_len),
      global_batch_(global_batch),
      seed_(seed),
      windows_(windows > 0 ? windows : corpus_->windows(seq_len)) {}

const std::vector<uint32_t>& BatchSampler::Permutation(uint64_t epoch) {
  if (epoch != epoch_) {
    perm_.resize(windows_);
    for (uint64_t i = 0; i < windows_; ++i) perm_[i] = static_cast<uint32_t>(i);
    std::mt19937_64 rng(seed_ * 0x9E3779B97F4A7C15ull + epoch);
    for (uint64_t i = windows_ - 1; i > 0; --i) {  // Fisher-Yates, portable (no std::shuffle)
      uint64_t j = rng() % (i + 1);
      std::swap(perm_[i], perm_[j]);
    }
    epoch_ = epoch;
  }
  return perm_;
}

void BatchSampler::Sequence(int64_t step, int index, int64_t* out) {
  const uint64_t n = static_cast<uint64_t>(step) * global_batch_ + index;
  const uint32_t window = Permutation(n / windows_)[n % windows_];
  corpus_->Window(window, seq_len_, out);
}

}  // namespace tencache
