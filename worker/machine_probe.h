// MachineProbe: how fast this machine runs the job's own work, measured in a
// second or two before a run so that the launcher's resource model can predict
// the step time here (tencache-worker --probe, under mpirun with the run's rank
// count, so that ranks contend for cores as they will in the run).
//
// Every rank measures at the same time; the result is rank 0's, with the
// collectives measured across all ranks. Times are medians of a few repeats
// after one warm-up. Collective: every rank calls ProbeMachine.
#pragma once

#include <memory>

#include "common/job_spec.h"
#include "common/probe_result.h"
#include "common/status.h"
#include "worker/communicator.h"
#include "common/token_corpus.h"

namespace tencache {


// Also runs a few steps of the in-memory reference (cache.policy none) on
// `corpus`: the whole step as the worker runs it, to which the launcher's model
// adds what the cache moves. REQUIRES: the job's model trains in the worker
// (CheckWorkerSupports) and its micro_batch is resolved (> 0).
StatusOr<ProbeResult> ProbeMachine(const JobSpec& job, Communicator* comm, int threads,
                                   std::shared_ptr<const TokenCorpus> corpus);

}  // namespace tencache
