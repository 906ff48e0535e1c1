// The OpenMP threads of a program that trains wait passively between parallel
// regions.
//
// libgomp reads OMP_WAIT_POLICY once, while the program loads. Its default
// lets the threads of a finished region spin for the next one, taking the
// cores from OpenBLAS's threads (fp32 matrix products) and from the cache's
// (copies, checksums, NVMe completions), which run between torch's regions.
// PASSIVE makes them sleep.
#pragma once

namespace tencache {

// Call first in main, before any thread or MPI starts. Where the environment
// sets no OMP_WAIT_POLICY, sets it to PASSIVE and executes the program again
// (/proc/self/exe, the same `argv`), so that libgomp reads it; does not return
// then. A policy the environment sets is kept. If the program cannot be
// executed again it returns, and runs with libgomp's default.
void ExecAgainWithPassiveOmpWaitUnlessSet(char** argv);

// The policy this process runs with: the environment's OMP_WAIT_POLICY, or "unset".
const char* OmpWaitPolicy();

}  // namespace tencache
