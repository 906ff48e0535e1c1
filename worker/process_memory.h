// This process's resident memory as Linux reports it: bytes resident now and
// at the peak (/proc/self/status: VmRSS, VmHWM). ResetPeakResidentBytes starts
// a new peak from what is resident now (writing 5 to /proc/self/clear_refs),
// so that the worker can tell loading's peak from training's. Thread-safe.
#pragma once

namespace tencache {

struct ResidentBytes {
  long long now = -1, peak = -1;  // -1 where /proc cannot say
};
ResidentBytes ReadResidentBytes();
// False when the kernel refuses (the peak then runs on from the start).
bool ResetPeakResidentBytes();

}  // namespace tencache
