#include "common/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>

#include <nlohmann/json.hpp>

namespace tencache {
namespace {

namespace fs = std::filesystem;

constexpr size_t kMaxName = 1024;
constexpr size_t kMaxRank = 8;

std::string Errno() { return std::strerror(errno); }

// A name or value for an error message: at most 200 bytes of it.
std::string Cut(const std::string& s) { return s.size() > 200 ? s.substr(0, 200) + "..." : s; }

// `v` for an error message: a scalar or a flat array (a shape) as JSON, cut to
// 200 bytes; anything nested only named, as dump() recurses once per level and
// a hostile header can nest a million levels deep.
std::string Shown(const nlohmann::json& v) {
  if (v.is_object()) return "(an object)";
  if (v.is_array()) {
    for (const nlohmann::json& x : v) {
      if (x.is_structured()) return "(a nested array)";
    }
  }
  return Cut(v.dump());
}

bool ParseDType(const std::string& s, StDType* out) {
  if (s == "F32") *out = StDType::kF32;
  else if (s == "F16") *out = StDType::kF16;
  else if (s == "BF16") *out = StDType::kBF16;
  else return false;
  return true;
}

// pread exactly n bytes; IoError naming the file and offset otherwise.
Status ReadAt(int fd, const std::string& file, uint64_t offset, void* out, uint64_t n) {
  auto* p = static_cast<char*>(out);
  uint64_t done = 0;
  while (done < n) {
    const ssize_t r = ::pread(fd, p + done, std::min<uint64_t>(n - done, 1ull << 30), off_t(offset + done));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return Status::IoError(file + ": read at offset " + std::to_string(offset + done) + ": " + Errno());
    if (r == 0) {
      return Status::IoError(file + ": short read at offset " + std::to_string(offset + done) + ": expected " +
                             std::to_string(n) + " bytes from offset " + std::to_string(offset));
    }
    done += uint64_t(r);
  }
  return Status::Ok();
}

Status WriteAll(int fd, const std::string& file, const void* data, uint64_t n) {
  const auto* p = static_cast<const char*>(data);
  uint64_t done = 0;
  while (done < n) {
    const ssize_t w = ::write(fd, p + done, std::min<uint64_t>(n - done, 1ull << 30));
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return Status::IoError(file + ": write: " + Errno());
    done += uint64_t(w);
  }
  return Status::Ok();
}

uint16_t F32ToBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);  // NaN stays NaN
  return uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

float Bf16ToF32(uint16_t h) {
  const uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

float F16ToF32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
  uint32_t u;
  if (exp == 0) {
    if (man == 0) {
      u = sign;
    } else {  // subnormal: normalise
      int e = -1;
      uint32_t m = man;
      do {
        ++e;
        m <<= 1;
      } while ((m & 0x400u) == 0);
      u = sign | (uint32_t(127 - 15 - e) << 23) | ((m & 0x3ffu) << 13);
    }
  } else if (exp == 31) {
    u = sign | 0x7f800000u | (man << 13);
  } else {
    u = sign | ((exp + 127 - 15) << 23) | (man << 13);
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

uint16_t F32ToF16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return uint16_t(sign | 0x7e00u);           // NaN
  if (abs >= 0x477ff000u) return uint16_t(sign | 0x7c00u);          // overflow (rounds to inf)
  if (abs < 0x38800000u) {                                          // subnormal or zero in fp16
    if (abs < 0x33000000u) return uint16_t(sign);                   // below half the smallest subnormal
    const uint32_t exp = abs >> 23, man = (abs & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - exp;                               // 14 + (113 - exp)
    uint32_t h = man >> shift;
    const uint32_t rem = man & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1u))) ++h;
    return uint16_t(sign | h);
  }
  uint32_t h = ((abs - 0x38000000u) >> 13);                         // rebias exponent 127 -> 15
  const uint32_t rem = abs & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return uint16_t(sign | h);
}

}  // namespace

const char* StDTypeName(StDType d) {
  switch (d) {
    case StDType::kF32: return "F32";
    case StDType::kF16: return "F16";
    case StDType::kBF16: return "BF16";
  }
  return "?";
}

int StDTypeBytes(StDType d) { return d == StDType::kF32 ? 4 : 2; }

uint64_t StTensor::numel() const {
  uint64_t n = 1;
  for (int64_t d : shape) n *= uint64_t(d);
  return n;
}

void ConvertToF32(StDType from, const void* in, uint64_t n, float* out) {
  if (from == StDType::kF32) {
    std::memcpy(out, in, n * 4);
    return;
  }
  const auto* h = static_cast<const uint16_t*>(in);
  for (uint64_t i = 0; i < n; ++i) out[i] = from == StDType::kBF16 ? Bf16ToF32(h[i]) : F16ToF32(h[i]);
}

void ConvertFromF32(StDType to, const float* in, uint64_t n, void* out) {
  if (to == StDType::kF32) {
    std::memcpy(out, in, n * 4);
    return;
  }
  auto* h = static_cast<uint16_t*>(out);
  for (uint64_t i = 0; i < n; ++i) h[i] = to == StDType::kBF16 ? F32ToBf16(in[i]) : F32ToF16(in[i]);
}

StatusOr<std::vector<StTensor>> ParseSafetensorsHeader(std::string_view text, uint64_t data_bytes,
                                                       const std::string& where,
                                                       std::map<std::string, std::string>* metadata) {
  const std::string at = where + ": safetensors header: ";
  nlohmann::json j = nlohmann::json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Status::InvalidArgument(at + "not valid JSON");
  if (!j.is_object()) return Status::InvalidArgument(at + "expected a JSON object of tensors");
  std::vector<StTensor> out;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& name = it.key();
    const nlohmann::json& e = it.value();
    if (name == "__metadata__") {
      if (!e.is_object()) return Status::InvalidArgument(at + "'__metadata__': expected an object of strings");
      for (auto m = e.begin(); m != e.end(); ++m) {
        if (!m.value().is_string()) {
          return Status::InvalidArgument(at + "'__metadata__' key '" + Cut(m.key()) + "': expected a string");
        }
        if (metadata != nullptr) (*metadata)[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    const std::string t = at + "tensor '" + Cut(name) + "'";
    if (name.empty() || name.size() > kMaxName) {
      return Status::InvalidArgument(t + ": expected a name of 1 to " + std::to_string(kMaxName) + " characters");
    }
    if (!e.is_object()) return Status::InvalidArgument(t + ": expected an object {dtype, shape, data_offsets}");
    for (auto k = e.begin(); k != e.end(); ++k) {
      if (k.key() != "dtype" && k.key() != "shape" && k.key() != "data_offsets") {
        return Status::InvalidArgument(t + ": unknown key '" + Cut(k.key()) + "'");
      }
    }
    StTensor s;
    s.name = name;
    if (!e.contains("dtype") || !e["dtype"].is_string() || !ParseDType(e["dtype"].get<std::string>(), &s.dtype)) {
      return Status::InvalidArgument(t + ": dtype " + (e.contains("dtype") ? Shown(e["dtype"]) : "missing") +
                                     ": expected F32, F16 or BF16");
    }
    if (!e.contains("shape") || !e["shape"].is_array() || e["shape"].size() > kMaxRank) {
      return Status::InvalidArgument(t + ": shape: expected an array of at most " + std::to_string(kMaxRank) +
                                     " sizes");
    }
    uint64_t numel = 1;
    for (const nlohmann::json& d : e["shape"]) {
      if (!d.is_number_unsigned() || d.get<uint64_t>() > (1ull << 40)) {
        return Status::InvalidArgument(t + ": shape " + Shown(e["shape"]) + ": expected sizes from 0 to 2^40");
      }
      const uint64_t n = d.get<uint64_t>();
      if (n != 0 && numel > std::numeric_limits<uint64_t>::max() / 8 / n) {
        return Status::InvalidArgument(t + ": shape " + Shown(e["shape"]) + ": too many elements");
      }
      numel *= n;
      s.shape.push_back(int64_t(n));
    }
    const nlohmann::json& off = e.contains("data_offsets") ? e["data_offsets"] : nlohmann::json();
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned()) {
      return Status::InvalidArgument(t + ": data_offsets: expected [begin, end], two byte offsets");
    }
    s.begin = off[0].get<uint64_t>();
    s.end = off[1].get<uint64_t>();
    if (s.begin > s.end || s.end > data_bytes) {
      return Status::InvalidArgument(t + ": data_offsets [" + std::to_string(s.begin) + ", " + std::to_string(s.end) +
                                     "]: expected a range inside the " + std::to_string(data_bytes) +
                                     " bytes of data");
    }
    if (s.end - s.begin != numel * uint64_t(StDTypeBytes(s.dtype))) {
      return Status::InvalidArgument(t + ": data_offsets [" + std::to_string(s.begin) + ", " + std::to_string(s.end) +
                                     "] hold " + std::to_string(s.end - s.begin) + " bytes; shape " +
                                     Shown(e["shape"]) + " of " + StDTypeName(s.dtype) + " needs " +
                                     std::to_string(numel * StDTypeBytes(s.dtype)));
    }
    out.push_back(std::move(s));
  }
  std::sort(out.begin(), out.end(), [](const StTensor& a, const StTensor& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t expect = 0;
  for (const StTensor& s : out) {
    if (s.begin != expect) {
      return Status::InvalidArgument(at + "tensor '" + Cut(s.name) + "': data_offsets begin at " + std::to_string(s.begin) +
                                     " where " + (s.begin < expect ? "the previous tensor's bytes end at " : "the data continues from ") +
                                     std::to_string(expect) + " (" + (s.begin < expect ? "overlap" : "gap") + ")");
    }
    expect = s.end;
  }
  if (expect != data_bytes) {
    return Status::InvalidArgument(at + "the tensors cover " + std::to_string(expect) + " of the " +
                                   std::to_string(data_bytes) + " data bytes");
  }
  return out;
}

// ------------------------------------------------------------------- reader

SafetensorsReader::SafetensorsReader(SafetensorsReader&& o) noexcept { *this = std::move(o); }

SafetensorsReader& SafetensorsReader::operator=(SafetensorsReader&& o) noexcept {
  if (this != &o) {
    for (int fd : fds_) ::close(fd);
    files_ = std::move(o.files_);
    fds_ = std::move(o.fds_);
    data_start_ = std::move(o.data_start_);
    tensors_ = std::move(o.tensors_);
    by_name_ = std::move(o.by_name_);
    o.fds_.clear();
  }
  return *this;
}

SafetensorsReader::~SafetensorsReader() {
  for (int fd : fds_) ::close(fd);
}

Status SafetensorsReader::AddFile(const std::string& path, const std::vector<std::string>* only) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::NotFound(path + ": cannot open: " + Errno());
  fds_.push_back(fd);
  struct stat st;
  if (::fstat(fd, &st) != 0) return Status::IoError(path + ": " + Errno());
  if (!S_ISREG(st.st_mode)) return Status::InvalidArgument(path + ": not a regular file");
  const uint64_t size = uint64_t(st.st_size);
  unsigned char len8[8];
  if (size < 8) return Status::InvalidArgument(path + ": " + std::to_string(size) + " bytes: not a safetensors file (no header)");
  TC_RETURN_IF_ERROR(ReadAt(fd, path, 0, len8, 8));
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | len8[i];
  if (n < 2 || n > kMaxSafetensorsHeader || n > size - 8) {
    return Status::InvalidArgument(path + ": safetensors header length " + std::to_string(n) + ": expected 2 to " +
                                   std::to_string(std::min(kMaxSafetensorsHeader, size - 8)) + " bytes");
  }
  std::string header(n, '\0');
  TC_RETURN_IF_ERROR(ReadAt(fd, path, 8, header.data(), n));
  TC_ASSIGN_OR_RETURN(std::vector<StTensor> tensors, ParseSafetensorsHeader(header, size - 8 - n, path));
  const int index = int(files_.size());
  files_.push_back(path);
  data_start_.push_back(8 + n);
  for (StTensor& t : tensors) {
    if (only != nullptr && std::find(only->begin(), only->end(), t.name) == only->end()) continue;
    if (by_name_.count(t.name)) {
      return Status::InvalidArgument(path + ": tensor '" + t.name + "' is also in " + files_[tensors_[by_name_[t.name]].file]);
    }
    t.file = index;
    by_name_[t.name] = tensors_.size();
    tensors_.push_back(std::move(t));
  }
  return Status::Ok();
}

StatusOr<SafetensorsReader> SafetensorsReader::Open(const std::string& path) {
  SafetensorsReader r;
  std::error_code ec;
  if (!fs::is_directory(path, ec)) {
    TC_RETURN_IF_ERROR(r.AddFile(path, nullptr));
    return r;
  }
  const fs::path index = fs::path(path) / "model.safetensors.index.json";
  if (!fs::exists(index, ec)) {
    const fs::path one = fs::path(path) / "model.safetensors";
    if (!fs::exists(one, ec)) {
      return Status::NotFound(path + ": neither model.safetensors.index.json nor model.safetensors is there");
    }
    TC_RETURN_IF_ERROR(r.AddFile(one.string(), nullptr));
    return r;
  }
  std::ifstream in(index);
  nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object()) {
    return Status::InvalidArgument(index.string() + ": expected a JSON object with a weight_map {tensor: file}");
  }
  std::map<std::string, std::vector<std::string>> by_file;
  for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
    const std::string file = it.value().is_string() ? it.value().get<std::string>() : "";
    if (file.empty() || file.find('/') != std::string::npos || file == "." || file == "..") {
      return Status::InvalidArgument(index.string() + ": weight_map['" + Cut(it.key()) +
                                     "']: expected a file name in this folder");
    }
    by_file[file].push_back(it.key());
  }
  for (const auto& [file, names] : by_file) {
    TC_RETURN_IF_ERROR(r.AddFile((fs::path(path) / file).string(), &names));
    for (const std::string& n : names) {
      if (!r.by_name_.count(n)) {
        return Status::InvalidArgument(index.string() + ": tensor '" + Cut(n) + "' is not in " + Cut(file));
      }
    }
  }
  return r;
}

const StTensor* SafetensorsReader::Find(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &tensors_[it->second];
}

Status SafetensorsReader::ReadF32(const StTensor& t, float* out) const {
  const uint64_t n = t.numel(), bytes = t.end - t.begin;
  const std::string& file = files_[t.file];
  if (t.dtype == StDType::kF32) return ReadAt(fds_[t.file], file, data_start_[t.file] + t.begin, out, bytes);
  // 16-bit: read into the back half of `out`, widen front to back.
  auto* half = reinterpret_cast<uint16_t*>(out) + n;
  TC_RETURN_IF_ERROR(ReadAt(fds_[t.file], file, data_start_[t.file] + t.begin, half, bytes));
  ConvertToF32(t.dtype, half, n, out);
  return Status::Ok();
}

// ------------------------------------------------------------------- writer

StatusOr<SafetensorsWriter> SafetensorsWriter::Begin(const std::string& path, std::vector<Entry> entries,
                                                     const std::map<std::string, std::string>& metadata) {
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    const int sa = StDTypeBytes(a.dtype), sb = StDTypeBytes(b.dtype);
    return sa != sb ? sa > sb : a.name < b.name;
  });
  // The header: "__metadata__" first, then the tensors in data order.
  std::string json = "{";
  if (!metadata.empty()) json += "\"__metadata__\":" + nlohmann::json(metadata).dump();
  uint64_t offset = 0;
  for (size_t i = 0; i < entries.size(); ++i) {
    const Entry& e = entries[i];
    if (e.name.empty() || e.name == "__metadata__" || (i > 0 && entries[i - 1].name == e.name)) {
      return Status::InvalidArgument(path + ": tensor name '" + e.name + "' is empty, reserved or repeated");
    }
    uint64_t numel = 1;
    for (int64_t d : e.shape) numel *= uint64_t(d);
    const uint64_t end = offset + numel * StDTypeBytes(e.dtype);
    nlohmann::ordered_json t = {{"dtype", StDTypeName(e.dtype)}, {"shape", e.shape}, {"data_offsets", {offset, end}}};
    json += std::string(json.size() > 1 ? "," : "") + nlohmann::json(e.name).dump() + ":" + t.dump();
    offset = end;
  }
  json += "}";
  json.append((8 - json.size() % 8) % 8, ' ');
  SafetensorsWriter w;
  w.path_ = path;
  w.tmp_ = path + ".tmp";
  w.fd_ = ::open(w.tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (w.fd_ < 0) return Status::IoError(w.tmp_ + ": cannot create: " + Errno());
  unsigned char len8[8];
  for (int i = 0; i < 8; ++i) len8[i] = (uint64_t(json.size()) >> (8 * i)) & 0xff;
  TC_RETURN_IF_ERROR(WriteAll(w.fd_, w.tmp_, len8, 8));
  TC_RETURN_IF_ERROR(WriteAll(w.fd_, w.tmp_, json.data(), json.size()));
  w.data_start_ = 8 + json.size();
  uint64_t at = 0;
  for (const Entry& e : entries) {
    uint64_t numel = 1;
    for (int64_t d : e.shape) numel *= uint64_t(d);
    w.slots_[e.name] = {at, numel * StDTypeBytes(e.dtype), false};
    at += numel * StDTypeBytes(e.dtype);
  }
  if (at > 0 && ::ftruncate(w.fd_, off_t(w.data_start_ + at)) != 0) return Status::IoError(w.tmp_ + ": " + Errno());
  return w;
}

SafetensorsWriter::SafetensorsWriter(SafetensorsWriter&& o) noexcept
    : path_(std::move(o.path_)), tmp_(std::move(o.tmp_)), fd_(o.fd_), data_start_(o.data_start_),
      slots_(std::move(o.slots_)) {
  o.fd_ = -1;
}

SafetensorsWriter::~SafetensorsWriter() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(tmp_.c_str());
  }
}

Status SafetensorsWriter::Write(const std::string& name, const void* data, uint64_t bytes) {
  if (fd_ < 0) return Status::FailedPrecondition(path_ + ": already finished");
  auto it = slots_.find(name);
  if (it == slots_.end()) return Status::InvalidArgument(path_ + ": tensor '" + name + "' is not in the header");
  Slot& s = it->second;
  if (s.written) return Status::InvalidArgument(path_ + ": tensor '" + name + "' written twice");
  if (bytes != s.bytes) {
    return Status::InvalidArgument(path_ + ": tensor '" + name + "': " + std::to_string(bytes) + " bytes, expected " +
                                   std::to_string(s.bytes));
  }
  const auto* p = static_cast<const char*>(data);
  for (uint64_t done = 0; done < bytes;) {
    const ssize_t w = ::pwrite(fd_, p + done, std::min<uint64_t>(bytes - done, 1ull << 30),
                               off_t(data_start_ + s.offset + done));
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return Status::IoError(tmp_ + ": write at offset " + std::to_string(data_start_ + s.offset + done) + ": " + Errno());
    done += uint64_t(w);
  }
  s.written = true;
  return Status::Ok();
}

Status SafetensorsWriter::Finish() {
  if (fd_ < 0) return Status::FailedPrecondition(path_ + ": already finished");
  for (const auto& [name, slot] : slots_) {
    if (!slot.written) return Status::FailedPrecondition(path_ + ": tensor '" + name + "' not written");
  }
  if (::fsync(fd_) != 0) return Status::IoError(tmp_ + ": fsync: " + Errno());
  ::close(fd_);
  fd_ = -1;
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) return Status::IoError(path_ + ": rename: " + Errno());
  const std::string dir = fs::path(path_).parent_path().empty() ? "." : fs::path(path_).parent_path().string();
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return Status::Ok();
}

}  // namespace tencache
