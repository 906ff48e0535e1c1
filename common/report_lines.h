// The lines tencache-worker prints for tencache-launch (--report-lines), which
// the launcher picks out of a local run's output or a Kubernetes launcher's log:
// every rank's PID at start, rank 0's JSON metrics after each step, and rank
// 0's probe result (--probe). Each is the prefix followed by the payload.
#pragma once

namespace tencache {

constexpr char kReportPidPrefix[] = "TENCACHE_PID ";          // + "<pid> <hostname>"
constexpr char kReportMetricsPrefix[] = "TENCACHE_METRICS ";  // + StepMetrics JSON
constexpr char kReportProbePrefix[] = "TENCACHE_PROBE ";      // + ProbeResult JSON

}  // namespace tencache
