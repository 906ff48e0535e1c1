#include "worker/link_calibrator.h"

#include <algorithm>
#include <iomanip>
#include <sstream>

#include "common/stats.h"

namespace tencache {

void LinkCalibrator::CalibrateLinks(const CacheMetrics& c, const Trace& profile) {
  auto measure = [this](const char* name, uint64_t bytes, double seconds, double* bps) {
    if (bytes == 0 || !(seconds > 0)) return;
    *bps = double(bytes) / seconds;
    if (std::find(measured_links_.begin(), measured_links_.end(), name) == measured_links_.end()) {
      measured_links_.push_back(name);
    }
  };
  // A lane of the plan and the simulator serves one copy at a time at the
  // link's rate: bytes over the seconds the link was busy (two copies in flight
  // at once each take longer, so bytes over their summed seconds would not be).
  for (Link l : kLinks) measure(LinkName(l), c.link(l).bytes, c.link(l).busy_seconds, &links_.Bps(l));
  uint64_t bytes = 0;
  double seconds = 0;
  for (const TraceEvent& e : profile.events) {
    if (e.kind != EventKind::kCollective) continue;
    bytes += e.bytes;
    seconds += e.duration_s();  // includes waiting for the slowest rank
  }
  measure("net", bytes, seconds, &links_.collective_bps);
}

void LinkCalibrator::AddSteadyStep(const CacheMetrics& cache) {
  for (Link l : kLinks) steady_links_[int(l)].Add(cache.link(l).bytes, cache.link(l).busy_seconds);
}

void LinkCalibrator::LinkWindow::Add(uint64_t bytes, double seconds) {
  if (bytes == 0 || !(seconds > 0)) return;
  bps[size_t(added % Profiler::kTimedSteps)] = double(bytes) / seconds;
  ++added;
}

double LinkCalibrator::LinkWindow::Median(double otherwise) const {
  const size_t n = size_t(std::min(added, Profiler::kTimedSteps));
  return n == 0 ? otherwise : tencache::Median(std::vector<double>(bps.begin(), bps.begin() + n));
}

std::string LinkCalibrator::SimFlags() const {
  std::ostringstream out;
  out << std::setprecision(9) << "--device-budget " << sim_budgets_.device << "B --host-budget " << sim_budgets_.host
      << "B";
  for (Link l : kLinks) {
    std::string flag = LinkName(l);  // nvme_read: --nvme-read-gbps
    std::replace(flag.begin(), flag.end(), '_', '-');
    out << " --" << flag << "-gbps " << steady_links_[int(l)].Median(links_.Bps(l)) / 1e9;
  }
  out << " --net-gbps " << links_.collective_bps / 1e9;
  return out.str();
}

}  // namespace tencache
