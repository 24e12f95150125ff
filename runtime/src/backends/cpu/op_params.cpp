// Parameter checks of the CPU kernels that the plan verifier makes too, before anything runs
// (plan_graph.cpp CheckNodes): kept apart from the kernels so the verifier links without them
// (scripts/fuzz.sh builds it alone).
#include <string>

#include "ops.h"

namespace stowage::cpu {

Status CheckRopeParams(const RopeParams& p, int64_t ne0) {
  if (p.mode != 0 && p.mode != 2)
    return InvalidArgument("ROPE: mode " + std::to_string(p.mode) +
                           " is not supported (0 = normal, 2 = NEOX)");
  return CheckRopeDims(p, ne0);
}

}  // namespace stowage::cpu
