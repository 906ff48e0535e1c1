#include "launcher/k8s_fabric.h"

namespace tencache {

FabricRequest FabricFor(const InstanceSpec& inst, int nodes) {
  FabricRequest r;
  const FabricSpec& f = inst.fabric;
  if (f.name.empty()) {
    r.comment = "fabric: none; the catalog records no fabric for " + inst.type +
                ", so NCCL crosses nodes over TCP sockets on the pod network";
    return r;
  }
  if (f.none()) {
    r.comment = "fabric: none for " + inst.type + ": " + f.note + " (" + f.source + ")";
    return r;
  }
  if (nodes <= 1) {
    r.comment = "fabric: " + f.name + " not requested: one node, NCCL stays inside it";
    return r;
  }
  r.resources = f.resources;
  r.env = f.env;
  std::string what;
  for (const auto& [name, count] : f.resources) what += (what.empty() ? "" : ", ") + name + " x" + std::to_string(count);
  r.comment = "fabric: " + f.name + " (" + what + ") for NCCL between " + inst.type + " nodes, as the plan prices its " +
              (inst.network_gbps >= 1 ? std::to_string(int(inst.network_gbps)) : std::string("<1")) +
              " Gb/s; " + f.note + " (" + f.source + ")";
  return r;
}

}  // namespace tencache
