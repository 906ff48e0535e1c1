// NvmeTier: round trips, chunking and backpressure, the pread/pwrite fallback,
// and one test per injected fault (EIO, short I/O, ENOSPC, corruption, slow I/O).
#include "cachemgr/nvme_tier.h"

#include <gtest/gtest.h>

#include <vector>

#include "cachemgr/fault_injection_file_env.h"
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

}  // namespace
}  // namespace tencache
