#include "worker/mpi_communicator.h"

#include <string>

namespace tencache {
namespace {

Status Check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return Status::Ok();
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  return Status::IoError(std::string("MPI ") + what + ": " + std::string(text, len));
}

class MpiCommunicator : public Communicator {
 public:
  explicit MpiCommunicator(MPI_Comm comm) : comm_(comm) {
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string Describe() const override { return "mpi (" + std::to_string(size_) + " ranks)"; }

  Status AllGather(const void* in, void* out, size_t bytes) override {
    const void* send = in == static_cast<char*>(out) + rank_ * bytes ? MPI_IN_PLACE : in;
    return Check(MPI_Allgather(send, static_cast<int>(bytes), MPI_BYTE, out, static_cast<int>(bytes), MPI_BYTE, comm_),
                 "all-gather");
  }
  Status ReduceScatterSum(const float* in, float* out, size_t count) override {
    return Check(MPI_Reduce_scatter_block(in, out, static_cast<int>(count), MPI_FLOAT, MPI_SUM, comm_),
                 "reduce-scatter");
  }
  Status AllReduceSum(double* data, size_t count) override {
    return Check(MPI_Allreduce(MPI_IN_PLACE, data, static_cast<int>(count), MPI_DOUBLE, MPI_SUM, comm_),
                 "all-reduce");
  }
  Status Barrier() override { return Check(MPI_Barrier(comm_), "barrier"); }

 private:
  MPI_Comm comm_;
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace

std::unique_ptr<Communicator> MakeMpiCommunicator(MPI_Comm comm) { return std::make_unique<MpiCommunicator>(comm); }

}  // namespace tencache
