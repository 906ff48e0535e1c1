// Safetensors: a round trip in every dtype, sharded folders, byte-identical
// rewrites, dtype conversion, headers that are hostile in each way the parser
// checks (each refused with the tensor named), and sizes beyond 32 bits:
// tensors of more than 2^31 elements and files of more than 4 GiB (sparse).
#include "common/safetensors.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

namespace tencache {
namespace {

namespace fs = std::filesystem;

class Safetensors : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tencache_safetensors_" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Bytes(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }
  // A file of `header` (padded as given) followed by `data` bytes.
  fs::path Raw(const std::string& header, size_t data, uint64_t length_field = UINT64_MAX) {
    const fs::path p = dir_ / "raw.safetensors";
    std::ofstream out(p, std::ios::binary);
    const uint64_t n = length_field == UINT64_MAX ? header.size() : length_field;
    for (int i = 0; i < 8; ++i) out.put(char((n >> (8 * i)) & 0xff));
    out << header << std::string(data, '\0');
    return p;
  }
  Status OpenRaw(const std::string& header, size_t data, uint64_t length_field = UINT64_MAX) {
    return SafetensorsReader::Open(Raw(header, data, length_field).string()).status();
  }
  fs::path dir_;
};

TEST_F(Safetensors, RoundTripsEveryDtypeInAnyWriteOrder) {
  const fs::path p = dir_ / "m.safetensors";
  std::vector<float> a = {1.0f, -2.5f, 3.25f, 0.0f, 1e-3f, 65504.0f};
  {
    StatusOr<SafetensorsWriter> w = SafetensorsWriter::Begin(
        p.string(), {{"b.f32", StDType::kF32, {2, 3}}, {"a.bf16", StDType::kBF16, {6}}, {"c.f16", StDType::kF16, {3, 2}}},
        {{"format", "pt"}});
    ASSERT_TRUE(w.ok()) << w.status().message();
    std::vector<uint16_t> h(6);
    ConvertFromF32(StDType::kF16, a.data(), 6, h.data());
    ASSERT_TRUE(w->Write("c.f16", h.data(), 12).ok());
    ASSERT_TRUE(w->Write("b.f32", a.data(), 24).ok());
    ConvertFromF32(StDType::kBF16, a.data(), 6, h.data());
    ASSERT_TRUE(w->Write("a.bf16", h.data(), 12).ok());
    EXPECT_EQ(w->Write("a.bf16", h.data(), 12).code(), StatusCode::kInvalidArgument);  // twice
    ASSERT_TRUE(w->Finish().ok());
  }
  StatusOr<SafetensorsReader> r = SafetensorsReader::Open(p.string());
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->tensors().size(), 3u);
  std::vector<float> back(6);
  ASSERT_TRUE(r->ReadF32(*r->Find("b.f32"), back.data()).ok());
  EXPECT_EQ(back, a);
  ASSERT_TRUE(r->ReadF32(*r->Find("c.f16"), back.data()).ok());
  EXPECT_EQ(back[1], -2.5f);
  EXPECT_EQ(back[5], 65504.0f);
  EXPECT_NEAR(back[4], 1e-3f, 1e-6);
  ASSERT_TRUE(r->ReadF32(*r->Find("a.bf16"), back.data()).ok());
  EXPECT_EQ(back[2], 3.25f);
  EXPECT_EQ(r->Find("c.f16")->shape, (std::vector<int64_t>{3, 2}));
  // The header: 8-aligned, metadata first, the 4-byte dtype before the 2-byte ones, then by name.
  const std::string bytes = Bytes(p);
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  EXPECT_EQ(n % 8, 0u);
  EXPECT_EQ(bytes.substr(8, 30), "{\"__metadata__\":{\"format\":\"pt\"");
  EXPECT_LT(bytes.find("b.f32"), bytes.find("a.bf16"));
  EXPECT_LT(bytes.find("a.bf16"), bytes.find("c.f16"));
}

TEST_F(Safetensors, RewritingWhatWasReadGivesTheSameBytes) {
  const fs::path p = dir_ / "one.safetensors", q = dir_ / "two.safetensors";
  std::vector<float> v(100);
  for (int i = 0; i < 100; ++i) v[i] = std::sin(float(i));
  {
    auto w = SafetensorsWriter::Begin(p.string(), {{"x", StDType::kF32, {10, 10}}, {"y", StDType::kF32, {0}}}, {{"format", "pt"}});
    ASSERT_TRUE(w->Write("x", v.data(), 400).ok());
    ASSERT_TRUE(w->Write("y", nullptr, 0).ok());
    ASSERT_TRUE(w->Finish().ok());
  }
  StatusOr<SafetensorsReader> r = SafetensorsReader::Open(p.string());
  ASSERT_TRUE(r.ok()) << r.status().message();
  std::vector<SafetensorsWriter::Entry> entries;
  for (const StTensor& t : r->tensors()) entries.push_back({t.name, t.dtype, t.shape});
  auto w = SafetensorsWriter::Begin(q.string(), entries, {{"format", "pt"}});
  for (const StTensor& t : r->tensors()) {
    std::vector<float> buf(t.numel());
    ASSERT_TRUE(r->ReadF32(t, buf.data()).ok());
    ASSERT_TRUE(w->Write(t.name, buf.data(), buf.size() * 4).ok());
  }
  ASSERT_TRUE(w->Finish().ok());
  EXPECT_EQ(Bytes(p), Bytes(q));
}

TEST_F(Safetensors, AnUnfinishedWriterLeavesNothing) {
  const fs::path p = dir_ / "never.safetensors";
  {
    auto w = SafetensorsWriter::Begin(p.string(), {{"x", StDType::kF32, {4}}}, {});
    ASSERT_TRUE(w.ok());
    EXPECT_EQ(w->Finish().code(), StatusCode::kFailedPrecondition);  // x not written
  }
  EXPECT_FALSE(fs::exists(p));
  EXPECT_FALSE(fs::exists(p.string() + ".tmp"));
}

TEST_F(Safetensors, FoldersOfShardsFollowTheirIndex) {
  std::vector<float> v = {1, 2, 3, 4};
  for (const char* f : {"part-1.safetensors", "part-2.safetensors"}) {
    auto w = SafetensorsWriter::Begin((dir_ / f).string(), {{std::string("t.") + f[5], StDType::kF32, {4}}}, {});
    ASSERT_TRUE(w->Write(std::string("t.") + f[5], v.data(), 16).ok());
    ASSERT_TRUE(w->Finish().ok());
  }
  std::ofstream(dir_ / "model.safetensors.index.json")
      << R"({"metadata": {}, "weight_map": {"t.1": "part-1.safetensors", "t.2": "part-2.safetensors"}})";
  StatusOr<SafetensorsReader> r = SafetensorsReader::Open(dir_.string());
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_NE(r->Find("t.2"), nullptr);
  EXPECT_EQ(r->files()[r->Find("t.2")->file], (dir_ / "part-2.safetensors").string());
  std::ofstream(dir_ / "model.safetensors.index.json") << R"({"weight_map": {"t.1": "../etc/passwd"}})";
  EXPECT_EQ(SafetensorsReader::Open(dir_.string()).status().code(), StatusCode::kInvalidArgument);
  std::ofstream(dir_ / "model.safetensors.index.json") << R"({"weight_map": {"t.9": "part-1.safetensors"}})";
  Status s = SafetensorsReader::Open(dir_.string()).status();
  EXPECT_NE(s.message().find("tensor 't.9' is not in part-1.safetensors"), std::string::npos) << s.message();
}

TEST_F(Safetensors, HostileHeadersAreRefusedNamingTheTensor) {
  struct Case {
    std::string header;
    size_t data;
    std::string says;
  } cases[] = {
      {"{ ", 0, "not valid JSON"},
      {"[1,2]", 0, "expected a JSON object"},
      {R"({"w":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}})", 8, "tensor 'w': dtype \"I64\": expected F32"},
      {R"({"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4, "tensor 'w': shape [-1]"},
      {R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", 4, "tensor 'w': data_offsets [0, 4] hold 4 bytes"},
      {R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,400]}})", 4, "tensor 'w': data_offsets [0, 400]: expected a range inside"},
      {R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[4,0]}})", 4, "tensor 'w': data_offsets [4, 0]"},
      {R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8, "tensor 'b': data_offsets begin at 4 where the previous tensor's bytes end at 8 (overlap)"},
      {R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8, "tensor 'a': data_offsets begin at 4 where the data continues from 0 (gap)"},
      {R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 12, "cover 4 of the 12 data bytes"},
      {R"({"__metadata__":{"format":7}})", 0, "'__metadata__' key 'format': expected a string"},
      {R"({"":{"dtype":"F32","shape":[],"data_offsets":[0,4]}})", 4, "expected a name of 1 to 1024"},
      {R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"extra":1}})", 4, "tensor 'w': unknown key 'extra'"},
      {R"({"w":{"dtype":"F32","shape":[1099511627776,1099511627776],"data_offsets":[0,4]}})", 4, "tensor 'w': shape"},
      {R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0]}})", 4, "tensor 'w': data_offsets: expected [begin, end]"},
      {R"({"w":[1]})", 0, "tensor 'w': expected an object"},
  };
  for (const Case& c : cases) {
    Status s = OpenRaw(c.header, c.data);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << c.header;
    EXPECT_NE(s.message().find(c.says), std::string::npos) << c.header << "\n" << s.message();
    EXPECT_NE(s.message().find("raw.safetensors"), std::string::npos) << s.message();
  }
  // Header lengths past the file or the limit, and files too short for one.
  EXPECT_NE(OpenRaw("{}", 0, 1ull << 40).message().find("header length 1099511627776"), std::string::npos);
  EXPECT_NE(OpenRaw("{}", 0, 1).message().find("header length 1"), std::string::npos);
  std::ofstream(dir_ / "short.safetensors") << "abc";
  EXPECT_NE(SafetensorsReader::Open((dir_ / "short.safetensors").string()).status().message().find("no header"),
            std::string::npos);
  EXPECT_EQ(SafetensorsReader::Open((dir_ / "absent.safetensors").string()).status().code(), StatusCode::kNotFound);
}

TEST_F(Safetensors, DeeplyNestedValuesAreRefusedWithoutRecursing) {
  // Found with the fuzz target's harness (tests/fuzz): the message about a bad
  // dtype or shape printed the value with one call per level, so a header
  // nesting it a million levels deep overflowed the stack.
  const std::string deep = std::string(1000000, '[') + std::string(1000000, ']');
  const std::pair<std::string, std::string> cases[] = {
      {R"({"w":{"dtype":)" + deep + R"(,"shape":[1],"data_offsets":[0,4]}})", "tensor 'w': dtype (a nested array)"},
      {R"({"w":{"dtype":"F32","shape":[)" + deep + R"(],"data_offsets":[0,4]}})", "tensor 'w': shape (a nested array)"},
      {R"({"w":{"dtype":{"a":)" + deep + R"(},"shape":[1],"data_offsets":[0,4]}})", "tensor 'w': dtype (an object)"},
  };
  for (const auto& [header, says] : cases) {
    Status s = OpenRaw(header, 4);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find(says), std::string::npos) << s.message().substr(0, 500);
    EXPECT_LT(s.message().size(), 1000u);
  }
  // Long keys are cut too (found by bench/fuzz: an unknown key was echoed whole).
  const std::string long_key(100000, 'k');
  for (const std::string& header :
       {R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4],")" + long_key + R"(":1}})",
        R"({"__metadata__":{")" + long_key + R"(":1}})"}) {
    Status s = OpenRaw(header, 4);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find("'kkk"), std::string::npos) << s.message().substr(0, 500);
    EXPECT_LT(s.message().size(), 1000u);
  }
  // A long flat value is cut.
  Status s = OpenRaw(R"({"w":{"dtype":")" + std::string(100000, 'x') + R"(","shape":[1],"data_offsets":[0,4]}})", 4);
  EXPECT_NE(s.message().find("tensor 'w': dtype \"xxx"), std::string::npos) << s.message().substr(0, 500);
  EXPECT_LT(s.message().size(), 1000u);
}

TEST(SafetensorsConvert, SixteenBitRoundsToNearestEven) {
  const float in[] = {1.0f, 1.0f + 1.0f / 256, 1.0f + 3.0f / 256, 65520.0f, 5.96e-8f, 1e-9f, -0.0f, INFINITY, NAN};
  uint16_t bf[9], hf[9];
  ConvertFromF32(StDType::kBF16, in, 9, bf);
  ConvertFromF32(StDType::kF16, in, 9, hf);
  EXPECT_EQ(bf[0], 0x3f80);
  EXPECT_EQ(bf[1], 0x3f80);  // a tie rounds to the even mantissa
  EXPECT_EQ(bf[2], 0x3f82);
  EXPECT_EQ(hf[0], 0x3c00);
  EXPECT_EQ(hf[3], 0x7c00);  // past fp16's range: infinity
  EXPECT_EQ(hf[4], 0x0001);  // the smallest subnormal
  EXPECT_EQ(hf[5], 0x0000);
  EXPECT_EQ(hf[6], 0x8000);
  EXPECT_EQ(hf[7], 0x7c00);
  float back[9];
  ConvertToF32(StDType::kF16, hf, 9, back);
  EXPECT_EQ(back[0], 1.0f);
  EXPECT_FLOAT_EQ(back[4], 5.9604645e-8f);
  EXPECT_TRUE(std::isnan(back[8]));
  ConvertToF32(StDType::kBF16, bf, 9, back);
  EXPECT_TRUE(std::isnan(back[8]));
  EXPECT_EQ(back[7], INFINITY);
}

// ------------------------------------------------- sizes beyond 32 bits

constexpr uint64_t kFourGib = uint64_t{1} << 32;

// An embedding of 256000 x 16384 (4.19e9 elements, 8.4 GB in BF16) and a
// tensor of 2^31 + 1 elements: counted, sized and placed without a 32-bit cut.
// A product cut to 32 bits would take [0, 8388608000 mod 2^32) for the
// embedding's bytes; that range is refused.
TEST(SafetensorsHeader, TensorsOfMoreThanTwoToThe31ElementsKeepTheirNumbers) {
  const uint64_t embed = 256000ull * 16384 * 2, wide = (2147483648ull + 1) * 4;
  const std::string header = R"({"embed":{"dtype":"BF16","shape":[256000,16384],"data_offsets":[0,)" +
                             std::to_string(embed) + R"(]},"wide":{"dtype":"F32","shape":[2147483649],)"
                             R"("data_offsets":[)" + std::to_string(embed) + "," + std::to_string(embed + wide) + "]}}";
  StatusOr<std::vector<StTensor>> t = ParseSafetensorsHeader(header, embed + wide, "big.safetensors");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ(t->size(), 2u);
  EXPECT_EQ((*t)[0].name, "embed");
  EXPECT_EQ((*t)[0].numel(), 4194304000ull);
  EXPECT_EQ((*t)[0].shape, (std::vector<int64_t>{256000, 16384}));
  EXPECT_EQ((*t)[0].end, 8388608000ull);
  EXPECT_EQ((*t)[1].numel(), 2147483649ull);
  EXPECT_EQ((*t)[1].begin, 8388608000ull);
  EXPECT_EQ((*t)[1].end, 8388608000ull + 8589934596ull);

  const uint64_t cut = embed % kFourGib;
  Status s = ParseSafetensorsHeader(R"({"embed":{"dtype":"BF16","shape":[256000,16384],"data_offsets":[0,)" +
                                        std::to_string(cut) + "]}}",
                                    cut, "big.safetensors")
                 .status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("needs 8388608000"), std::string::npos) << s.ToString();
}

// Files whose data runs past 4 GiB: the first tensor is 4 GiB + 4 KiB of holes,
// so the next ones start past 2^32 bytes; a few KiB of them are real.
class SafetensorsPastFourGib : public Safetensors {
 protected:
  static constexpr uint64_t kBigElements = (kFourGib + 4096) / 4;  // F32
  static constexpr uint64_t kSmall = 1024, kHalf = 2048;         // F32 and BF16 elements after it

  // Why `p`, a file of holes but a few KiB, is not sparse on this file system ("" when it is).
  static std::string NotSparse(const fs::path& p) {
    struct stat st {};
    if (::stat(p.c_str(), &st) != 0) return p.string() + ": " + std::strerror(errno);
    if (uint64_t(st.st_blocks) * 512 < (uint64_t{1} << 20)) return "";
    return p.string() + ": the file system does not keep holes (" + std::to_string(uint64_t(st.st_blocks) * 512) +
           " bytes of blocks for a sparse file)";
  }
  static std::vector<float> Values(uint64_t n, float scale) {
    std::vector<float> v(n);
    // Integers below 256 in magnitude, times a power of two: exact in BF16.
    for (uint64_t i = 0; i < n; ++i) v[i] = scale * float(int64_t(i % 251) - 100);
    return v;
  }
  // `small` and `half` (BF16) read back as written.
  void ExpectSmallTensorsReadBack(const SafetensorsReader& r) {
    const StTensor* big = r.Find("a.big");
    const StTensor* small = r.Find("b.small");
    const StTensor* half = r.Find("c.half");
    ASSERT_TRUE(big && small && half);
    EXPECT_EQ(big->numel(), kBigElements);
    EXPECT_EQ(big->end, kFourGib + 4096);
    EXPECT_EQ(small->begin, kFourGib + 4096);
    EXPECT_EQ(half->begin, kFourGib + 4096 + kSmall * 4);
    EXPECT_EQ(half->end, half->begin + kHalf * 2);
    std::vector<float> back(kSmall);
    ASSERT_TRUE(r.ReadF32(*small, back.data()).ok());
    EXPECT_EQ(back, Values(kSmall, 0.5f));
    back.assign(kHalf, 0.0f);
    ASSERT_TRUE(r.ReadF32(*half, back.data()).ok());
    EXPECT_EQ(back, Values(kHalf, 2.0f));
  }
};

TEST_F(SafetensorsPastFourGib, ATensorPastFourGibIsReadFromItsOffset) {
  const std::string header = R"({"a.big":{"dtype":"F32","shape":[)" + std::to_string(kBigElements) +
                             R"(],"data_offsets":[0,4294971392]},"b.small":{"dtype":"F32","shape":[1024],)"
                             R"("data_offsets":[4294971392,4294975488]},"c.half":{"dtype":"BF16","shape":[2048],)"
                             R"("data_offsets":[4294975488,4294979584]}})";
  const fs::path p = dir_ / "sparse.safetensors";
  const uint64_t data_start = 8 + header.size(), small_at = data_start + kFourGib + 4096;
  const int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  ASSERT_GE(fd, 0);
  unsigned char len8[8];
  for (int i = 0; i < 8; ++i) len8[i] = (uint64_t(header.size()) >> (8 * i)) & 0xff;
  const std::vector<float> small = Values(kSmall, 0.5f), half32 = Values(kHalf, 2.0f);
  std::vector<uint16_t> half(kHalf);
  ConvertFromF32(StDType::kBF16, half32.data(), kHalf, half.data());
  const bool wrote = ::pwrite(fd, len8, 8, 0) == 8 &&
                     ::pwrite(fd, header.data(), header.size(), 8) == ssize_t(header.size()) &&
                     ::ftruncate(fd, off_t(data_start + 4294979584ull)) == 0 &&
                     ::pwrite(fd, small.data(), kSmall * 4, off_t(small_at)) == ssize_t(kSmall * 4) &&
                     ::pwrite(fd, half.data(), kHalf * 2, off_t(small_at + kSmall * 4)) == ssize_t(kHalf * 2);
  ::close(fd);
  ASSERT_TRUE(wrote) << p << ": " << std::strerror(errno);
  if (const std::string why = NotSparse(p); !why.empty()) GTEST_SKIP() << why;
  StatusOr<SafetensorsReader> r = SafetensorsReader::Open(p.string());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectSmallTensorsReadBack(*r);
}

// The writer lays tensors out past 4 GiB and writes them there; its unfinished
// file (the folder's one file: the 4 GiB tensor is never written) reads back.
TEST_F(SafetensorsPastFourGib, TheWriterPlacesTensorsPastFourGib) {
  const fs::path p = dir_ / "written.safetensors";
  StatusOr<SafetensorsWriter> w = SafetensorsWriter::Begin(
      p.string(),
      {{"c.half", StDType::kBF16, {int64_t(kHalf)}}, {"b.small", StDType::kF32, {int64_t(kSmall)}},
       {"a.big", StDType::kF32, {int64_t(kBigElements)}}},
      {});
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  fs::path unfinished;
  for (const fs::directory_entry& e : fs::directory_iterator(dir_)) unfinished = e.path();
  ASSERT_FALSE(unfinished.empty());
  if (const std::string why = NotSparse(unfinished); !why.empty()) GTEST_SKIP() << why;
  const std::vector<float> small = Values(kSmall, 0.5f), half32 = Values(kHalf, 2.0f);
  std::vector<uint16_t> half(kHalf);
  ConvertFromF32(StDType::kBF16, half32.data(), kHalf, half.data());
  ASSERT_TRUE(w->Write("b.small", small.data(), kSmall * 4).ok());
  ASSERT_TRUE(w->Write("c.half", half.data(), kHalf * 2).ok());
  StatusOr<SafetensorsReader> r = SafetensorsReader::Open(unfinished.string());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectSmallTensorsReadBack(*r);
}

}  // namespace
}  // namespace tencache
