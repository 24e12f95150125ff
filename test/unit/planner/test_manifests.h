// Small hand-written device manifests for the placement unit tests.
#pragma once

#include <string>

#include "stowage/planner/graph.h"
#include "stowage/planner/manifest.h"

namespace stowage::planner::testing {

/// A GPU-type device supporting every op, with one buffer type named like the device, `free_mib`
/// MiB free; optional host and split buffer types and an offload rule.
inline DeviceManifest Gpu(const std::string& name, uint64_t free_mib, const std::string& backend = "RPC",
                          bool host = false, bool split = false, bool offload = false) {
  std::string j =
      R"({"manifest_version": 1, "backend": ")" + backend + R"(", "name": ")" + name +
      R"(", "description": "test GPU", "type": "GPU", "memory": {"total": )" +
      std::to_string(free_mib << 20) + R"(, "free": )" + std::to_string(free_mib << 20) +
      R"(}, "caps": {"async": false, "host_buffer": )" + (host ? "true" : "false") +
      R"(, "buffer_from_host_ptr": false, "events": false}, "buffer_types": {"default": {"name": ")" + name +
      R"(", "alignment": 32, "is_host": false})";
  if (host) j += R"(, "host": {"name": ")" + name + R"(_Host", "alignment": 32, "is_host": true})";
  if (split) j += R"(, "split": {"name": ")" + name + R"(_Split", "alignment": 32, "is_host": false})";
  j += R"(}, "op_support": {"default": "supported", "rules": []})";
  if (offload) j += R"(, "offload_op": {"min_batch": 32})";
  j += "}";
  auto m = ParseManifest(j, name);
  if (!m.ok()) std::abort();
  return *m;
}

/// llama.cpp's CPU: every op, host CPU buffer type, CPU_REPACK taking Q4_0 MUL_MAT weights with
/// ne1 % 8 == 0 (when `repack`), refusing sources in non-host buffers.
inline DeviceManifest Cpu(bool repack = true) {
  std::string j =
      R"({"manifest_version": 1, "backend": "CPU", "name": "CPU", "description": "test CPU", "type": "CPU",
    "memory": {"total": 0, "free": 0},
    "caps": {"async": false, "host_buffer": false, "buffer_from_host_ptr": true, "events": false},
    "buffer_types": {"default": {"name": "CPU", "alignment": 32, "is_host": true})";
  if (repack)
    j += R"(, "extra": [{"name": "CPU_REPACK", "alignment": 32, "is_host": false, "supports_op": [
          {"ops": ["MUL_MAT"], "supported": true, "src": [
             {"types": ["q4_0"], "buft": "CPU_REPACK", "max_dims": 2, "ne_multiple_of": [1, 8]},
             {"types": ["f32"], "host": true}]}]}])";
  j += R"(}, "supports_buft": {"any_host": true},
    "op_support": {"default": "supported", "rules": [
      {"ops": ["NONE", "RESHAPE", "VIEW", "PERMUTE", "TRANSPOSE"], "supported": true},
      {"ops": "*", "all_srcs_host": false, "supported": false}]}})";
  auto m = ParseManifest(j, "cpu");
  if (!m.ok()) std::abort();
  return *m;
}

/// A BLAS-like ACCEL device sharing the CPU buffer type: MUL_MAT of contiguous host sources with
/// ne0, ne1, ne10 >= 32 and F32 src1; NONE/views on host buffers.
inline DeviceManifest Accel() {
  auto m =
      ParseManifest(R"({"manifest_version": 1, "backend": "BLAS", "name": "BLAS", "description": "test BLAS",
    "type": "ACCEL", "memory": {"total": 0, "free": 0},
    "caps": {"async": false, "host_buffer": false, "buffer_from_host_ptr": true, "events": false},
    "buffer_types": {"default": {"name": "CPU", "alignment": 32, "is_host": true}},
    "supports_buft": {"any_host": true},
    "op_support": {"default": "unsupported", "rules": [
      {"ops": ["NONE", "RESHAPE", "VIEW", "PERMUTE", "TRANSPOSE"], "all_srcs_host": true, "supported": true},
      {"ops": ["MUL_MAT"], "supported": true, "dst": {"min_ne": [32, 32]},
       "src": [{"contiguous": true, "host": true}, {"types": ["f32"], "contiguous": true, "host": true, "min_ne": [32]}]}]}})",
                    "blas");
  if (!m.ok()) std::abort();
  return *m;
}

/// An ACCEL device with its own weight-only buffer type (the shipped oneDNN manifest's shape):
/// ONEDNN (not host) for F32 MUL_MAT weights at any batch; reads every host buft.
inline DeviceManifest OneDnnLike() {
  auto m =
      ParseManifest(R"({"manifest_version": 1, "backend": "ONEDNN", "name": "ONEDNN", "description": "test",
    "type": "ACCEL", "memory": {"total": 0, "free": 0},
    "caps": {"async": false, "host_buffer": false, "buffer_from_host_ptr": false, "events": false},
    "buffer_types": {"default": {"name": "ONEDNN", "alignment": 64, "is_host": false}},
    "supports_buft": {"any_host": true},
    "op_support": {"default": "unsupported", "rules": [
      {"ops": ["NONE", "RESHAPE", "VIEW", "PERMUTE", "TRANSPOSE"], "all_srcs_host": true, "supported": true},
      {"ops": ["MUL_MAT"], "supported": true,
       "src": [{"types": ["f32"], "contiguous": true, "buft": "ONEDNN", "max_dims": 2}, {"types": ["f32"], "host": true}]}]}})",
                    "onednn");
  if (!m.ok()) std::abort();
  return *m;
}

}  // namespace stowage::planner::testing
