// tencache-bench nvme: sequential write then read through the NvmeTier API from
// host-arena memory as the cache holds it (huge pages advised), with checksums on
// (the default) and off, and once from 4 KiB pages (the arena without the
// advice), interleaved with fio (io_uring, O_DIRECT)
// and, given --deepspeed-aio, DeepSpeed's libaio engine, each on a file of its
// own of the same size (preallocated and written once before any timing), with
// the same block size and depth, in an order that rotates each round; every round's figures and the medians are
// reported, with the ratios ours / fio and ours / DeepSpeed, and the
// single-thread CRC32C throughput that bounds checksummed I/O.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "bench/benchmarks.h"
#include "cachemgr/crc32c.h"
#include "cachemgr/host_arena.h"
#include "cachemgr/nvme_tier.h"
#include "common/byte_size.h"
#include "common/cli.h"

namespace tencache::bench {
namespace {

using Clock = std::chrono::steady_clock;

struct NvmeConfig {  // the flags, with their defaults
  std::string dir;
  uint64_t size = kGiB, block = kMiB;
  uint32_t depth = 16;
  uint64_t request = 64 * kMiB;  // bytes per NvmeTier request
  uint32_t outstanding = 4;      // NvmeTier requests kept in flight so the ring never drains
  int rounds = 3;
  bool json = false;
  std::string deepspeed_aio;  // deepspeed-aio-pass executable (bench/deepspeed_aio.sh); "" = not compared
};

// Writes or reads the whole file through `tier`, c.outstanding requests of
// c.request bytes in flight; returns GB/s.
StatusOr<double> Pass(const NvmeConfig& c, NvmeTier* tier, uint8_t* buf, bool write) {
  const auto start = Clock::now();
  std::vector<IoTicket> inflight(c.outstanding);
  uint32_t i = 0;
  for (uint64_t off = 0; off < c.size; off += c.request, i = (i + 1) % c.outstanding) {
    if (off >= c.outstanding * c.request) TC_RETURN_IF_ERROR(inflight[i].Wait(std::chrono::minutes(2)));
    const uint64_t len = std::min(c.request, c.size - off);
    uint8_t* b = buf + static_cast<uint64_t>(i) * c.request;
    inflight[i] = write ? tier->SubmitWrite(off, b, len, "bench") : tier->SubmitRead(off, b, len, "bench");
  }
  const uint64_t requests = (c.size + c.request - 1) / c.request;
  for (uint64_t k = 0; k < std::min<uint64_t>(requests, c.outstanding); ++k)
    TC_RETURN_IF_ERROR(inflight[k].Wait(std::chrono::minutes(2)));
  return c.size / std::chrono::duration<double>(Clock::now() - start).count() / 1e9;
}

// A tier on its own file, <dir>/rank-<rank>.tcnvme (removed when the tier is destroyed).
StatusOr<std::unique_ptr<NvmeTier>> OpenTier(const NvmeConfig& c, bool checksums, uint8_t* buf, int rank) {
  NvmeTierOptions o;
  o.dir = c.dir;
  o.rank = rank;
  o.queue_depth = c.depth;
  o.block_size = c.block;
  o.checksums = checksums;
  TC_ASSIGN_OR_RETURN(std::unique_ptr<NvmeTier> tier, NvmeTier::Open(o));
  TC_RETURN_IF_ERROR(tier->Reserve(c.size).status());
  // As the cache registers its host arena: fixed buffers where the kernel allows them.
  Status fixed = tier->RegisterBuffers({{buf, c.outstanding * c.request}}, std::chrono::seconds(10));
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

// Runs `cmd` and returns what it printed on stdout; IoError naming the command if it failed.
StatusOr<std::string> Capture(const std::string& cmd) {
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return Status::Unavailable("popen failed: " + cmd);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  const int rc = ::pclose(p);
  if (rc != 0) return Status::IoError("exited with status " + std::to_string(rc) + ": " + cmd);
  return out;
}

// Runs fio on `file`; returns GB/s from its JSON bw_bytes.
StatusOr<double> Fio(const NvmeConfig& c, const std::string& file, bool write) {
  const std::string rw = write ? "write" : "read";
  const std::string cmd = "fio --name=tencache --ioengine=io_uring --direct=1 --rw=" + rw +
                          " --bs=" + std::to_string(c.block) + " --iodepth=" + std::to_string(c.depth) +
                          " --size=" + std::to_string(c.size) + " --filename=" + file +
                          " --output-format=json 2>/dev/null";
  TC_ASSIGN_OR_RETURN(std::string out, Capture(cmd));
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

// One pass of DeepSpeed's libaio engine (c.deepspeed_aio, which bench/deepspeed_aio.sh builds); GB/s as it reports.
// `huge`: its buffer in huge pages as our host arena's (the driver's `huge` argument).
StatusOr<double> DeepSpeedAio(const NvmeConfig& c, const std::string& file, bool write, bool huge) {
  const std::string cmd = c.deepspeed_aio + " " + file + " " + std::to_string(c.size) + " " +
                          std::to_string(c.block) + " " + std::to_string(c.depth) + (write ? " write" : " read") +
                          (huge ? " huge" : "");
  TC_ASSIGN_OR_RETURN(std::string out, Capture(cmd));
  double gbps = 0;
  if (std::sscanf(out.c_str(), "gbps %lf", &gbps) != 1 || gbps <= 0)
    return Status::IoError("deepspeed-aio-pass printed no `gbps` line: " + cmd);
  return gbps;
}

struct Contender {  // one engine, its per-round GB/s
  std::string name;
  std::function<StatusOr<std::pair<double, double>>()> pass;  // write GB/s, then read GB/s
  std::vector<double> w, r;
};

// The I/O buffer of `bytes` from `arena` (the cache's host memory), filled with a pattern.
StatusOr<uint8_t*> ArenaBuffer(HostArena* arena, uint64_t bytes) {
  void* base = nullptr;
  TC_RETURN_IF_ERROR(arena->Reserve(bytes, &base).status());
  uint8_t* buf = static_cast<uint8_t*>(base);
  for (uint64_t i = 0; i < bytes; i += 8) std::memcpy(buf + i, &i, 8);
  return buf;
}

Status RunNvmeBench(NvmeConfig c) {
  c.size = (c.size + c.block - 1) / c.block * c.block;
  const uint64_t buffer_bytes = c.outstanding * c.request;
  // The buffers come from the host arena, as the cache's host tier takes its
  // memory: with the huge-page advice (the default) and without it.
  HostArena huge_arena(/*huge_pages=*/true), small_arena(/*huge_pages=*/false);
  TC_ASSIGN_OR_RETURN(uint8_t* huge_buf, ArenaBuffer(&huge_arena, buffer_bytes));
  TC_ASSIGN_OR_RETURN(uint8_t* small_buf, ArenaBuffer(&small_arena, buffer_bytes));
  const std::string pages = huge_arena.huge_pages() ? "huge pages advised" : "huge pages refused by the kernel";
  // Every contender works on a file of its own that was written whole once
  // before any timing (so no timed pass converts unwritten extents or extends
  // a file) and stays for the whole run: one tier per NvmeTier contender, and
  // two more, never timed, that hold fio's file and DeepSpeed's. (Sharing one
  // would let a write follow the other's read of the same blocks.)
  struct Ours {
    const char* name;
    bool checksums;
    uint8_t* buf;
  };
  const Ours ours[] = {{"NvmeTier (checksums on)", true, huge_buf},
                       {"NvmeTier (checksums off)", false, huge_buf},
                       {"NvmeTier (on, 4 KiB pages)", true, small_buf}};
  std::unique_ptr<NvmeTier> tiers[6];  // ours, fio's, DeepSpeed's with 4 KiB pages and with huge pages
  const int files = c.deepspeed_aio.empty() ? 4 : 6;
  for (int rank = 0; rank < files; ++rank) {
    uint8_t* buf = rank < 3 ? ours[rank].buf : huge_buf;
    TC_ASSIGN_OR_RETURN(tiers[rank], OpenTier(c, rank < 3 && ours[rank].checksums, buf, rank));
    TC_RETURN_IF_ERROR(Pass(c, tiers[rank].get(), buf, true).status());
  }
  const std::string engine = tiers[1]->Describe();
  const std::string file = tiers[3]->file_path();
  const bool fio = HaveFio();
  std::vector<Contender> who;
  for (int k = 0; k < 3; ++k) {
    NvmeTier* tier = tiers[k].get();
    uint8_t* buf = ours[k].buf;
    who.push_back({ours[k].name,
                   [&c, buf, tier]() -> StatusOr<std::pair<double, double>> {
                     TC_ASSIGN_OR_RETURN(double wg, Pass(c, tier, buf, true));
                     TC_ASSIGN_OR_RETURN(double rg, Pass(c, tier, buf, false));
                     return std::make_pair(wg, rg);
                   },
                   {},
                   {}});
  }
  if (fio) {
    who.push_back({"fio io_uring O_DIRECT", [&c, &file]() -> StatusOr<std::pair<double, double>> {
                     TC_ASSIGN_OR_RETURN(double wg, Fio(c, file, true));
                     TC_ASSIGN_OR_RETURN(double rg, Fio(c, file, false));
                     return std::make_pair(wg, rg);
                   },
                   {},
                   {}});
  }
  for (int k = 4; k < files; ++k) {  // DeepSpeed as users run it (4 KiB pages), then given our memory
    const bool huge = k == 5;
    const std::string ds_file = tiers[k]->file_path();
    who.push_back({huge ? "DeepSpeed libaio (huge pages)" : "DeepSpeed libaio",
                   [&c, ds_file, huge]() -> StatusOr<std::pair<double, double>> {
                     TC_ASSIGN_OR_RETURN(double wg, DeepSpeedAio(c, ds_file, true, huge));
                     TC_ASSIGN_OR_RETURN(double rg, DeepSpeedAio(c, ds_file, false, huge));
                     return std::make_pair(wg, rg);
                   },
                   {},
                   {}});
  }
  // Rounds interleave the contenders, and the order rotates each round so that
  // no contender always runs first (or right after another's writes) on this noisy disk.
  for (int round = 0; round < c.rounds; ++round) {
    for (size_t k = 0; k < who.size(); ++k) {
      Contender& x = who[(round + k) % who.size()];
      TC_ASSIGN_OR_RETURN(auto wr, x.pass());
      x.w.push_back(wr.first);
      x.r.push_back(wr.second);
    }
  }
  const double crc_gbps = CrcGbps(huge_buf, buffer_bytes, c.block);
  const Contender& on = who[0];
  const Contender& off = who[1];
  const Contender& small = who[2];
  const Contender* fio_c = fio ? &who[3] : nullptr;
  const Contender* ds = c.deepspeed_aio.empty() ? nullptr : &who[who.size() - 2];
  const Contender* ds_huge = c.deepspeed_aio.empty() ? nullptr : &who.back();
  auto over = [](double a, const Contender* b, bool write) {
    return b ? nlohmann::json(a / Median(write ? b->w : b->r)) : nlohmann::json(nullptr);
  };
  nlohmann::ordered_json j;
  j["rounds_write_gbps"] = on.w;
  j["rounds_read_gbps"] = on.r;
  j["rounds_write_gbps_no_checksum"] = off.w;
  j["rounds_read_gbps_no_checksum"] = off.r;
  j["rounds_write_gbps_4k_pages"] = small.w;
  j["rounds_read_gbps_4k_pages"] = small.r;
  j["rounds_fio_write_gbps"] = fio_c ? fio_c->w : std::vector<double>{};
  j["rounds_fio_read_gbps"] = fio_c ? fio_c->r : std::vector<double>{};
  j["rounds_deepspeed_write_gbps"] = ds ? ds->w : std::vector<double>{};
  j["rounds_deepspeed_read_gbps"] = ds ? ds->r : std::vector<double>{};
  j["rounds_deepspeed_huge_pages_write_gbps"] = ds_huge ? ds_huge->w : std::vector<double>{};
  j["rounds_deepspeed_huge_pages_read_gbps"] = ds_huge ? ds_huge->r : std::vector<double>{};
  j["crc32c_gbps_one_thread"] = crc_gbps;
  j["write_gbps"] = Median(on.w);
  j["read_gbps"] = Median(on.r);
  j["write_gbps_no_checksum"] = Median(off.w);
  j["read_gbps_no_checksum"] = Median(off.r);
  j["write_gbps_4k_pages"] = Median(small.w);
  j["read_gbps_4k_pages"] = Median(small.r);
  j["fio_write_gbps"] = fio_c ? nlohmann::json(Median(fio_c->w)) : nlohmann::json(nullptr);
  j["fio_read_gbps"] = fio_c ? nlohmann::json(Median(fio_c->r)) : nlohmann::json(nullptr);
  j["deepspeed_write_gbps"] = ds ? nlohmann::json(Median(ds->w)) : nlohmann::json(nullptr);
  j["deepspeed_read_gbps"] = ds ? nlohmann::json(Median(ds->r)) : nlohmann::json(nullptr);
  j["deepspeed_huge_pages_write_gbps"] = ds_huge ? nlohmann::json(Median(ds_huge->w)) : nlohmann::json(nullptr);
  j["deepspeed_huge_pages_read_gbps"] = ds_huge ? nlohmann::json(Median(ds_huge->r)) : nlohmann::json(nullptr);
  j["write_ratio"] = over(Median(on.w), fio_c, true);
  j["read_ratio"] = over(Median(on.r), fio_c, false);
  j["write_ratio_no_checksum"] = over(Median(off.w), fio_c, true);
  j["read_ratio_no_checksum"] = over(Median(off.r), fio_c, false);
  j["write_ratio_deepspeed"] = over(Median(on.w), ds, true);
  j["read_ratio_deepspeed"] = over(Median(on.r), ds, false);
  j["write_ratio_deepspeed_huge_pages"] = over(Median(on.w), ds_huge, true);
  j["read_ratio_deepspeed_huge_pages"] = over(Median(on.r), ds_huge, false);
  j["write_ratio_4k_pages"] = over(Median(small.w), fio_c, true);
  j["read_ratio_4k_pages"] = over(Median(small.r), fio_c, false);
  j["size_bytes"] = c.size;
  j["block_bytes"] = c.block;
  j["depth"] = c.depth;
  j["request_bytes"] = c.request;
  j["outstanding"] = c.outstanding;
  j["rounds"] = c.rounds;
  j["engine"] = engine;
  j["buffer"] = "host arena, " + pages;
  j["checksum"] = std::string("crc32c-") + Crc32cImplementation();
  j["fio"] = fio ? "fio --ioengine=io_uring --direct=1" : "not found (install fio to compare)";
  j["deepspeed"] = ds ? c.deepspeed_aio : "not given (--deepspeed-aio)";
  if (c.json) {
    std::printf("%s\n", j.dump().c_str());
    return Status::Ok();
  }
  std::printf("tencache-bench nvme: %s, %s blocks, depth %u, NvmeTier requests %s x %u in flight, %d round(s), "
              "median GB/s\n  tier: %s\n  buffer: host arena, %s\n",
              FormatBytes(c.size).c_str(), FormatBytes(c.block).c_str(), c.depth, FormatBytes(c.request).c_str(),
              c.outstanding, c.rounds, engine.c_str(), pages.c_str());
  std::printf("  %-44s %8s %8s   per round (write / read)\n", "", "write", "read");
  for (const Contender& x : who) {
    std::printf("  %-44s %8.3f %8.3f  ", x.name.c_str(), Median(x.w), Median(x.r));
    for (size_t i = 0; i < x.w.size(); ++i) std::printf(" %.3f/%.3f", x.w[i], x.r[i]);
    std::printf("\n");
  }
  for (const Contender* b : {fio_c, ds, ds_huge}) {
    if (b == nullptr) continue;
    for (const Contender* a : {&on, &off, &small}) {
      const std::string label = std::string(a == &on    ? "ratio (checksums on)/"
                                            : a == &off ? "ratio (checksums off)/"
                                                        : "ratio (4 KiB pages)/") +
                                (b == fio_c ? "fio" : b == ds ? "DeepSpeed" : "DeepSpeed (huge pages)");
      std::printf("  %-44s %8.2f %8.2f\n", label.c_str(), Median(a->w) / Median(b->w), Median(a->r) / Median(b->r));
    }
  }
  if (!fio) std::printf("  fio not found: install fio to compare against it\n");
  if (!ds) std::printf("  DeepSpeed not compared: build its engine with bench/deepspeed_aio.sh and pass --deepspeed-aio\n");
  std::printf("  crc32c-%s, one thread, %s chunks of a %s buffer: %.2f GB/s\n", Crc32cImplementation(),
              FormatBytes(c.block).c_str(), FormatBytes(buffer_bytes).c_str(), crc_gbps);
  return Status::Ok();
}

}  // namespace

Benchmark AddNvmeBench(CLI::App& app) {
  auto c = std::make_shared<NvmeConfig>();
  CLI::App* cmd = app.add_subcommand(
      "nvme", "NvmeTier write/read GB/s (checksums on and off, huge and 4 KiB pages) vs fio and DeepSpeed's libaio");
  cmd->add_option("--dir", c->dir, "a directory on the NVMe device")->type_name("DIR")->required();
  AddSizeOption(*cmd, "--size", &c->size, "bytes written and read per pass (rounded up to whole blocks)");
  AddSizeOption(*cmd, "--block", &c->block, "bytes per I/O, a multiple of 4KiB up to 1GiB")->check(BlockSize());
  cmd->add_option("--depth", c->depth, "I/Os in flight")->type_name("N")->transform(CliWholeNumber(1, 4096));
  AddSizeOption(*cmd, "--request", &c->request, "bytes per NvmeTier request, a multiple of 4KiB")
      ->check(CliCheck("a positive multiple of 4KiB", [](const std::string& v) {
        const uint64_t bytes = std::stoull(v);
        return bytes > 0 && bytes % 4096 == 0;
      }));
  cmd->add_option("--outstanding", c->outstanding, "NvmeTier requests in flight")
      ->type_name("N")->transform(CliWholeNumber(1, 64));
  cmd->add_option("--rounds", c->rounds, "rounds of every contender")->type_name("N")->transform(CliWholeNumber(1, 20));
  cmd->add_option("--deepspeed-aio", c->deepspeed_aio,
                  "also run DeepSpeed's libaio engine: the deepspeed-aio-pass that bench/deepspeed_aio.sh builds")
      ->type_name("PATH")
      ->check(CliCheck("an executable: build it with bench/deepspeed_aio.sh DEEPSPEED_DIR",
                       [](const std::string& v) { return ::access(v.c_str(), X_OK) == 0; }));
  cmd->add_flag("--json", c->json, "one JSON object instead of the report");
  return {cmd, [c] { return RunNvmeBench(*c); }};
}

}  // namespace tencache::bench
