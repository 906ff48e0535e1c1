#include "worker/mpi_communicator.h"

#include <algorithm>
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
  MpiCommunicator(MPI_Comm comm, size_t max_count) : comm_(comm), max_count_(max_count) {
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string Describe() const override { return "mpi (" + std::to_string(size_) + " ranks)"; }

  Status AllGather(const void* in, void* out, size_t bytes) override {
    const bool in_place = in == static_cast<char*>(out) + rank_ * bytes;
    if (bytes <= max_count_) {
      const int n = static_cast<int>(bytes);
      return Check(MPI_Allgather(in_place ? MPI_IN_PLACE : in, n, MPI_BYTE, out, n, MPI_BYTE, comm_), "all-gather");
    }
    // Pieces: bytes [off, off + n) of every rank's part, received with a type
    // whose extent is one part, so rank r's piece lands at out + r * bytes + off.
    for (size_t off = 0; off < bytes; off += max_count_) {
      const int n = static_cast<int>(std::min(max_count_, bytes - off));
      MPI_Datatype piece, strided;
      MPI_Type_contiguous(n, MPI_BYTE, &piece);
      MPI_Type_create_resized(piece, 0, static_cast<MPI_Aint>(bytes), &strided);
      MPI_Type_commit(&strided);
      char* dst = static_cast<char*>(out) + off;
      const void* src = in_place ? MPI_IN_PLACE : static_cast<const char*>(in) + off;
      const int rc = in_place ? MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, dst, 1, strided, comm_)
                              : MPI_Allgather(src, n, MPI_BYTE, dst, 1, strided, comm_);
      MPI_Type_free(&strided);
      MPI_Type_free(&piece);
      TC_RETURN_IF_ERROR(Check(rc, "all-gather"));
    }
    return Status::Ok();
  }
  Status ReduceScatterSum(const float* in, float* out, size_t count) override {
    if (count <= max_count_) {
      return Check(MPI_Reduce_scatter_block(in, out, static_cast<int>(count), MPI_FLOAT, MPI_SUM, comm_),
                   "reduce-scatter");
    }
    // Pieces: rank r receives the sum of everyone's in[r * count + off, + n).
    for (size_t off = 0; off < count; off += max_count_) {
      const int n = static_cast<int>(std::min(max_count_, count - off));
      for (int r = 0; r < size_; ++r) {
        TC_RETURN_IF_ERROR(Check(MPI_Reduce(in + size_t(r) * count + off, r == rank_ ? out + off : nullptr, n,
                                            MPI_FLOAT, MPI_SUM, r, comm_),
                                 "reduce-scatter"));
      }
    }
    return Status::Ok();
  }
  Status AllReduceSum(double* data, size_t count) override {
    for (size_t off = 0; off < count || (count == 0 && off == 0); off += max_count_) {
      const int n = static_cast<int>(std::min(max_count_, count - off));
      TC_RETURN_IF_ERROR(Check(MPI_Allreduce(MPI_IN_PLACE, data + off, n, MPI_DOUBLE, MPI_SUM, comm_), "all-reduce"));
      if (count == 0) break;
    }
    return Status::Ok();
  }
  Status Barrier() override { return Check(MPI_Barrier(comm_), "barrier"); }

 private:
  MPI_Comm comm_;
  const size_t max_count_;
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace

std::unique_ptr<Communicator> MakeMpiCommunicator(MPI_Comm comm, size_t max_count) {
  return std::make_unique<MpiCommunicator>(comm, std::max<size_t>(1, std::min<size_t>(max_count, INT_MAX)));
}

}  // namespace tencache
