// MpiCommunicator: the Communicator over an MPI communicator (Open MPI here),
// for ranks that are processes started by mpirun. Collectives map to
// MPI_Allgather, MPI_Reduce_scatter_block, MPI_Allreduce and MPI_Barrier. MPI
// takes int counts; a collective larger than `max_count` elements (INT_MAX by
// default; tests pass less) runs as pieces of at most that many per rank, so
// shards of 2 GiB and more never wrap. MPI errors come back as Status with
// MPI's error string. One thread per rank; buffers are host memory.
#pragma once

#include <mpi.h>

#include <climits>
#include <cstddef>
#include <memory>

#include "worker/communicator.h"

namespace tencache {

// REQUIRES: MPI is initialised and stays so for the communicator's lifetime;
// 0 < max_count <= INT_MAX.
std::unique_ptr<Communicator> MakeMpiCommunicator(MPI_Comm comm, size_t max_count = INT_MAX);

}  // namespace tencache
