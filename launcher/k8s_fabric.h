// K8sFabric: what a worker pod asks for so that NCCL crosses nodes over the
// instance type's fabric (the catalog's FabricSpec): extended resources
// (requests = limits) and environment, on a job of more than one node. One
// node needs none (NCCL stays inside it), and an instance type with no fabric
// gets none; either way the comment says which and why. Pure; thread-safe.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "launcher/catalog.h"

namespace tencache {

struct FabricRequest {
  std::vector<std::pair<std::string, int>> resources;
  std::vector<std::pair<std::string, std::string>> env;
  std::string comment;  // for the rendered pod: what is requested and why, or why nothing is
};

// REQUIRES: nodes >= 1.
FabricRequest FabricFor(const InstanceSpec& instance, int nodes);

}  // namespace tencache
