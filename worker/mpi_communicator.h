// MpiCommunicator: the Communicator over an MPI communicator (Open MPI here),
// for ranks that are processes started by mpirun. Collectives map one to one:
// MPI_Allgather, MPI_Reduce_scatter_block, MPI_Allreduce, MPI_Barrier. MPI
// errors come back as Status with MPI's error string. One thread per rank.
#pragma once

#include <mpi.h>

#include <memory>

#include "worker/communicator.h"

namespace tencache {

// REQUIRES: MPI is initialised and stays so for the communicator's lifetime.
std::unique_ptr<Communicator> MakeMpiCommunicator(MPI_Comm comm);

}  // namespace tencache
