// The POSIX FileEnv's engines (io_uring and pread/pwrite) with offsets and
// lengths beyond 32 bits: data written past 4 GiB lands at its own offset, and a
// request longer than the kernel moves at once completes short instead of
// being cut to its low 32 bits. Files are sparse: a few KiB of disk each.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "cachemgr/file_env.h"
#include "sparse_file_env.h"
#include "test_util.h"

namespace tencache {
namespace {

using std::chrono::milliseconds;
constexpr uint64_t kFourGib = uint64_t{1} << 32;

struct Engine {
  const char* name;
  bool force_sync;
};
const Engine kEngines[] = {{"io_uring", false}, {"pread/pwrite", true}};

// One request, submitted and reaped: the completion's result.
int64_t Transfer(BlockFile* f, IoOp op, void* buf, uint64_t len, uint64_t offset) {
  IoRequest r;
  r.op = op;
  r.buf = buf;
  r.len = len;
  r.offset = offset;
  r.tag = 7;
  Status st = f->Submit(r);
  EXPECT_TRUE(st.ok()) << st.ToString();
  st = f->Flush();
  EXPECT_TRUE(st.ok()) << st.ToString();
  std::vector<IoCompletion> done;
  StatusOr<size_t> n = f->Reap(&done, 1, 1, milliseconds(10000));
  EXPECT_TRUE(n.ok() && *n == 1) << (n.ok() ? std::to_string(*n) + " completions" : n.status().ToString());
  if (done.empty()) return INT64_MIN;
  EXPECT_EQ(done[0].tag, 7u);
  return done[0].result;
}

// The file's bytes at `offset`, read past the engine (plain pread).
std::vector<uint8_t> FileBytes(const std::string& path, uint64_t offset, uint64_t len) {
  std::vector<uint8_t> out(len);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  EXPECT_GE(fd, 0) << path;
  EXPECT_EQ(::pread(fd, out.data(), len, static_cast<off_t>(offset)), static_cast<ssize_t>(len));
  ::close(fd);
  return out;
}

class PosixFileEnvTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string why = testing::SparseFilesUnsupported(dir_.path());
    if (!why.empty()) GTEST_SKIP() << why;
  }
  std::unique_ptr<BlockFile> Open(FileEnv* env, uint64_t size, const Engine& engine, bool direct) {
    BlockFileOptions o;
    o.queue_depth = 4;
    o.direct_io = direct;
    o.force_sync_engine = engine.force_sync;
    StatusOr<std::unique_ptr<BlockFile>> f = env->OpenBlockFile(path_, size, o);
    if (!f.ok() && direct && f.status().code() == StatusCode::kUnavailable) {  // no O_DIRECT here
      o.direct_io = false;
      f = env->OpenBlockFile(path_, size, o);
    }
    EXPECT_TRUE(f.ok()) << f.status().ToString();
    if (!f.ok()) return nullptr;
    if (!engine.force_sync && (*f)->engine().find("io_uring") == std::string::npos) {
      ADD_FAILURE() << "expected the io_uring engine, got " << (*f)->engine();
    }
    return std::move(*f);
  }

  testing::TempDir dir_;
  const std::string path_ = dir_.path() + "/big.tcnvme";
};

// A 32-bit offset would put the second write on top of the first (the same low
// 32 bits) and still read both back "correctly" from one place: the file's
// bytes at each offset are checked past the engine.
TEST_F(PosixFileEnvTest, WritesPastFourGibLandAtTheirOwnOffset) {
  testing::SparseFileEnv sparse;
  const uint64_t low = 2 * kDirectIoAlignment, high = kFourGib + low, len = 2 * kDirectIoAlignment;
  for (const Engine& engine : kEngines) {
    SCOPED_TRACE(engine.name);
    std::unique_ptr<BlockFile> f = Open(&sparse, kFourGib + (uint64_t{1} << 30), engine, /*direct=*/true);
    ASSERT_NE(f, nullptr);
    auto a = testing::MakeAligned(len), b = testing::MakeAligned(len), in = testing::MakeAligned(len);
    testing::FillPattern(a.get(), len, 1);
    testing::FillPattern(b.get(), len, 2);
    ASSERT_EQ(Transfer(f.get(), IoOp::kWrite, a.get(), len, low), int64_t(len));
    ASSERT_EQ(Transfer(f.get(), IoOp::kWrite, b.get(), len, high), int64_t(len));
    ASSERT_EQ(Transfer(f.get(), IoOp::kRead, in.get(), len, high), int64_t(len));
    EXPECT_TRUE(testing::CheckPattern(in.get(), len, 2));
    ASSERT_EQ(Transfer(f.get(), IoOp::kRead, in.get(), len, low), int64_t(len));
    EXPECT_TRUE(testing::CheckPattern(in.get(), len, 1));
    EXPECT_TRUE(testing::CheckPattern(FileBytes(path_, high, len).data(), len, 2));
    EXPECT_TRUE(testing::CheckPattern(FileBytes(path_, low, len).data(), len, 1));
    f.reset();
    ASSERT_EQ(::unlink(path_.c_str()), 0);
  }
}

// A read of 4 GiB + 8 KiB from a 16 KiB file reads the whole file (it ends at
// the end of the file): cut to its low 32 bits it would ask for 8 KiB. The
// buffer is reserved address space; only the 16 KiB read touch memory.
TEST_F(PosixFileEnvTest, ARequestOfMoreThanFourGibIsNotCutToItsLow32Bits) {
  const uint64_t file = 4 * kDirectIoAlignment, len = kFourGib + 2 * kDirectIoAlignment;
  void* big = ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  ASSERT_NE(big, MAP_FAILED) << "reserving " << len << " bytes of address space: " << std::strerror(errno);
  for (const Engine& engine : kEngines) {
    SCOPED_TRACE(engine.name);
    std::unique_ptr<BlockFile> f = Open(PosixFileEnv(), file, engine, /*direct=*/false);
    ASSERT_NE(f, nullptr);
    auto out = testing::MakeAligned(file);
    testing::FillPattern(out.get(), file, 3);
    ASSERT_EQ(Transfer(f.get(), IoOp::kWrite, out.get(), file, 0), int64_t(file));
    EXPECT_EQ(Transfer(f.get(), IoOp::kRead, big, len, 0), int64_t(file));
    EXPECT_TRUE(testing::CheckPattern(static_cast<uint8_t*>(big), file, 3));
    f.reset();
    ASSERT_EQ(::unlink(path_.c_str()), 0);
  }
  ::munmap(big, len);
}

}  // namespace
}  // namespace tencache
