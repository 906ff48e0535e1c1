// What the trainer's tests share: a small job, its corpus, training it on one
// or more ranks (threads), and the same job trained in plain libtorch.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/job_spec.h"
#include "reference_gpt.h"
#include "worker/trainer.h"

namespace tencache {

extern const char kCorpus[];  // GPL-3's text, on every Debian machine

// A per-process NVMe folder for `tag`.
std::string NvmeDir(const std::string& tag);

// A small GPT (2 layers, width 64) that trains in well under a second a step;
// fp32 unless `extra` sets model.dtype=bf16 (mixed precision).
JobSpec SmallJob(const std::string& policy, const std::string& tag, std::vector<std::string> extra = {});

std::shared_ptr<const TokenCorpus> Corpus();

// `steps` steps of `job` on `comm`'s rank (failures are test failures).
std::vector<StepMetrics> Train(const JobSpec& job, Communicator* comm, int steps);
// The same on `ranks` thread ranks; rank 0's metrics.
std::vector<StepMetrics> TrainOnRanks(const JobSpec& job, int ranks, int steps);

// The job's model in plain libtorch with the job's initial weights.
ReferenceGpt InitialReference(const JobSpec& job);

// The same job in plain libtorch (ReferenceGpt from the job's initial blocks)
// trained by the optimizer `make_opt` builds over its parameters: each step's
// loss. `before_step` (when given) runs first each step, `after_backward`
// between the backward and the optimizer's step.
std::vector<double> ReferenceLosses(
    const JobSpec& job, int steps,
    const std::function<std::unique_ptr<torch::optim::Optimizer>(ReferenceGpt&)>& make_opt,
    const std::function<void(torch::optim::Optimizer&, int)>& before_step = nullptr,
    const std::function<void(ReferenceGpt&, int)>& after_backward = nullptr);

void ExpectLossesWithin(const std::vector<StepMetrics>& ours, const std::vector<double>& want, double rel);

}  // namespace tencache
