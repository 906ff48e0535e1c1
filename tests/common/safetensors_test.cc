// Safetensors: a round trip in every dtype, sharded folders, byte-identical
// rewrites, dtype conversion, and headers that are hostile in each way the
// parser checks (each refused with the tensor named).
#include "common/safetensors.h"

#include <gtest/gtest.h>
#include <unistd.h>

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

}  // namespace
}  // namespace tencache
