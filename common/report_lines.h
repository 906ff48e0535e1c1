// The lines tencache-worker prints for tencache-launch (--report-lines), which
// the launcher picks out of a local run's output or a Kubernetes launcher's log:
// every rank's PID at start, rank 0's JSON metrics after each step, rank 0's
// probe result (--probe), and rank 0's word that a checkpoint is complete or
// was resumed from (what a Kubernetes restart resumes at: the launcher cannot
// read the pods' checkpoint volume). Each is the prefix followed by the payload.
#pragma once

namespace tencache {

constexpr char kReportPidPrefix[] = "TENCACHE_PID ";          // + "<pid> <hostname>"
constexpr char kReportMetricsPrefix[] = "TENCACHE_METRICS ";  // + StepMetrics JSON
constexpr char kReportProbePrefix[] = "TENCACHE_PROBE ";      // + ProbeResult JSON
// Rank 0's log lines (always printed, not only with --report-lines) begin
// kWorkerLogPrefix; these two go on with the step and " ...", the first said
// once the checkpoint is committed.
constexpr char kWorkerLogPrefix[] = "tencache-worker: ";
constexpr char kReportCheckpointSaid[] = "checkpoint: step ";
constexpr char kReportResumedSaid[] = "resumed at step ";

}  // namespace tencache
