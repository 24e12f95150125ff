// The smallest CPU-only consumer of the runtime: opens a plan for a model with Session::Create and
// reports the status. test/size/CMakeLists.txt strips a copy of it and checks its size against a
// budget, so that what a CPU-only program pays for linking the runtime stays visible.
#include <cstdio>
#include <memory>

#include "stowage/runtime/session.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: runtime_size_probe PLAN MODEL\n");
    return 2;
  }
  auto session = stowage::Session::Create(argv[1], argv[2]);
  if (!session.ok()) {
    std::fprintf(stderr, "%s\n", session.status().ToString().c_str());
    return 1;
  }
  return 0;
}
