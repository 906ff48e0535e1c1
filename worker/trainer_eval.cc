// The trainer's forward-only passes, outside the profiled order: the
// validation loss (train.eval_every) and sampling.
#include <algorithm>

#include "worker/trainer.h"

namespace tencache {
StatusOr<torch::Tensor> Trainer::Forward(const torch::Tensor& tokens, const HeadFn& head) {
  const int last = job_.model.layers + 1;
  torch::Tensor x;
  {
    TC_ASSIGN_OR_RETURN(Gathered e, Gather(0, 0, Phase::kForward));
    x = model_.Embed(e.flat, tokens);  // [B, T, hidden]
  }
  for (int b = 1; b < last; ++b) {
    TC_ASSIGN_OR_RETURN(Gathered g, Gather(b, b % 2, Phase::kForward));
    x = model_.Layer(b, g.flat, x);
  }
  TC_ASSIGN_OR_RETURN(Gathered h, Gather(last, 0, Phase::kForward));
  Gathered embed;  // a tied head is the embedding
  if (job_.model.tied_embeddings) {
    TC_ASSIGN_OR_RETURN(embed, Gather(0, 1, Phase::kForward));
  }
  return head(h.flat, embed.flat, x);
}

// Pass p covers validation windows [p x R x B, (p + 1) x R x B), rank r its
// B from p x R x B + r x B. A rank whose share is empty (the last pass) still
// computes one window, weighted 0: every rank joins every gather.
StatusOr<double> Trainer::Evaluate() {
  if (eval_corpus_ == nullptr) {
    return Status::FailedPrecondition("no validation data: " + job_.Where("train.eval_every") + " is 0");
  }
  AccessRecorder::Unrecorded unrecorded(recorder_.get());
  torch::NoGradGuard no_grad;
  const int B = job_.train.micro_batch, T = job_.model.seq_len;
  const uint64_t per_pass = uint64_t(B) * ranks_;
  double sums[2] = {0, 0};  // loss x windows, windows
  for (uint64_t first = 0; first < eval_count_; first += per_pass) {
    const uint64_t mine = first + uint64_t(comm_->rank()) * B;
    const int64_t n = mine < eval_count_ ? int64_t(std::min<uint64_t>(B, eval_count_ - mine)) : 0;
    const int64_t rows = std::max<int64_t>(n, 1);
    torch::Tensor seqs = torch::empty({rows, T + 1}, torch::kLong);
    for (int64_t i = 0; i < rows; ++i) {
      eval_corpus_->Window(eval_first_ + std::min(mine + uint64_t(i), eval_count_ - 1), T, seqs[i].data_ptr<int64_t>());
    }
    seqs = seqs.to(device_.device);
    const torch::Tensor targets = seqs.narrow(1, 1, T);
    TC_ASSIGN_OR_RETURN(torch::Tensor loss, Forward(seqs.narrow(1, 0, T), [&](const torch::Tensor& last,
                                                                             const torch::Tensor& embed,
                                                                             const torch::Tensor& x) {
                          return model_.HeadLoss(last, embed, x, targets);
                        }));
    sums[0] += loss.item<double>() * double(n);
    sums[1] += double(n);
  }
  store_->EndStep();  // not a training step
  TC_RETURN_IF_ERROR(comm_->AllReduceSum(sums, 2));
  return sums[0] / sums[1];
}

StatusOr<std::string> Trainer::Sample(const std::string& prompt, int tokens) {
  AccessRecorder::Unrecorded unrecorded(recorder_.get());
  torch::NoGradGuard no_grad;
  torch::manual_seed(job_.train.seed);
  std::vector<int64_t> ctx(prompt.begin(), prompt.end());
  std::string out;
  for (int i = 0; i < tokens; ++i) {
    const int64_t n = std::min<int64_t>(int64_t(ctx.size()), job_.model.seq_len);
    torch::Tensor in = torch::from_blob(ctx.data() + ctx.size() - n, {1, n}, torch::kLong).to(device_.device);
    TC_ASSIGN_OR_RETURN(torch::Tensor logits, Forward(in, [&](const torch::Tensor& last, const torch::Tensor& embed,
                                                              const torch::Tensor& x) {
                          return model_.HeadLogits(last, embed, x);  // [1, vocab], the last position's
                        }));
    // Temperature 0.8 sampling, seeded: greedy decoding of a small model repeats itself.
    torch::Tensor probs = torch::softmax(logits / 0.8, -1);
    const int64_t next = torch::multinomial(probs, 1).item<int64_t>();
    ctx.push_back(next);
    out += next < 256 ? std::string(1, char(next)) : "[" + std::to_string(next) + "]";  // beyond bytes: the id
  }
  store_->EndStep();  // not a training step
  return out;
}

StatusOr<torch::Tensor> Trainer::Logits(const std::vector<int64_t>& tokens) {
  if (tokens.empty() || int64_t(tokens.size()) > job_.model.seq_len) {
    return Status::InvalidArgument("logits: expected 1 to model.seq_len (" + std::to_string(job_.model.seq_len) +
                                   ") tokens, got " + std::to_string(tokens.size()));
  }
  AccessRecorder::Unrecorded unrecorded(recorder_.get());
  torch::NoGradGuard no_grad;
  torch::Tensor in = torch::tensor(tokens, torch::kLong).reshape({1, int64_t(tokens.size())}).to(device_.device);
  TC_ASSIGN_OR_RETURN(torch::Tensor logits, Forward(in, [&](const torch::Tensor& last, const torch::Tensor& embed,
                                                            const torch::Tensor& x) {
                        return model_.Logits(last, embed, x);
                      }));
  store_->EndStep();  // not a training step
  return logits[0].to(torch::kCPU, torch::kFloat32).contiguous();
}

}  // namespace tencache
