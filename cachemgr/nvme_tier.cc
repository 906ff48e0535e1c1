#include "cachemgr/nvme_tier.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <algorithm>
#include <list>

#include "cachemgr/crc32c.h"
#include "common/byte_size.h"

namespace tencache {
namespace {

constexpr int kMaxRetries = 16;  // per chunk, for -EAGAIN/-EINTR and short transfers
// How long the ring thread waits for a completion at most; a new request
// interrupts the wait (BlockFile::Interrupt), so this only bounds a lost wake-up.
constexpr std::chrono::milliseconds kReapWait(10000);

bool Aligned(uint64_t v) { return v % kDirectIoAlignment == 0; }

}  // namespace

struct NvmeTier::Request {
  Kind kind = Kind::kRead;
  uint8_t* buf = nullptr;
  uint64_t offset = 0;
  uint64_t len = 0;
  std::string what;
  uint64_t next = 0;         // bytes already cut into chunks
  uint32_t outstanding = 0;  // chunks cut and not yet finished
  Status status;             // the first error
  std::shared_ptr<Completion> ticket;
  std::vector<std::pair<void*, uint64_t>> buffers;  // kRegister
};

struct NvmeTier::Chunk {
  Request* request = nullptr;
  uint8_t* buf = nullptr;
  uint64_t offset = 0;
  uint64_t len = 0;
  uint64_t done = 0;  // bytes already transferred (short I/O)
  uint32_t crc = 0;
  int retries = 0;
};

bool IoTicket::ready() const {
  return !state_ || state_->done();
}

Status IoTicket::Wait(std::chrono::milliseconds timeout) const {
  if (!state_) return Status::FailedPrecondition("waiting on an empty IoTicket");
  return state_->Wait(timeout, "I/O");
}

NvmeTier::NvmeTier(NvmeTierOptions options)
    : options_(std::move(options)), env_(options_.env ? options_.env : PosixFileEnv()) {}

StatusOr<std::unique_ptr<NvmeTier>> NvmeTier::Open(const NvmeTierOptions& options) {
  if (options.dir.empty()) return Status::InvalidArgument("nvme tier: directory is empty");
  if (options.queue_depth == 0 || options.queue_depth > 4096)
    return Status::InvalidArgument("nvme tier: queue depth " + std::to_string(options.queue_depth) +
                                   " out of range; expected 1..4096");
  if (options.block_size == 0 || !Aligned(options.block_size) || options.block_size > (1u << 30))
    return Status::InvalidArgument("nvme tier: block size " + std::to_string(options.block_size) +
                                   " must be a multiple of 4 KiB, at most 1 GiB");
  std::unique_ptr<NvmeTier> tier(new NvmeTier(options));
  TC_RETURN_IF_ERROR(tier->env_->CreateDir(options.dir));
  tier->path_ = options.dir + "/rank-" + std::to_string(options.rank) + ".tcnvme";
  return tier;
}

NvmeTier::~NvmeTier() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (file_) file_->Interrupt();
  if (ring_thread_.joinable()) ring_thread_.join();
  if (file_) {  // its bytes are copies of this process's tensors: nobody needs them after it
    file_.reset();
    (void)env_->RemoveFile(path_);
  }
}

std::string NvmeTier::Describe() const {
  MutexLock lock(&mu_);
  const std::string io = buffered_reason_.empty() ? "" : ", buffered fallback: " + buffered_reason_;
  const std::string fixed = fixed_off_reason_.empty() ? "" : ", fixed buffers off: " + fixed_off_reason_;
  return "nvme(" + (engine_.empty() ? std::string("not reserved") : engine_) + io + fixed + ", " + path_ +
         ", depth " + std::to_string(options_.queue_depth) + ", block " +
         FormatBytes(options_.block_size) + ", checksums " +
         (options_.checksums ? std::string("crc32c-") + Crc32cImplementation() : "off") + ")";
}

StatusOr<uint64_t> NvmeTier::Reserve(uint64_t bytes) {
  MutexLock lock(&mu_);
  if (file_) return Status::ResourceExhausted(path_ + ": the NVMe file is sized once");
  bytes = (bytes + kDirectIoAlignment - 1) / kDirectIoAlignment * kDirectIoAlignment;
  BlockFileOptions fo;
  fo.queue_depth = options_.queue_depth;
  fo.direct_io = options_.direct_io;
  fo.force_sync_engine = options_.force_sync_engine;
  StatusOr<std::unique_ptr<BlockFile>> file = env_->OpenBlockFile(path_, bytes, fo);
  if (!file.ok() && fo.direct_io && file.status().code() == StatusCode::kUnavailable) {
    buffered_reason_ = file.status().message();
    std::fprintf(stderr, "tencache: warning: %s; using buffered I/O (the page cache) for the NVMe tier\n",
                 buffered_reason_.c_str());
    fo.direct_io = false;
    file = env_->OpenBlockFile(path_, bytes, fo);
  }
  if (!file.ok()) return file.status();
  file_ = std::move(*file);
  file_bytes_ = bytes;
  engine_ = file_->engine();
  chunks_.resize(options_.queue_depth);
  for (uint32_t i = options_.queue_depth; i > 0; --i) free_chunks_.push_back(i - 1);
  completions_.reserve(options_.queue_depth);
  ring_thread_ = std::thread([this] { RingLoop(); });
  return RegionBase(0);
}

uint64_t NvmeTier::reserved_bytes() const {
  MutexLock lock(&mu_);
  return file_bytes_;
}

uint64_t NvmeTier::allocations() const { return reserved_bytes() > 0 ? 1 : 0; }

Status NvmeTier::CheckRange(uint64_t offset, const void* buf, uint64_t len,
                            const std::string& what) const {
  if (!Aligned(offset) || !Aligned(len) || !Aligned(reinterpret_cast<uintptr_t>(buf)))
    return Status::InvalidArgument("tensor " + what + ": file " + path_ + ": offset " +
                                   std::to_string(offset) + ", length " + std::to_string(len) +
                                   " and buffer must be 4 KiB aligned for O_DIRECT");
  if (offset + len > file_bytes_ || offset + len < offset)
    return Status::InvalidArgument("tensor " + what + ": file " + path_ + ": range [" +
                                   std::to_string(offset) + ", " + std::to_string(offset + len) +
                                   ") beyond the file's " + std::to_string(file_bytes_) + " bytes");
  return Status::Ok();
}

IoTicket NvmeTier::Enqueue(std::unique_ptr<Request> request) {
  IoTicket ticket;
  ticket.state_ = std::make_shared<Completion>();
  request->ticket = ticket.state_;
  bool interrupt = false;
  {
    MutexLock lock(&mu_);
    if (!file_ || stop_) {
      ticket.state_->Set(Status::FailedPrecondition(
                                  "tensor " + request->what + ": file " + path_ + " is not open"));
      return ticket;
    }
    if (request->kind != Kind::kRegister) {
      Status st = CheckRange(request->offset, request->buf, request->len, request->what);
      if (!st.ok()) {
        ticket.state_->Set(st);
        return ticket;
      }
    }
    queue_.push_back(std::move(request));
    interrupt = ring_may_reap_;
    ring_may_reap_ = false;
  }
  cv_.notify_one();
  if (interrupt) file_->Interrupt();  // the ring may be waiting for completions: take this one now
  return ticket;
}

IoTicket NvmeTier::SubmitWrite(uint64_t offset, const void* src, uint64_t len, std::string what) {
  auto r = std::make_unique<Request>();
  r->kind = Kind::kWrite;
  r->buf = static_cast<uint8_t*>(const_cast<void*>(src));
  r->offset = RegionOffset(offset);
  r->len = len;
  r->what = std::move(what);
  return Enqueue(std::move(r));
}

IoTicket NvmeTier::SubmitRead(uint64_t offset, void* dst, uint64_t len, std::string what) {
  auto r = std::make_unique<Request>();
  r->kind = Kind::kRead;
  r->buf = static_cast<uint8_t*>(dst);
  r->offset = RegionOffset(offset);
  r->len = len;
  r->what = std::move(what);
  return Enqueue(std::move(r));
}

Status NvmeTier::Write(uint64_t offset, const void* src, uint64_t len, const std::string& what,
                       std::chrono::milliseconds timeout) {
  return Await(SubmitWrite(offset, src, len, what), /*write=*/true, what, timeout);
}

Status NvmeTier::Read(uint64_t offset, void* dst, uint64_t len, const std::string& what,
                      std::chrono::milliseconds timeout) {
  return Await(SubmitRead(offset, dst, len, what), /*write=*/false, what, timeout);
}

Status NvmeTier::Await(const IoTicket& ticket, bool write, const std::string& what,
                       std::chrono::milliseconds timeout) const {
  Status st = ticket.Wait(timeout);
  if (st.code() == StatusCode::kTimeout)
    return st.WithContext("tensor " + what + ": file " + path_ + (write ? ": write" : ": read"));
  return st;
}

Status NvmeTier::RegisterBuffers(const std::vector<std::pair<void*, uint64_t>>& buffers,
                                 std::chrono::milliseconds timeout) {
  auto r = std::make_unique<Request>();
  r->kind = Kind::kRegister;
  r->what = "(buffer registration)";
  for (const auto& [base, len] : buffers) {  // io_uring takes at most 1 GiB per buffer
    for (uint64_t at = 0; at < len; at += kMaxFixedBuffer)
      r->buffers.push_back({static_cast<uint8_t*>(base) + at, std::min(kMaxFixedBuffer, len - at)});
  }
  Status st = Enqueue(std::move(r)).Wait(timeout);
  MutexLock lock(&mu_);
  fixed_off_reason_ = st.ok() ? "" : st.message();
  return st;
}

// ---- the ring thread ----

bool NvmeTier::TakeRequests(std::deque<std::unique_ptr<Request>>* local) {
  MutexLock lock(&mu_);
  const bool idle = local->empty() && retry_.empty() && file_->in_flight() == 0;
  if (idle) cv_.wait(lock.native(), [&]() REQUIRES(mu_) { return stop_ || !queue_.empty(); });
  while (!queue_.empty()) {
    local->push_back(std::move(queue_.front()));
    queue_.pop_front();
  }
  ring_may_reap_ = true;  // from here until the next call, a new request interrupts the reap
  return stop_;
}

bool NvmeTier::NextChunk(std::deque<std::unique_ptr<Request>>* local, Chunk* chunk) {
  for (auto& r : *local) {
    if (r->kind == Kind::kRegister) return false;  // registration waits for a quiet ring
    if (r->next >= r->len || !r->status.ok()) continue;
    *chunk = Chunk{};
    chunk->request = r.get();
    chunk->buf = r->buf + r->next;
    chunk->offset = r->offset + r->next;
    chunk->len = std::min(options_.block_size, r->len - r->next);
    r->next += chunk->len;
    ++r->outstanding;
    return true;
  }
  return false;
}

// Queues one chunk (first try or retry). A first write also goes on
// to_checksum_: its CRC is computed after the flush, while the device reads the
// same (unchanging) buffer, so checksums never delay a submission.
Status NvmeTier::SubmitChunk(Chunk* chunk) {
  const bool write = chunk->request->kind == Kind::kWrite;
  const bool first = chunk->done == 0 && chunk->retries == 0;
  if (write && first) extents_[chunk->offset] = Extent{};  // stale until this write lands
  IoRequest r;
  r.op = write ? IoOp::kWrite : IoOp::kRead;
  r.buf = chunk->buf + chunk->done;
  r.len = chunk->len - chunk->done;
  r.offset = chunk->offset + chunk->done;
  r.tag = static_cast<uint64_t>(chunk - chunks_.data());
  for (size_t i = 0; i < fixed_.size(); ++i) {
    const uint8_t* base = fixed_[i].first;
    if (static_cast<uint8_t*>(r.buf) >= base &&
        static_cast<uint8_t*>(r.buf) + r.len <= base + fixed_[i].second) {
      r.fixed_buffer = static_cast<int>(i);
      break;
    }
  }
  Status st = file_->Submit(r);
  if (st.ok() && write && first && options_.checksums)
    to_checksum_.push_back(static_cast<uint32_t>(chunk - chunks_.data()));
  return st;
}

std::string NvmeTier::Where(const Request& r, uint64_t offset, uint64_t len) const {
  return "tensor " + r.what + ": file " + path_ + ": " + (r.kind == Kind::kWrite ? "write" : "read") +
         " of extent at offset " + std::to_string(offset) + " (" + std::to_string(len) + " bytes)";
}

std::string NvmeTier::Where(const Chunk& chunk) const { return Where(*chunk.request, chunk.offset, chunk.len); }

// Checks one chunk that has been read into its request's buffer; the request
// stays outstanding until this ran. On a mismatch the bytes are zeroed.
void NvmeTier::VerifyRead(const PendingVerify& v) {
  const auto it = extents_.find(v.offset);
  Status st;
  if (it == extents_.end() || it->second.len != v.len) {
    st = Status::Corruption(Where(*v.request, v.offset, v.len) +
                            ": no checksum recorded for this extent (never written, or written with another layout)");
  } else {
    const uint32_t got = Crc32c(0, v.buf, v.len);
    if (got != it->second.crc) {
      char buf[96];
      std::snprintf(buf, sizeof(buf), ": checksum mismatch (stored crc32c %08x, read %08x)", it->second.crc, got);
      st = Status::Corruption(Where(*v.request, v.offset, v.len) + buf);
    }
  }
  if (!st.ok()) {
    std::memset(v.buf, 0, v.len);  // never leave corrupt bytes in the caller's buffer
    if (v.request->status.ok()) v.request->status = std::move(st);
  }
  --v.request->outstanding;
}

// The checksum work of one pass, done after the flush so the device is busy meanwhile.
void NvmeTier::ChecksumPass() {
  for (uint32_t i : to_checksum_) {
    Chunk& c = chunks_[i];
    c.crc = Crc32c(0, c.buf, c.len);
  }
  to_checksum_.clear();
  for (const PendingVerify& v : to_verify_) VerifyRead(v);
  to_verify_.clear();
}

void NvmeTier::OnCompletion(Chunk* chunk, int64_t result) {
  const uint64_t remaining = chunk->len - chunk->done;
  const bool again = result == -EAGAIN || result == -EINTR;
  const bool short_io = result > 0 && static_cast<uint64_t>(result) < remaining;
  if (again || short_io) {
    if (short_io) chunk->done += static_cast<uint64_t>(result);
    if (++chunk->retries > kMaxRetries) {
      FinishChunk(chunk, Status::IoError(Where(*chunk) + ": gave up after " +
                                         std::to_string(kMaxRetries) + " retries (short or -EAGAIN)"));
    } else {
      retry_.push_back(static_cast<uint32_t>(chunk - chunks_.data()));
    }
    return;
  }
  if (result < 0) {
    FinishChunk(chunk, Status::IoError(Where(*chunk) + ": " + std::strerror(static_cast<int>(-result))));
    return;
  }
  if (result == 0) {
    FinishChunk(chunk, Status::IoError(Where(*chunk) + ": short I/O: 0 of " +
                                       std::to_string(remaining) + " remaining bytes transferred"));
    return;
  }
  chunk->done += static_cast<uint64_t>(result);
  if (options_.checksums && chunk->request->kind == Kind::kRead) {
    // The slot is free for the next chunk now; the request waits for the check.
    to_verify_.push_back({chunk->request, chunk->buf, chunk->offset, chunk->len});
    ++chunk->request->outstanding;
  } else if (options_.checksums) {  // computed in the ChecksumPass right after this chunk's flush
    extents_[chunk->offset] = Extent{chunk->crc, static_cast<uint32_t>(chunk->len)};
  }
  FinishChunk(chunk, Status::Ok());
}

void NvmeTier::FinishChunk(Chunk* chunk, Status status) {
  Request* r = chunk->request;
  if (!status.ok() && r->status.ok()) r->status = std::move(status);
  --r->outstanding;
  chunk->request = nullptr;
  free_chunks_.push_back(static_cast<uint32_t>(chunk - chunks_.data()));
}

void NvmeTier::HandleRegister(Request* request) {
  fixed_.clear();
  request->status = file_->RegisterBuffers(request->buffers);
  if (request->status.ok()) {
    for (const auto& [base, len] : request->buffers) fixed_.push_back({static_cast<uint8_t*>(base), len});
  }
  MutexLock lock(&mu_);
  engine_ = file_->engine();
}

void NvmeTier::RingLoop() {
  std::deque<std::unique_ptr<Request>> active;
  for (;;) {
    const bool stopping = TakeRequests(&active);
    // Finish requests with nothing left in flight (done, failed, or registrations on a quiet ring).
    for (auto it = active.begin(); it != active.end();) {
      Request* r = it->get();
      const bool quiet = file_->in_flight() == 0 && retry_.empty();
      if (r->kind == Kind::kRegister && quiet && it == active.begin()) HandleRegister(r);
      const bool finished = r->kind == Kind::kRegister
                                ? quiet && it == active.begin()
                                : r->outstanding == 0 && (r->next >= r->len || !r->status.ok());
      if (!finished) {
        ++it;
        continue;
      }
      if (!r->status.ok() && r->kind == Kind::kRead) std::memset(r->buf, 0, r->len);
      r->ticket->Set(r->status);
      it = active.erase(it);
    }
    if (stopping && active.empty() && retry_.empty() && file_->in_flight() == 0) return;
    // Submit up to the queue depth (retries first, then new chunks; backpressure beyond)
    // before checksumming and reaping, so the queue refills first.
    Status st;
    while (st.ok() && file_->in_flight() < options_.queue_depth) {
      if (!retry_.empty()) {
        Chunk* c = &chunks_[retry_.front()];
        retry_.pop_front();
        st = SubmitChunk(c);
        if (!st.ok()) FinishChunk(c, st);
        continue;
      }
      if (free_chunks_.empty()) break;
      Chunk* c = &chunks_[free_chunks_.back()];
      if (!NextChunk(&active, c)) break;
      free_chunks_.pop_back();
      st = SubmitChunk(c);
      if (!st.ok()) FinishChunk(c, st);
    }
    st = file_->Flush();  // a failed submit is retried on the next pass
    ChecksumPass();
    completions_.clear();
    if (file_->in_flight() == 0) continue;
    StatusOr<size_t> got = file_->Reap(&completions_, options_.queue_depth, 1, kReapWait);
    if (!got.ok()) continue;  // the ring reported an error waiting; completions stay queued
    for (const IoCompletion& c : completions_) OnCompletion(&chunks_[c.tag], c.result);
  }
}

}  // namespace tencache
