#include "scheduler/profiler.h"

#include <utility>

namespace tencache {

Profiler::Profiler(TraceHeader header, LogSink log)
    : header_(std::move(header)), log_(std::move(log)) {
  current_.header = header_;
}

void Profiler::Diverge(const std::string& why) {
  if (diverged_) return;
  diverged_ = true;
  if (log_) log_("re-profiling: order changed at access " + std::to_string(position_) + " (" + why + ")");
}

void Profiler::RecordAccess(const AccessRecord& a) {
  TraceEvent e;
  e.kind = EventKind::kAccess;
  e.id = a.id;
  e.name = a.name;
  e.phase = a.phase;
  e.block = a.block;
  e.bytes = a.bytes;
  e.start_s = a.start_s;
  e.end_s = a.end_s;
  const bool device = e.is_device_access();
  current_.events.push_back(std::move(e));
  if (!device) return;
  if (has_profile()) {
    if (position_ >= profile_order_.size()) {
      Diverge("the profile has only " + std::to_string(profile_order_.size()) + " accesses");
    } else if (profile_order_[position_] != a.id) {
      Diverge("expected tensor " + std::to_string(profile_order_[position_]) + ", got " +
              std::to_string(a.id) + " '" + a.name + "'");
    }
  }
  ++position_;
}

void Profiler::RecordCollective(const CollectiveRecord& c) {
  TraceEvent e;
  e.kind = EventKind::kCollective;
  e.collective = c.kind;
  e.block = c.block;
  e.bytes = c.bytes;
  e.start_s = c.start_s;
  e.end_s = c.end_s;
  current_.events.push_back(std::move(e));
}

Status Profiler::EndStep() {
  if (has_profile() && !diverged_ && position_ < profile_order_.size()) {
    Diverge("the step ended early");
  }
  Status status = Status::Ok();
  if (!has_profile() || diverged_) {
    status = ValidateTrace(current_, "profiled step");
    if (status.ok()) {
      if (has_profile()) ++reprofiles_;
      profile_ = std::move(current_);
      profile_order_.clear();
      for (const TraceEvent& e : profile_.events) {
        if (e.is_device_access()) profile_order_.push_back(e.id);
      }
      ++version_;
    }
  }
  current_ = Trace();
  current_.header = header_;
  position_ = 0;
  diverged_ = false;
  return status;
}

}  // namespace tencache
