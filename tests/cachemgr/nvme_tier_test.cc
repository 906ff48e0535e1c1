// NvmeTier: round trips, chunking and backpressure, the pread/pwrite fallback,
// one test per injected fault (EIO, short I/O, ENOSPC, corruption, slow I/O),
// and extents past 4 GiB in a sparse file.
#include "cachemgr/nvme_tier.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <malloc.h>
#include <sys/stat.h>
#include <unistd.h>

#include <deque>
#include <vector>

#include "cachemgr/fault_injection_file_env.h"
#include "sparse_file_env.h"
#include "test_util.h"

namespace tencache {
namespace {

using std::chrono::milliseconds;
constexpr milliseconds kWait(10000);
constexpr uint64_t kFile = 1 << 20;
constexpr uint64_t kBlock = 64 << 10;

class NvmeTierTest : public ::testing::Test {
 protected:
  std::unique_ptr<NvmeTier> OpenTier(FileEnv* env, uint32_t depth = 4, bool checksums = true) {
    NvmeTierOptions o;
    o.dir = dir_.path() + "/nvme";
    o.queue_depth = depth;
    o.block_size = kBlock;
    o.checksums = checksums;
    o.env = env;
    auto tier = NvmeTier::Open(o);
    EXPECT_TRUE(tier.ok()) << tier.status().ToString();
    auto base = (*tier)->Reserve(kFile);
    EXPECT_TRUE(base.ok()) << base.status().ToString();
    return std::move(*tier);
  }
  // Writes a pattern to [off, off+len) and returns the buffer it wrote.
  testing::AlignedBuffer WritePattern(NvmeTier* t, uint64_t off, uint64_t len, uint32_t seed) {
    auto buf = testing::MakeAligned(len);
    testing::FillPattern(buf.get(), len, seed);
    Status st = t->Write(off, buf.get(), len, "w0", kWait);
    EXPECT_TRUE(st.ok()) << st.ToString();
    return buf;
  }

  testing::TempDir dir_;
  FaultInjectionFileEnv faulty_{PosixFileEnv()};
};

TEST_F(NvmeTierTest, RoundTripAcrossChunks) {
  auto t = OpenTier(PosixFileEnv());
  EXPECT_NE(t->Describe().find("io_uring"), std::string::npos) << t->Describe();
  WritePattern(t.get(), 8192, 5 * kBlock + 4096, 1);
  auto in = testing::MakeAligned(5 * kBlock + 4096);
  ASSERT_TRUE(t->Read(8192, in.get(), 5 * kBlock + 4096, "w0", kWait).ok());
  EXPECT_TRUE(testing::CheckPattern(in.get(), 5 * kBlock + 4096, 1));
}

TEST_F(NvmeTierTest, ManyRequestsBeyondQueueDepthAllComplete) {
  auto t = OpenTier(PosixFileEnv(), /*depth=*/2);
  std::vector<testing::AlignedBuffer> bufs;
  std::vector<IoTicket> tickets;
  for (uint32_t i = 0; i < 16; ++i) {
    bufs.push_back(testing::MakeAligned(kBlock));
    testing::FillPattern(bufs.back().get(), kBlock, 100 + i);
    tickets.push_back(t->SubmitWrite(i * kBlock, bufs.back().get(), kBlock, "t" + std::to_string(i)));
  }
  for (auto& tk : tickets) ASSERT_TRUE(tk.Wait(kWait).ok());
  for (uint32_t i = 0; i < 16; ++i) {
    auto in = testing::MakeAligned(kBlock);
    ASSERT_TRUE(t->Read(i * kBlock, in.get(), kBlock, "t", kWait).ok());
    EXPECT_TRUE(testing::CheckPattern(in.get(), kBlock, 100 + i)) << i;
  }
}

TEST_F(NvmeTierTest, SyncFallbackEngineIsReportedAndWorks) {
  NvmeTierOptions o;
  o.dir = dir_.path();
  o.block_size = kBlock;
  o.force_sync_engine = true;
  auto t = NvmeTier::Open(o);
  ASSERT_TRUE(t.ok());
  ASSERT_TRUE((*t)->Reserve(kFile).ok());
  EXPECT_NE((*t)->Describe().find("pread/pwrite"), std::string::npos) << (*t)->Describe();
  auto out = WritePattern(t->get(), 0, 3 * kBlock, 9);
  auto in = testing::MakeAligned(3 * kBlock);
  ASSERT_TRUE((*t)->Read(0, in.get(), 3 * kBlock, "x", kWait).ok());
  EXPECT_TRUE(testing::CheckPattern(in.get(), 3 * kBlock, 9));
}

TEST_F(NvmeTierTest, RejectsBadOptionsAndRanges) {
  NvmeTierOptions o;
  o.dir = dir_.path();
  o.queue_depth = 0;
  EXPECT_EQ(NvmeTier::Open(o).status().code(), StatusCode::kInvalidArgument);
  o.queue_depth = 4;
  o.block_size = 1000;
  EXPECT_EQ(NvmeTier::Open(o).status().code(), StatusCode::kInvalidArgument);
  auto t = OpenTier(PosixFileEnv());
  auto buf = testing::MakeAligned(8192);
  EXPECT_EQ(t->Read(kFile, buf.get(), 4096, "far", kWait).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(t->Read(100, buf.get(), 4096, "odd", kWait).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(t->Reserve(kFile).status().code(), StatusCode::kResourceExhausted);
}

TEST_F(NvmeTierTest, ReadOfNeverWrittenExtentIsCorruption) {
  auto t = OpenTier(PosixFileEnv());
  auto in = testing::MakeAligned(kBlock);
  Status st = t->Read(0, in.get(), kBlock, "fresh", kWait);
  EXPECT_EQ(st.code(), StatusCode::kCorruption) << st.ToString();
}

void ExpectNamesTensorAndFile(const Status& st, const NvmeTier& t, const std::string& tensor) {
  EXPECT_NE(st.message().find("tensor " + tensor), std::string::npos) << st.ToString();
  EXPECT_NE(st.message().find(t.file_path()), std::string::npos) << st.ToString();
}

TEST_F(NvmeTierTest, EioOnReadAndWriteSurfaceWithNames) {
  auto t = OpenTier(&faulty_);
  auto buf = WritePattern(t.get(), 0, kBlock, 2);
  faulty_.AddFault({FaultKind::kEio, IoOp::kRead, 0, kBlock, 1});
  Status st = t->Read(0, buf.get(), kBlock, "layer0.weight", kWait);
  EXPECT_EQ(st.code(), StatusCode::kIoError);
  ExpectNamesTensorAndFile(st, *t, "layer0.weight");
  EXPECT_NE(st.message().find("Input/output error"), std::string::npos) << st.ToString();
  faulty_.AddFault({FaultKind::kEio, IoOp::kWrite, 0, kBlock, 1});
  st = t->Write(0, buf.get(), kBlock, "layer1.weight", kWait);
  EXPECT_EQ(st.code(), StatusCode::kIoError);
  ExpectNamesTensorAndFile(st, *t, "layer1.weight");
  // The failed write invalidated the extent's checksum: a read must not pass stale data.
  EXPECT_EQ(t->Read(0, buf.get(), kBlock, "layer1.weight", kWait).code(), StatusCode::kCorruption);
}

TEST_F(NvmeTierTest, TransientShortReadIsRequeuedAndSucceeds) {
  auto t = OpenTier(&faulty_);
  WritePattern(t.get(), 0, kBlock, 3);
  faulty_.AddFault({FaultKind::kShortIo, IoOp::kRead, 0, kBlock, 1});
  auto in = testing::MakeAligned(kBlock);
  ASSERT_TRUE(t->Read(0, in.get(), kBlock, "w", kWait).ok());
  EXPECT_EQ(faulty_.faults_injected(), 1u);
  EXPECT_TRUE(testing::CheckPattern(in.get(), kBlock, 3));
}

TEST_F(NvmeTierTest, PersistentShortWriteFailsWithNames) {
  auto t = OpenTier(&faulty_);
  faulty_.AddFault({FaultKind::kShortIo, IoOp::kWrite});  // every write transfers half, then nothing
  auto buf = testing::MakeAligned(kBlock);
  Status st = t->Write(0, buf.get(), kBlock, "opt.m", kWait);
  EXPECT_EQ(st.code(), StatusCode::kIoError);
  ExpectNamesTensorAndFile(st, *t, "opt.m");
  EXPECT_NE(st.message().find("short"), std::string::npos) << st.ToString();
}

TEST_F(NvmeTierTest, NoSpaceOnWriteAndOnOpen) {
  auto t = OpenTier(&faulty_);
  faulty_.AddFault({FaultKind::kNoSpace, IoOp::kWrite, 0, kFile, 1});
  auto buf = testing::MakeAligned(kBlock);
  Status st = t->Write(kBlock, buf.get(), kBlock, "grad.3", kWait);
  EXPECT_EQ(st.code(), StatusCode::kIoError);
  ExpectNamesTensorAndFile(st, *t, "grad.3");
  EXPECT_NE(st.message().find("No space left"), std::string::npos) << st.ToString();

  FaultRule at_open{FaultKind::kNoSpace};
  at_open.on_open = true;
  faulty_.AddFault(at_open);
  NvmeTierOptions o;
  o.dir = dir_.path() + "/other";
  o.env = &faulty_;
  auto t2 = NvmeTier::Open(o);
  ASSERT_TRUE(t2.ok());
  st = (*t2)->Reserve(kFile).status();
  EXPECT_EQ(st.code(), StatusCode::kIoError);
  EXPECT_NE(st.message().find((*t2)->file_path()), std::string::npos) << st.ToString();
}

TEST_F(NvmeTierTest, CorruptReadIsDetectedAndNeverHandedOut) {
  auto t = OpenTier(&faulty_);
  WritePattern(t.get(), 0, 2 * kBlock, 4);
  faulty_.AddFault({FaultKind::kCorruptRead, IoOp::kRead, kBlock, 2 * kBlock, 1});
  auto in = testing::MakeAligned(2 * kBlock);
  std::memset(in.get(), 0xEE, 2 * kBlock);
  Status st = t->Read(0, in.get(), 2 * kBlock, "embed", kWait);
  EXPECT_EQ(st.code(), StatusCode::kCorruption);
  ExpectNamesTensorAndFile(st, *t, "embed");
  EXPECT_NE(st.message().find("checksum mismatch"), std::string::npos) << st.ToString();
  for (uint64_t i = 0; i < 2 * kBlock; ++i) ASSERT_EQ(in.get()[i], 0) << "byte " << i << " handed out";
  // The disk copy is fine: an unfaulted read succeeds.
  ASSERT_TRUE(t->Read(0, in.get(), 2 * kBlock, "embed", kWait).ok());
  EXPECT_TRUE(testing::CheckPattern(in.get(), 2 * kBlock, 4));
}

TEST_F(NvmeTierTest, CorruptionGoesUnnoticedOnlyWithChecksumsOff) {
  auto t = OpenTier(&faulty_, 4, /*checksums=*/false);
  WritePattern(t.get(), 0, kBlock, 5);
  faulty_.AddFault({FaultKind::kCorruptRead, IoOp::kRead, 0, kBlock, 1});
  auto in = testing::MakeAligned(kBlock);
  ASSERT_TRUE(t->Read(0, in.get(), kBlock, "x", kWait).ok());
  EXPECT_FALSE(testing::CheckPattern(in.get(), kBlock, 5));
}

TEST_F(NvmeTierTest, SlowIoTimesOutWithNamesThenCompletes) {
  auto t = OpenTier(&faulty_);
  auto buf = WritePattern(t.get(), 0, kBlock, 6);
  faulty_.AddFault({FaultKind::kSlowIo, IoOp::kRead, 0, kBlock, 1, milliseconds(300)});
  IoTicket ticket = t->SubmitRead(0, buf.get(), kBlock, "slow.w");
  Status st = ticket.Wait(milliseconds(20));
  EXPECT_EQ(st.code(), StatusCode::kTimeout);
  st = t->Read(0, buf.get(), kBlock, "slow.w", milliseconds(1));  // queued behind the slow one
  EXPECT_EQ(st.code(), StatusCode::kTimeout);
  ExpectNamesTensorAndFile(st, *t, "slow.w");
  EXPECT_TRUE(ticket.Wait(kWait).ok());
  EXPECT_TRUE(testing::CheckPattern(buf.get(), kBlock, 6));
}

TEST_F(NvmeTierTest, DirectIoRefusedFallsBackToBufferedWithOneWarning) {
  FaultRule refuse{FaultKind::kDirectIoRefused};
  faulty_.AddFault(refuse);
  ::testing::internal::CaptureStderr();
  auto t = OpenTier(&faulty_);
  const std::string err = ::testing::internal::GetCapturedStderr();
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(faulty_.faults_injected(), 1u);
  EXPECT_NE(err.find("O_DIRECT"), std::string::npos) << err;
  EXPECT_EQ(err.find("warning"), err.rfind("warning")) << "more than one warning: " << err;
  EXPECT_NE(t->Describe().find("buffered fallback"), std::string::npos) << t->Describe();
  auto buf = WritePattern(t.get(), kBlock, 3 * kBlock, 12);
  auto in = testing::MakeAligned(3 * kBlock);
  ASSERT_TRUE(t->Read(kBlock, in.get(), 3 * kBlock, "w0", kWait).ok());
  EXPECT_TRUE(testing::CheckPattern(in.get(), 3 * kBlock, 12));
}

TEST_F(NvmeTierTest, DirectIoDescribesNoFallback) {
  auto t = OpenTier(PosixFileEnv());
  EXPECT_EQ(t->Describe().find("buffered"), std::string::npos) << t->Describe();
}


// A new request must not wait behind one the device is slow with: the ring
// thread's wait for completions is interrupted, not left to its 50 ms bound.
TEST_F(NvmeTierTest, ANewRequestInterruptsTheWaitForAHeldOne) {
  auto t = OpenTier(&faulty_);
  auto held = testing::MakeAligned(kBlock), next = testing::MakeAligned(kBlock);
  testing::FillPattern(held.get(), kBlock, 21);
  testing::FillPattern(next.get(), kBlock, 22);
  faulty_.AddFault({FaultKind::kHeld, IoOp::kWrite, 0, kBlock, 1});
  IoTicket a = t->SubmitWrite(0, held.get(), kBlock, "held.w");
  // Once the ring thread has handed the first write to the file, it goes on to
  // wait for its completion; the second write arrives after it took its requests.
  ASSERT_TRUE(testing::WaitFor([&] { return faulty_.held_requests() == 1; }, kWait));
  IoTicket b = t->SubmitWrite(kBlock, next.get(), kBlock, "next.w");
  ASSERT_TRUE(b.Wait(kWait).ok());
  EXPECT_FALSE(a.ready());
  EXPECT_EQ(faulty_.reap_timeouts(), 0u) << "the second write waited for a reap to time out";
  faulty_.ReleaseHeld();
  ASSERT_TRUE(a.Wait(kWait).ok());
  auto in = testing::MakeAligned(kBlock);
  ASSERT_TRUE(t->Read(0, in.get(), kBlock, "held.w", kWait).ok());
  EXPECT_TRUE(testing::CheckPattern(in.get(), kBlock, 21));
}

// A file of any size whose requests complete at once without touching memory,
// and whose fixed-buffer registration behaves like the kernel's: at most
// kMaxFixedBuffer a buffer, or refused entirely.
class NullFileEnv final : public FileEnv {
 public:
  class File final : public BlockFile {
   public:
    File(NullFileEnv* env, std::string path, uint64_t size) : env_(env), path_(std::move(path)), size_(size) {}
    const std::string& path() const override { return path_; }
    uint64_t size() const override { return size_; }
    uint32_t queue_depth() const override { return 64; }
    std::string engine() const override { return "null"; }
    Status RegisterBuffers(const std::vector<std::pair<void*, uint64_t>>& buffers) override {
      if (env_->refuse_registration) return Status::Unavailable(path_ + ": register: Cannot allocate memory");
      for (const auto& b : buffers) {
        if (b.second > kMaxFixedBuffer) return Status::InvalidArgument(path_ + ": register: Invalid argument");
      }
      env_->registered = buffers;
      return Status::Ok();
    }
    Status Submit(const IoRequest& r) override {
      done_.push_back({r.tag, int64_t(r.len)});
      return Status::Ok();
    }
    Status Flush() override { return Status::Ok(); }
    StatusOr<size_t> Reap(std::vector<IoCompletion>* out, size_t max, size_t, milliseconds) override {
      size_t n = 0;
      for (; n < max && !done_.empty(); ++n, done_.pop_front()) out->push_back(done_.front());
      return n;
    }
    uint32_t in_flight() const override { return uint32_t(done_.size()); }
    void Interrupt() override {}

   private:
    NullFileEnv* const env_;
    const std::string path_;
    const uint64_t size_;
    std::deque<IoCompletion> done_;
  };
  StatusOr<std::unique_ptr<BlockFile>> OpenBlockFile(const std::string& path, uint64_t size,
                                                     const BlockFileOptions&) override {
    return std::unique_ptr<BlockFile>(new File(this, path, size));
  }
  Status CreateDir(const std::string&) override { return Status::Ok(); }
  Status RemoveFile(const std::string&) override { return Status::Ok(); }

  bool refuse_registration = false;
  std::vector<std::pair<void*, uint64_t>> registered;
};

std::unique_ptr<NvmeTier> OpenNull(NullFileEnv* env, uint64_t bytes) {
  NvmeTierOptions o;
  o.dir = "/nonexistent-null-env";
  o.env = env;
  auto tier = NvmeTier::Open(o);
  EXPECT_TRUE(tier.ok()) << tier.status().ToString();
  EXPECT_TRUE((*tier)->Reserve(bytes).ok());
  return std::move(*tier);
}

// The host pool is one region; io_uring caps a fixed buffer at 1 GiB, so a
// larger region is registered in pieces, not refused.
TEST(NvmeTierFixedBuffers, ARegionBeyondOneGibIsRegisteredInPieces) {
  NullFileEnv env;
  auto t = OpenNull(&env, kFile);
  uint8_t* base = reinterpret_cast<uint8_t*>(uintptr_t{1} << 40);  // never dereferenced
  const uint64_t bytes = 3 * kMaxFixedBuffer + 4096;
  Status st = t->RegisterBuffers({{base, bytes}}, kWait);
  ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_EQ(env.registered.size(), 4u);
  uint64_t at = 0;
  for (const auto& [p, len] : env.registered) {
    EXPECT_EQ(static_cast<uint8_t*>(p), base + at);
    EXPECT_LE(len, kMaxFixedBuffer);
    at += len;
  }
  EXPECT_EQ(at, bytes);
  EXPECT_EQ(t->Describe().find("fixed buffers off"), std::string::npos) << t->Describe();
}

TEST(NvmeTierFixedBuffers, ARefusedRegistrationIsReportedAndSaidInDescribe) {
  NullFileEnv env;
  env.refuse_registration = true;
  auto t = OpenNull(&env, kFile);
  auto buf = testing::MakeAligned(kBlock);
  Status st = t->RegisterBuffers({{buf.get(), kBlock}}, kWait);
  EXPECT_EQ(st.code(), StatusCode::kUnavailable);
  EXPECT_NE(t->Describe().find("fixed buffers off: "), std::string::npos) << t->Describe();
  EXPECT_NE(t->Describe().find("Cannot allocate memory"), std::string::npos) << t->Describe();
  ASSERT_TRUE(t->Write(0, buf.get(), kBlock, "w", kWait).ok());  // I/O goes on without them
}

// The checksum table grows with the chunks written, not with the file: it used
// to take 8 bytes per 4 KiB of file at Reserve (2 GiB of RAM per TiB).
TEST(NvmeTierChecksums, ATebibyteFileCostsNoChecksumMemoryUntilWritten) {
  NullFileEnv env;
  const size_t before = mallinfo2().uordblks + mallinfo2().hblkhd;
  auto t = OpenNull(&env, uint64_t{1} << 40);
  const size_t after = mallinfo2().uordblks + mallinfo2().hblkhd;
  EXPECT_LT(after - std::min(after, before), size_t{1} << 20) << "bytes allocated by Reserve(1 TiB)";
  auto buf = testing::MakeAligned(kBlock);
  testing::FillPattern(buf.get(), kBlock, 3);
  const uint64_t far = (uint64_t{1} << 40) - 1024 * kBlock;
  ASSERT_TRUE(t->Write(far, buf.get(), kBlock, "w", kWait).ok());
  ASSERT_TRUE(t->Read(far, buf.get(), kBlock, "w", kWait).ok());  // verified against its CRC
  EXPECT_EQ(t->Read(0, buf.get(), kBlock, "never", kWait).code(), StatusCode::kCorruption);
}

TEST_F(NvmeTierTest, TheSwapFileIsPrivateAndASymlinkInItsPlaceIsRefused) {
  auto t = OpenTier(PosixFileEnv());
  struct stat st {};
  ASSERT_EQ(::stat(t->file_path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(::stat((dir_.path() + "/nvme").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0077, 0u) << "the swap folder is readable by others";

  NvmeTierOptions o;
  o.dir = dir_.path() + "/planted";
  ASSERT_EQ(::mkdir(o.dir.c_str(), 0700), 0);
  const std::string target = dir_.path() + "/elsewhere";
  ASSERT_EQ(::symlink(target.c_str(), (o.dir + "/rank-0.tcnvme").c_str()), 0);
  auto planted = NvmeTier::Open(o);
  ASSERT_TRUE(planted.ok());
  StatusOr<uint64_t> r = (*planted)->Reserve(kFile);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("symlink"), std::string::npos) << r.status().ToString();
  EXPECT_NE(::access(target.c_str(), F_OK), 0) << "the symlink's target was created";
}

// A 5 GiB NVMe file that is sparse: extents past 2^32 bytes cost only the
// blocks written. Both engines; each test skips where the file system under
// /tmp keeps no holes.
class NvmeTierPastFourGibTest : public ::testing::TestWithParam<bool> {
 protected:
  static constexpr uint64_t kFourGib = uint64_t{1} << 32;
  static constexpr uint64_t kFileBytes = kFourGib + (uint64_t{1} << 30);

  void SetUp() override {
    const std::string why = testing::SparseFilesUnsupported(dir_.path());
    if (!why.empty()) GTEST_SKIP() << why;
  }
  std::unique_ptr<NvmeTier> OpenTier(FileEnv* env) {
    NvmeTierOptions o;
    o.dir = dir_.path() + "/nvme";
    o.queue_depth = 4;
    o.block_size = kBlock;
    o.force_sync_engine = GetParam();
    o.env = env;
    auto tier = NvmeTier::Open(o);
    EXPECT_TRUE(tier.ok()) << tier.status().ToString();
    if (!tier.ok()) return nullptr;
    auto base = (*tier)->Reserve(kFileBytes);
    EXPECT_TRUE(base.ok()) << base.status().ToString();
    return base.ok() ? std::move(*tier) : nullptr;
  }
  // The file's bytes, read with plain pread past the tier.
  static bool FileHolds(const NvmeTier& t, uint64_t offset, uint64_t len, uint32_t seed) {
    std::vector<uint8_t> bytes(len);
    const int fd = ::open(t.file_path().c_str(), O_RDONLY | O_CLOEXEC);
    const bool read = fd >= 0 && ::pread(fd, bytes.data(), len, static_cast<off_t>(offset)) == ssize_t(len);
    if (fd >= 0) ::close(fd);
    return read && testing::CheckPattern(bytes.data(), len, seed);
  }

  testing::TempDir dir_;
  testing::SparseFileEnv sparse_;
};

// A 32-bit offset would put `high` on top of `low` (the same low 32 bits) and
// key both chunks' checksums alike; each extent must verify against its own
// checksum and lie at its own offset in the file.
TEST_P(NvmeTierPastFourGibTest, ExtentsAroundTwoToThe32RoundTripAndLandAtTheirOffsets) {
  auto t = OpenTier(&sparse_);
  ASSERT_NE(t, nullptr);
  struct Extent {
    uint64_t offset, len;
  };
  const Extent extents[] = {
      {kBlock, kBlock},                              // low
      {kFourGib + kBlock, kBlock},                   // high: low's offset + 2^32
      {kFourGib - 3 * kBlock / 2, 2 * kBlock},       // up to 2^32 + kBlock / 2: its second chunk straddles 2^32
      {kFileBytes - 2 * kBlock, 2 * kBlock},         // the file's last bytes
  };
  for (size_t i = 0; i < std::size(extents); ++i) {
    auto out = testing::MakeAligned(extents[i].len);
    testing::FillPattern(out.get(), extents[i].len, uint32_t(40 + i));
    Status st = t->Write(extents[i].offset, out.get(), extents[i].len, "e" + std::to_string(i), kWait);
    ASSERT_TRUE(st.ok()) << st.ToString();
  }
  for (size_t i = 0; i < std::size(extents); ++i) {
    SCOPED_TRACE("extent at " + std::to_string(extents[i].offset));
    auto in = testing::MakeAligned(extents[i].len);
    Status st = t->Read(extents[i].offset, in.get(), extents[i].len, "e" + std::to_string(i), kWait);
    ASSERT_TRUE(st.ok()) << st.ToString();
    EXPECT_TRUE(testing::CheckPattern(in.get(), extents[i].len, uint32_t(40 + i)));
    EXPECT_TRUE(FileHolds(*t, extents[i].offset, extents[i].len, uint32_t(40 + i)));
  }
  struct stat st {};
  ASSERT_EQ(::stat(t->file_path().c_str(), &st), 0);
  EXPECT_EQ(uint64_t(st.st_size), kFileBytes);
  EXPECT_LT(uint64_t(st.st_blocks) * 512, uint64_t{8} << 20) << "the sparse file took real disk";
}

// Fault rules match the full 64-bit offset: a rule for an extent past 4 GiB
// leaves the extent at the same offset modulo 2^32 alone.
TEST_P(NvmeTierPastFourGibTest, FaultsPastFourGibHitOnlyTheirExtent) {
  FaultInjectionFileEnv faulty(&sparse_);
  auto t = OpenTier(&faulty);
  ASSERT_NE(t, nullptr);
  const uint64_t low = kBlock, high = kFourGib + kBlock;
  auto a = testing::MakeAligned(kBlock), b = testing::MakeAligned(kBlock), in = testing::MakeAligned(kBlock);
  testing::FillPattern(a.get(), kBlock, 51);
  testing::FillPattern(b.get(), kBlock, 52);
  ASSERT_TRUE(t->Write(low, a.get(), kBlock, "low", kWait).ok());
  ASSERT_TRUE(t->Write(high, b.get(), kBlock, "high", kWait).ok());

  faulty.AddFault({FaultKind::kEio, IoOp::kRead, high, high + kBlock});
  ASSERT_TRUE(t->Read(low, in.get(), kBlock, "low", kWait).ok());
  EXPECT_TRUE(testing::CheckPattern(in.get(), kBlock, 51));
  Status st = t->Read(high, in.get(), kBlock, "high", kWait);
  EXPECT_EQ(st.code(), StatusCode::kIoError) << st.ToString();
  EXPECT_NE(st.message().find("offset " + std::to_string(high)), std::string::npos) << st.ToString();

  faulty.ClearFaults();
  faulty.AddFault({FaultKind::kCorruptRead, IoOp::kRead, high, high + kBlock, 1});
  EXPECT_EQ(t->Read(high, in.get(), kBlock, "high", kWait).code(), StatusCode::kCorruption);
  ASSERT_TRUE(t->Read(high, in.get(), kBlock, "high", kWait).ok());
  EXPECT_TRUE(testing::CheckPattern(in.get(), kBlock, 52));
  EXPECT_EQ(faulty.faults_injected(), 2u);
}

INSTANTIATE_TEST_SUITE_P(Engines, NvmeTierPastFourGibTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& p) { return p.param ? "PreadPwrite" : "IoUring"; });

}  // namespace
}  // namespace tencache
