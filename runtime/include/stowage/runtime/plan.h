// Loading and verifying a plan file (schema: runtime/schema/plan.fbs, compatibility rules in
// runtime/schema/COMPATIBILITY.md).
//
// Load() reads the whole file, runs the flatbuffers verifier, checks the file identifier ("STWP")
// and schema version, then checks every cross reference (device, buffer, tensor and backend indices
// in range; tensors inside their buffers; node and split ranges valid; required fields present).
// Every failure is a kDataLoss Status with one line naming the file and the field.
//
// Thread-safety: a PlanFile is immutable after loading.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "stowage/runtime/status.h"

namespace stowage {
namespace plan {
struct Plan;
}

/// Highest plan schema version this runtime reads.
inline constexpr uint32_t kPlanSchemaVersion = 1;

/// Largest buffer alignment (bytes) a plan may record, and so a device manifest may declare:
/// 64 KiB (ggml backends ask for 32 to 4096; a page is the most any allocator needs).
inline constexpr uint64_t kMaxBufferAlignment = 65536;

class PlanFile {
 public:
  /// Reads and verifies `path`. Errors: kIoError (cannot read), kDataLoss (corrupted, truncated,
  /// wrong identifier, inconsistent), kUnimplemented (newer schema version).
  static Result<std::unique_ptr<PlanFile>> Load(const std::string& path);
  /// Verifies a plan held in memory (copied). `name` is used in messages.
  static Result<std::unique_ptr<PlanFile>> FromBytes(std::vector<uint8_t> bytes, std::string name);

  /// The verified root table (generated accessors of plan_generated.h).
  const plan::Plan& root() const { return *root_; }
  const std::string& path() const { return path_; }
  size_t size() const { return bytes_.size(); }

 private:
  PlanFile() = default;
  Status Verify();

  std::string path_;
  std::vector<uint8_t> bytes_;
  const plan::Plan* root_ = nullptr;
};

}  // namespace stowage
