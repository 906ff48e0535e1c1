#include "scheduler/policies.h"

#include "common/suggest.h"

namespace tencache {

std::unique_ptr<SimPolicy> MakeTencachePolicy();  // policy_tencache.cc
std::unique_ptr<SimPolicy> MakeWindowPolicy();    // policy_window.cc
std::unique_ptr<SimPolicy> MakeLruPolicy();
std::unique_ptr<SimPolicy> MakeBeladyPolicy();

void KeyedResidents::Set(TensorId id, uint64_t key) {
  if (in_[id]) set_.erase({key_[id], id});
  key_[id] = key;
  in_[id] = true;
  set_.insert({key, id});
}

void KeyedResidents::Erase(TensorId id) {
  if (!in_[id]) return;
  set_.erase({key_[id], id});
  in_[id] = false;
}

void KeyedResidents::Clear() {
  for (const auto& [key, id] : set_) in_[id] = false;
  set_.clear();
}

void EvictUntilFits(TensorId id, bool largest, KeyedResidents& keyed, SimContext& s) {
  const uint64_t need = s.seq().bytes(id);
  keyed.Erase(id);
  while (s.free_bytes() < need && !keyed.empty()) {
    const TensorId v = largest ? keyed.Largest() : keyed.Smallest();
    keyed.Erase(v);
    s.Evict(v);
  }
}

namespace {

class LruPolicy : public SimPolicy {
 public:
  const char* name() const override { return "lru"; }
  void MakeRoom(TensorId id, DeviceAccessIndex g, SimContext& s) override {
    Init(s);
    EvictUntilFits(id, /*largest=*/false, *keyed_, s);
  }
  void OnAccess(DeviceAccessIndex g, SimContext& s) override {
    Init(s);
    const TensorId x = s.seq().tensor(g);
    if (s.resident(x)) keyed_->Set(x, g.value());
  }

 private:
  void Init(SimContext& s) {
    if (!keyed_) keyed_ = std::make_unique<KeyedResidents>(s.seq().num_tensors());
  }
  std::unique_ptr<KeyedResidents> keyed_;
};

// Belady: the resident tensor used furthest in the future leaves first. Keys
// are next uses, refreshed whenever the tensor is accessed.
class BeladyPolicy : public SimPolicy {
 public:
  const char* name() const override { return "belady"; }
  void MakeRoom(TensorId id, DeviceAccessIndex g, SimContext& s) override {
    Init(s);
    EvictUntilFits(id, /*largest=*/true, *keyed_, s);
  }
  void OnAccess(DeviceAccessIndex g, SimContext& s) override {
    Init(s);
    const TensorId x = s.seq().tensor(g);
    if (s.resident(x)) keyed_->Set(x, s.seq().NextUse(x, g).value());
  }

 private:
  void Init(SimContext& s) {
    if (!keyed_) keyed_ = std::make_unique<KeyedResidents>(s.seq().num_tensors());
  }
  std::unique_ptr<KeyedResidents> keyed_;
};

}  // namespace

std::unique_ptr<SimPolicy> MakeLruPolicy() { return std::make_unique<LruPolicy>(); }
std::unique_ptr<SimPolicy> MakeBeladyPolicy() { return std::make_unique<BeladyPolicy>(); }

std::vector<std::string> PolicyNames() {
  return {"tencache", "zero-infinity", "10cache-window", "lru", "belady"};
}

StatusOr<std::unique_ptr<SimPolicy>> MakePolicy(std::string_view name) {
  if (name == "tencache") return MakeTencachePolicy();
  if (name == "zero-infinity") return MakeZeroInfinityPolicy(ZeroInfinityKnobs{});
  if (name == "10cache-window") return MakeWindowPolicy();
  if (name == "lru") return MakeLruPolicy();
  if (name == "belady") return MakeBeladyPolicy();
  std::string list;
  for (const std::string& n : PolicyNames()) list += (list.empty() ? "" : ", ") + n;
  return Status::NotFound("unknown policy '" + std::string(name) + "'" +
                          DidYouMean(name, PolicyNames()) + "; expected one of: " + list);
}

}  // namespace tencache
