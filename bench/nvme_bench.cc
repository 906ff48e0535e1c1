// tencache-bench nvme: sequential write then read through the NvmeTier API, with
// checksums on (the default) and off, interleaved with fio (io_uring, O_DIRECT)
// on the same preallocated, pre-filled file with the same block size, depth and
// size, in an order that rotates each round; every round's figures and the
// medians are reported, with the ratios ours / fio, and the single-thread
// CRC32C throughput that bounds checksummed I/O.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

#include <nlohmann/json.hpp>

#include "bench/benchmarks.h"
#include "cachemgr/crc32c.h"
#include "cachemgr/nvme_tier.h"
#include "common/byte_size.h"
#include "common/cli.h"

namespace tencache::bench {
namespace {

using Clock = std::chrono::steady_clock;
constexpr uint64_t kSegment = 64 << 20;  // bytes per NvmeTier request
constexpr int kOutstanding = 4;          // requests kept in flight so the ring never drains

struct NvmeConfig {  // the flags, with their defaults
  std::string dir;
  uint64_t size = kGiB, block = kMiB;
  uint32_t depth = 16;
  int rounds = 3;
  bool json = false;
};

struct FreeDeleter {
  void operator()(uint8_t* p) const { std::free(p); }
};

// Writes or reads the whole file through `tier`, kOutstanding segments at a time; returns GB/s.
StatusOr<double> Pass(NvmeTier* tier, uint8_t* buf, uint64_t size, bool write) {
  const auto start = Clock::now();
  std::vector<IoTicket> inflight(kOutstanding);
  uint64_t off = 0;
  int i = 0;
  for (; off < size; off += kSegment, i = (i + 1) % kOutstanding) {
    if (off >= kOutstanding * kSegment) TC_RETURN_IF_ERROR(inflight[i].Wait(std::chrono::minutes(2)));
    const uint64_t len = std::min(kSegment, size - off);
    uint8_t* b = buf + static_cast<uint64_t>(i) * kSegment;
    inflight[i] = write ? tier->SubmitWrite(off, b, len, "bench") : tier->SubmitRead(off, b, len, "bench");
  }
  const uint64_t segments = (size + kSegment - 1) / kSegment;
  for (uint64_t k = 0; k < std::min<uint64_t>(segments, kOutstanding); ++k)
    TC_RETURN_IF_ERROR(inflight[k].Wait(std::chrono::minutes(2)));
  return size / std::chrono::duration<double>(Clock::now() - start).count() / 1e9;
}

StatusOr<std::unique_ptr<NvmeTier>> OpenTier(const NvmeConfig& c, bool checksums, uint8_t* buf) {
  NvmeTierOptions o;
  o.dir = c.dir;
  o.queue_depth = c.depth;
  o.block_size = c.block;
  o.checksums = checksums;
  TC_ASSIGN_OR_RETURN(std::unique_ptr<NvmeTier> tier, NvmeTier::Open(o));
  TC_RETURN_IF_ERROR(tier->Reserve(c.size).status());
  // As the cache registers its host arena: fixed buffers where the kernel allows them.
  Status fixed = tier->RegisterBuffers({{buf, kOutstanding * kSegment}}, std::chrono::seconds(10));
  if (!fixed.ok()) std::fprintf(stderr, "note: fixed buffers off: %s\n", fixed.message().c_str());
  return tier;
}

// CRC32C throughput of one thread over `bytes` of `buf` in `block` chunks, as the
// tier checksums them (the buffer is larger than the caches, so this is the
// memory-bound figure the tier sees).
double CrcGbps(const uint8_t* buf, uint64_t bytes, uint64_t block) {
  uint32_t sink = 0;
  const auto start = Clock::now();
  for (int pass = 0; pass < 4; ++pass)
    for (uint64_t off = 0; off + block <= bytes; off += block) sink ^= Crc32c(0, buf + off, block);
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  asm volatile("" : : "r"(sink));  // keep the sums from being optimised away
  return 4.0 * (bytes / block * block) / seconds / 1e9;
}

bool HaveFio() { return std::system("command -v fio >/dev/null 2>&1") == 0; }

// Runs fio on `file`; returns GB/s from its JSON bw_bytes.
StatusOr<double> Fio(const NvmeConfig& c, const std::string& file, bool write) {
  const std::string rw = write ? "write" : "read";
  const std::string cmd = "fio --name=tencache --ioengine=io_uring --direct=1 --rw=" + rw +
                          " --bs=" + std::to_string(c.block) + " --iodepth=" + std::to_string(c.depth) +
                          " --size=" + std::to_string(c.size) + " --filename=" + file +
                          " --output-format=json 2>/dev/null";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return Status::Unavailable("fio: popen failed");
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  const int rc = ::pclose(p);
  if (rc != 0) return Status::IoError("fio exited with status " + std::to_string(rc) + ": " + cmd);
  const auto brace = out.find('{');
  if (brace == std::string::npos) return Status::IoError("fio printed no JSON: " + cmd);
  nlohmann::json j = nlohmann::json::parse(out.substr(brace), nullptr, false);
  if (j.is_discarded() || !j.contains("jobs") || j["jobs"].empty())
    return Status::IoError("fio JSON without jobs: " + cmd);
  return j["jobs"][0][rw]["bw_bytes"].get<double>() / 1e9;
}

CLI::Validator BlockSize() {  // after CliByteSize: the byte count
  return CliCheck("a multiple of 4KiB up to 1GiB", [](const std::string& v) {
    const uint64_t block = std::stoull(v);
    return block % 4096 == 0 && block <= kGiB;
  });
}

Status RunNvmeBench(NvmeConfig c) {
  c.size = (c.size + c.block - 1) / c.block * c.block;
  std::unique_ptr<uint8_t, FreeDeleter> buf(static_cast<uint8_t*>(std::aligned_alloc(4096, kOutstanding * kSegment)));
  if (!buf) return Status::ResourceExhausted("nvme bench: cannot allocate the I/O buffer");
  for (uint64_t i = 0; i < kOutstanding * kSegment; i += 8) std::memcpy(buf.get() + i, &i, 8);
  std::string engine, file;
  {  // fill the file once so no timed pass pays for converting unwritten extents
    TC_ASSIGN_OR_RETURN(auto tier, OpenTier(c, false, buf.get()));
    TC_RETURN_IF_ERROR(Pass(tier.get(), buf.get(), c.size, true).status());
    engine = tier->Describe();
    file = tier->file_path();
  }
  const bool fio = HaveFio();
  // Rounds interleave the contenders, and the order rotates each round so that
  // no contender always runs first (or right after fio) on this noisy disk.
  enum Contender { kOn, kOff, kFio };
  std::vector<double> w, r, w_off, r_off, fw, fr;
  for (int round = 0; round < c.rounds; ++round) {
    for (int k = 0; k < 3; ++k) {
      const Contender who = static_cast<Contender>((round + k) % 3);
      if (who == kFio) {
        if (!fio) continue;
        TC_ASSIGN_OR_RETURN(double fwg, Fio(c, file, true));
        TC_ASSIGN_OR_RETURN(double frg, Fio(c, file, false));
        fw.push_back(fwg);
        fr.push_back(frg);
        continue;
      }
      const bool checksums = who == kOn;
      TC_ASSIGN_OR_RETURN(auto tier, OpenTier(c, checksums, buf.get()));
      TC_ASSIGN_OR_RETURN(double wg, Pass(tier.get(), buf.get(), c.size, true));
      TC_ASSIGN_OR_RETURN(double rg, Pass(tier.get(), buf.get(), c.size, false));
      (checksums ? w : w_off).push_back(wg);
      (checksums ? r : r_off).push_back(rg);
    }
  }
  const double crc_gbps = CrcGbps(buf.get(), kOutstanding * kSegment, c.block);
  nlohmann::ordered_json j;
  j["rounds_write_gbps"] = w;
  j["rounds_read_gbps"] = r;
  j["rounds_write_gbps_no_checksum"] = w_off;
  j["rounds_read_gbps_no_checksum"] = r_off;
  j["rounds_fio_write_gbps"] = fw;
  j["rounds_fio_read_gbps"] = fr;
  j["crc32c_gbps_one_thread"] = crc_gbps;
  j["write_gbps"] = Median(w);
  j["read_gbps"] = Median(r);
  j["write_gbps_no_checksum"] = Median(w_off);
  j["read_gbps_no_checksum"] = Median(r_off);
  j["fio_write_gbps"] = fio ? nlohmann::json(Median(fw)) : nlohmann::json(nullptr);
  j["fio_read_gbps"] = fio ? nlohmann::json(Median(fr)) : nlohmann::json(nullptr);
  j["write_ratio"] = fio ? nlohmann::json(Median(w) / Median(fw)) : nlohmann::json(nullptr);
  j["read_ratio"] = fio ? nlohmann::json(Median(r) / Median(fr)) : nlohmann::json(nullptr);
  j["write_ratio_no_checksum"] = fio ? nlohmann::json(Median(w_off) / Median(fw)) : nlohmann::json(nullptr);
  j["read_ratio_no_checksum"] = fio ? nlohmann::json(Median(r_off) / Median(fr)) : nlohmann::json(nullptr);
  j["size_bytes"] = c.size;
  j["block_bytes"] = c.block;
  j["depth"] = c.depth;
  j["rounds"] = c.rounds;
  j["engine"] = engine;
  j["checksum"] = std::string("crc32c-") + Crc32cImplementation();
  j["fio"] = fio ? "fio --ioengine=io_uring --direct=1" : "not found (install fio to compare)";
  if (c.json) {
    std::printf("%s\n", j.dump().c_str());
    return Status::Ok();
  }
  std::printf("tencache-bench nvme: %s, %s blocks, depth %u, %d round(s), median GB/s\n  tier: %s\n",
              FormatBytes(c.size).c_str(), FormatBytes(c.block).c_str(), c.depth, c.rounds, engine.c_str());
  std::printf("  %-26s %8s %8s   per round (write / read)\n", "", "write", "read");
  auto row = [](const char* name, const std::vector<double>& wv, const std::vector<double>& rv) {
    std::printf("  %-26s %8.3f %8.3f  ", name, Median(wv), Median(rv));
    for (size_t i = 0; i < wv.size(); ++i) std::printf(" %.3f/%.3f", wv[i], rv[i]);
    std::printf("\n");
  };
  row("NvmeTier (checksums on)", w, r);
  row("NvmeTier (checksums off)", w_off, r_off);
  if (fio) {
    row("fio io_uring O_DIRECT", fw, fr);
    std::printf("  %-26s %8.2f %8.2f\n", "ratio (checksums on)/fio", Median(w) / Median(fw), Median(r) / Median(fr));
    std::printf("  %-26s %8.2f %8.2f\n", "ratio (checksums off)/fio", Median(w_off) / Median(fw),
                Median(r_off) / Median(fr));
  } else {
    std::printf("  fio not found: install fio to compare against it\n");
  }
  std::printf("  crc32c-%s, one thread, %s chunks of a %s buffer: %.2f GB/s\n", Crc32cImplementation(),
              FormatBytes(c.block).c_str(), FormatBytes(kOutstanding * kSegment).c_str(), crc_gbps);
  return Status::Ok();
}

}  // namespace

Benchmark AddNvmeBench(CLI::App& app) {
  auto c = std::make_shared<NvmeConfig>();
  CLI::App* cmd = app.add_subcommand("nvme", "NvmeTier write/read GB/s (checksums on and off) vs fio on the same file");
  cmd->add_option("--dir", c->dir, "a directory on the NVMe device")->type_name("DIR")->required();
  AddSizeOption(*cmd, "--size", &c->size, "bytes written and read per pass (rounded up to whole blocks)");
  AddSizeOption(*cmd, "--block", &c->block, "bytes per I/O, a multiple of 4KiB up to 1GiB")->check(BlockSize());
  cmd->add_option("--depth", c->depth, "I/Os in flight")->type_name("N")->check(CliWholeNumber(1, 4096));
  cmd->add_option("--rounds", c->rounds, "rounds of every contender")->type_name("N")->check(CliWholeNumber(1, 20));
  cmd->add_flag("--json", c->json, "one JSON object instead of the report");
  return {cmd, [c] { return RunNvmeBench(*c); }};
}

}  // namespace tencache::bench
