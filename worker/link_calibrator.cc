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
  measure("h2d", c.bytes_host_to_device, c.seconds_host_to_device, &links_.h2d_bps);
  measure("d2h", c.bytes_device_to_host, c.seconds_device_to_host, &links_.d2h_bps);
  measure("nvme_read", c.bytes_nvme_to_host, c.seconds_nvme_to_host, &links_.nvme_read_bps);
  measure("nvme_write", c.bytes_host_to_nvme, c.seconds_host_to_nvme, &links_.nvme_write_bps);
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
  steady_links_[0].Add(cache.bytes_host_to_device, cache.seconds_host_to_device);
  steady_links_[1].Add(cache.bytes_device_to_host, cache.seconds_device_to_host);
  steady_links_[2].Add(cache.bytes_nvme_to_host, cache.seconds_nvme_to_host);
  steady_links_[3].Add(cache.bytes_host_to_nvme, cache.seconds_host_to_nvme);
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
      << "B --h2d-gbps " << steady_links_[0].Median(links_.h2d_bps) / 1e9 << " --d2h-gbps "
      << steady_links_[1].Median(links_.d2h_bps) / 1e9 << " --nvme-read-gbps "
      << steady_links_[2].Median(links_.nvme_read_bps) / 1e9 << " --nvme-write-gbps "
      << steady_links_[3].Median(links_.nvme_write_bps) / 1e9 << " --net-gbps " << links_.collective_bps / 1e9;
  return out.str();
}

}  // namespace tencache
