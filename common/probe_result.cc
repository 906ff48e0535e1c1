#include "common/probe_result.h"

namespace tencache {

nlohmann::ordered_json ProbeResult::ToJson() const {
  nlohmann::ordered_json j;
  j["dtype"] = dtype;
  j["threads"] = threads;
  j["ranks"] = ranks;
  j["embed_s"] = embed_s;
  j["layer_s"] = layer_s;
  j["head_s"] = head_s;
  j["compute_page_faults"] = compute_page_faults;
  j["matmul_tflops"] = matmul_tflops;
  j["matmul_fp32_tflops"] = matmul_fp32_tflops;
  j["adamw_params_per_s"] = adamw_params_per_s;
  j["copy_gbps"] = copy_gbps;
  j["checksum_gbps"] = checksum_gbps;
  j["allgather_gbps"] = allgather_gbps;
  j["reduce_scatter_gbps"] = reduce_scatter_gbps;
  j["collective_latency_s"] = collective_latency_s;
  j["reference_step_s"] = reference_step_s;
  j["reference_layers"] = reference_layers;
  return j;
}

StatusOr<ProbeResult> ProbeResult::FromJson(const nlohmann::json& j) {
  ProbeResult r;
  try {
    r.dtype = j.at("dtype").get<std::string>();
    r.threads = j.at("threads").get<int>();
    r.ranks = j.at("ranks").get<int>();
    r.embed_s = j.at("embed_s").get<double>();
    r.layer_s = j.at("layer_s").get<double>();
    r.head_s = j.at("head_s").get<double>();
    r.compute_page_faults = j.value("compute_page_faults", 0.0);  // absent from earlier probes' caches
    r.matmul_tflops = j.at("matmul_tflops").get<double>();
    r.matmul_fp32_tflops = j.at("matmul_fp32_tflops").get<double>();
    r.adamw_params_per_s = j.at("adamw_params_per_s").get<double>();
    r.copy_gbps = j.at("copy_gbps").get<double>();
    r.checksum_gbps = j.at("checksum_gbps").get<double>();  // required: a cache without it is probed again
    r.allgather_gbps = j.at("allgather_gbps").get<double>();
    r.reduce_scatter_gbps = j.at("reduce_scatter_gbps").get<double>();
    r.collective_latency_s = j.at("collective_latency_s").get<double>();
    r.reference_step_s = j.at("reference_step_s").get<double>();
    r.reference_layers = j.value("reference_layers", 0);
  } catch (const nlohmann::json::exception& e) {
    return Status::InvalidArgument(std::string("probe result: ") + e.what());
  }
  return r;
}

}  // namespace tencache
