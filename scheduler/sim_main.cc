// tencache-sim: compare cache policies on a preset model or a recorded trace.
#include <iostream>
#include <string>
#include <vector>

#include "scheduler/sim_cli.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  return tencache::SimMain(args, std::cout, std::cerr);
}
