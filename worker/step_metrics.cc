#include "worker/step_metrics.h"

#include <cmath>

#include <nlohmann/json.hpp>

namespace tencache {

std::string StepMetrics::ToJson() const {
  nlohmann::ordered_json j;
  j["step"] = step;
  j["loss"] = loss;
  j["step_time_s"] = step_time_s;
  j["tokens_per_s"] = tokens_per_s;
  j["lr"] = lr;
  if (grad_norm >= 0) j["grad_norm"] = grad_norm;
  if (loss_scale > 0) {
    j["loss_scale"] = loss_scale;
    j["skipped"] = skipped;
    j["skipped_steps"] = skipped_steps;
  }
  if (std::isfinite(eval_loss)) j["eval_loss"] = eval_loss;
  j["device_hit_rate"] = device_hit_rate;
  j["device_acquire_hit_rate"] = device_acquire_hit_rate;
  j["host_acquire_hit_rate"] = host_acquire_hit_rate;
  j["host_acquire_late_rate"] = host_acquire_late_rate;
  j["compute_dtype"] = compute_dtype;
  j["job_dtype"] = job_dtype;
  for (Link l : kLinks) j[std::string("bytes_") + LinkName(l)] = bytes[l];
  j["stall_s"] = stall_s;
  j["optimizer_wait_s"] = optimizer_wait_s;
  j["lane_fallbacks"] = lane_fallbacks;
  j["lane_yields"] = lane_yields;
  j["allocations_after_warmup"] = allocations_after_warmup;
  j["device_used_bytes"] = device_used_bytes;
  j["device_reserved_bytes"] = device_reserved_bytes;
  j["host_used_bytes"] = host_used_bytes;
  j["host_reserved_bytes"] = host_reserved_bytes;
  j["nvme_used_bytes"] = nvme_used_bytes;
  j["prefetches"] = prefetches;
  j["prefetches_deferred"] = prefetches_deferred;
  j["prefetches_declined"] = prefetches_declined;
  j["lane_busy_s"] = lanes.ToJson();
  j["bound_lane"] = StepLaneName(lanes.Largest());
  j["overlap_efficiency"] = overlap_efficiency;
  nlohmann::ordered_json ranks;  // {"field": [rank 0, rank 1, ...]}
  auto column = [&](const char* key, double RankFigures::*field) {
    nlohmann::json v = nlohmann::json::array();
    for (const RankFigures& r : per_rank) v.push_back(r.*field);
    ranks[key] = v;
  };
  column("step_time_s", &RankFigures::step_time_s);
  column("stall_s", &RankFigures::stall_s);
  for (Link l : kLinks) {
    nlohmann::json v = nlohmann::json::array();
    for (const RankFigures& r : per_rank) v.push_back(r.bytes[l]);
    ranks[std::string("bytes_") + LinkName(l)] = v;
  }
  column("host_used_bytes", &RankFigures::host_used_bytes);
  column("nvme_used_bytes", &RankFigures::nvme_used_bytes);
  column("peak_rss_bytes", &RankFigures::peak_rss_bytes);
  column("setup_peak_rss_bytes", &RankFigures::setup_peak_rss_bytes);
  for (int l = 0; l < kStepLanes; ++l) {
    nlohmann::json v = nlohmann::json::array();
    for (const RankFigures& r : per_rank) v.push_back(r.lanes.seconds[l]);
    ranks[std::string("busy_") + StepLaneName(StepLane(l)) + "_s"] = v;
  }
  j["per_rank"] = ranks;
  return j.dump();
}

}  // namespace tencache
