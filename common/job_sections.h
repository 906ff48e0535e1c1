// Reading a job's sections: each reads its keys through JobKeys() (each key's
// own form), then checks what spans keys (a preset's shape, the learning rates'
// order, a queue's gang scheduler, the hosts' slots) and makes paths absolute
// from the job file's folder. Internal to job parsing (common/job_spec.cc);
// not a public interface. Errors name the file or --set, the key and what was expected.
#pragma once

#include <string>

#include "common/job_reader.h"
#include "common/job_spec.h"

namespace tencache {

// Reads every key of `section` ("" for the top level) that the job sets, in JobKeys() order.
Status ReadKeys(JobReader& r, const std::string& section, JobSpec* job);

// Each REQUIRES: job->source set; ReadTrain after ReadModel, ReadCluster after
// ReadTrain (the global batch is checked against the hosts' ranks).
Status ReadModel(JobReader& r, JobSpec* job);
Status ReadTrain(JobReader& r, JobSpec* job);
Status ReadCluster(JobReader& r, JobSpec* job);
Status ReadCache(JobReader& r, JobSpec* job);

// "HOST" or "HOST:SLOTS" (cluster.hosts), "HOST [slots=N]" (a hostfile line);
// false for anything else (a host that is empty, starts with '-', or holds a
// space, quote, separator or control character; slots not from 1 to 999999).
bool ParseHostSlots(const std::string& text, bool hostfile, HostSlots* out);

}  // namespace tencache
