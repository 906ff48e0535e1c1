// Communicator: the collectives ZeRO-3 needs over a fixed group of ranks —
// all-gather of parameter shards, reduce-scatter of gradients, and small
// all-reduces for the loss and the metrics. Backends: one rank alone (no
// copies when the shard already sits in the gathered buffer), ranks as threads
// of one process (tests, as gloo's do), MPI (mpi_communicator.h) and NCCL on
// GPUs (nccl_communicator.h).
//
// Buffers: AllGather and ReduceScatterSum take device memory when
// device_buffers() is true (NCCL: the work is enqueued on the GPU, ordered
// after the compute stream's work so far, and the compute stream waits for it;
// the call returns without waiting), and host memory otherwise (the call
// returns when the result is there). AllReduceSum and Barrier always take host
// memory. Counts are size_t throughout: no backend narrows them.
// Every call is collective: all ranks call the same sequence with the same
// counts. Each Communicator is used by one thread (its rank); different ranks'
// communicators may be used concurrently.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"

namespace tencache {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string Describe() const = 0;
  // True when AllGather and ReduceScatterSum take device pointers (see above).
  virtual bool device_buffers() const { return false; }

  // out[r * bytes, (r + 1) * bytes) = rank r's `in`. `in` may be
  // out + rank() * bytes (in place).
  virtual Status AllGather(const void* in, void* out, size_t bytes) = 0;
  // out[i] = sum over ranks of their in[rank() * count + i], i < count.
  // REQUIRES: in holds count * size() floats; out does not overlap in.
  virtual Status ReduceScatterSum(const float* in, float* out, size_t count) = 0;
  // data[i] = sum over ranks of data[i].
  virtual Status AllReduceSum(double* data, size_t count) = 0;
  virtual Status Barrier() = 0;
};

// A group of one: collectives are copies at most.
std::unique_ptr<Communicator> MakeSoloCommunicator();

// `size` communicators whose ranks are threads of this process; give one to
// each thread. Every collective waits at most `timeout_ms` for the other ranks.
std::vector<std::unique_ptr<Communicator>> MakeThreadCommunicators(int size, int timeout_ms = 60000);

}  // namespace tencache
