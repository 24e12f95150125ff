// A test-only backend whose buffers are private: is_host() is false, so the CPU backend may not
// touch them and the executor must move data in and out through Buffer::Write/Read (split-input
// copies, weight uploads, inputs, logits). It runs the CPU kernels on its own memory, so plans
// placed on "GPU" devices (manifests of RPC-like devices) execute on a machine without a GPU and
// exercise real copies.
#pragma once

#include <memory>
#include <string>

#include "backend.h"

namespace stowage::test {

/// Factory answering for every planned device whose type is "GPU".
std::shared_ptr<exec::BackendFactory> MakePrivateBackendFactory();

}  // namespace stowage::test
