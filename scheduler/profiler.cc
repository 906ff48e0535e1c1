#include "scheduler/profiler.h"

#include <algorithm>
#include <utility>

#include "common/stats.h"
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
  e.pieces_begin = a.pieces_begin;
  e.pieces_end = a.pieces_end;
  e.optimizer_lane = a.optimizer_lane;
  // The training thread's accesses from its previous event's end, a lane's update from its issue.
  const double from = a.optimizer_lane ? a.issued_s : last_end_;
  const bool timed = a.asked_s >= 0 && (!a.optimizer_lane || a.issued_s >= 0);
  e.lead_s = timed ? std::max(0.0, a.asked_s - from - a.waited_s) : 0;
  e.wait_s = timed ? std::max(0.0, a.start_s - from - e.lead_s) : 0;
  if (!a.optimizer_lane) last_end_ = std::max(last_end_, a.end_s);
  const bool device = e.is_device_access();
  if (has_profile() && followed_steps_timed_) {
    const std::vector<size_t>& at = profile_accesses_;
    const bool same = accesses_ < at.size() && profile_.events[at[accesses_]].id == e.id &&
                      profile_.events[at[accesses_]].phase == e.phase;
    accesses_match_ = accesses_match_ && same;
    if (accesses_match_) {
      step_durations_.push_back(e.duration_s());
      step_leads_.push_back(e.lead_s);
      step_waits_.push_back(e.wait_s);
    }
  }
  ++accesses_;
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
  last_end_ = std::max(last_end_, c.end_s);
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
      profile_accesses_.clear();
      for (size_t i = 0; i < profile_.events.size(); ++i) {
        const TraceEvent& e = profile_.events[i];
        if (e.kind == EventKind::kAccess) profile_accesses_.push_back(i);
        if (e.is_device_access()) profile_order_.push_back(e.id);
      }
      durations_.assign(profile_accesses_.size(), {});
      leads_.assign(profile_accesses_.size(), {});
      waits_.assign(profile_accesses_.size(), {});
      timed_steps_ = 0;
      ++version_;
    }
  } else if (followed_steps_timed_ && accesses_match_ && accesses_ == profile_accesses_.size()) {
    const size_t slot = size_t(timed_steps_ % kTimedSteps);
    for (size_t i = 0; i < durations_.size(); ++i) {
      for (auto [all, now] : {std::pair{&durations_[i], step_durations_[i]}, std::pair{&leads_[i], step_leads_[i]},
                              std::pair{&waits_[i], step_waits_[i]}}) {
        if (all->size() <= slot) all->push_back(now);
        else (*all)[slot] = now;
      }
    }
    ++timed_steps_;
  }
  accesses_ = 0;
  accesses_match_ = true;
  step_durations_.clear();
  step_leads_.clear();
  step_waits_.clear();
  last_end_ = 0;
  current_ = Trace();
  current_.header = header_;
  position_ = 0;
  diverged_ = false;
  return status;
}

namespace {

// `samples[i][j]`: access i's time in timed step j. The factor that makes the
// per-access medians sum to the median step's total: a noisy CPU slows whole
// stretches of a step, so most accesses' medians are from undisturbed steps and
// their sum falls short of a typical step (docs/trace-format.md). 1 when the
// medians sum to 0.
double MedianStepScale(const std::vector<std::vector<double>>& samples) {
  if (samples.empty()) return 1;
  double medians = 0;
  for (const std::vector<double>& s : samples) medians += std::max(0.0, Median(s));
  std::vector<double> totals(samples[0].size(), 0.0);
  for (const std::vector<double>& s : samples) {
    for (size_t j = 0; j < totals.size() && j < s.size(); ++j) totals[j] += s[j];
  }
  return medians > 0 ? std::max(0.0, Median(totals)) / medians : 1;
}

}  // namespace

Trace Profiler::timed_profile() const {
  Trace t = profile_;
  if (timed_steps_ == 0) return t;
  const double duration_scale = MedianStepScale(durations_), lead_scale = MedianStepScale(leads_);
  double shift = 0;  // how much earlier (or later) the events from here on happen
  size_t a = 0;      // access events so far
  for (TraceEvent& e : t.events) {
    e.start_s += shift;
    e.end_s += shift;
    if (e.kind != EventKind::kAccess) continue;
    const double median = std::max(0.0, Median(durations_[a])) * duration_scale;
    e.lead_s = std::max(0.0, Median(leads_[a])) * lead_scale;
    e.wait_s = Median(waits_[a++]);
    if (!e.optimizer_lane) shift += median - e.duration_s();
    e.end_s = e.start_s + median;
  }
  return t;
}

}  // namespace tencache
