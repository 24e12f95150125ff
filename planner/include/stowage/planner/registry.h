// The device registry: folders of manifests, device lists such as "h200,h200,cpu", and what-if
// memory overrides.
//
// A registry is an ordered list of folders; every `<key>.json` file in them is a manifest known by
// its key (the file name without ".json", matched ASCII case-insensitively like ggml's
// ggml_backend_dev_by_name). Folders given with `--registry DIR` come first, so a user's manifest
// (for example one written by `list-devices --emit-manifest`) hides a shipped one of the same key;
// the shipped folder (planner/registry, installed to share/stowage/registry) comes last, after its
// llamacpp-2026/ subfolder when planning as llama.cpp 2026 (RegistrySearchDirs).
// Manifests are parsed when used, so a broken file only fails the lookups that need it.
//
// Device lists: comma-separated items, each a registry key or a path to a manifest file (an item
// containing '/' or ending in ".json"). Each item makes one device; "{index}" in its names becomes
// the number of earlier devices of the same backend in the list, as ggml numbers CUDA devices:
// "h200,h200,cpu" -> CUDA0, CUDA1, CPU. Device names must come out unique.
//
// Thread-safety: a Registry is immutable after Open; const methods may be called from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "stowage/planner/graph.h"
#include "stowage/planner/manifest.h"
#include "stowage/runtime/status.h"

namespace stowage::planner {

/// A what-if override of one device's free memory ("CUDA1=10GiB"). A device whose manifest reports
/// no memory (total 0, the registry's CPU) gets the same total, so that the fit check counts it.
struct MemoryOverride {
  std::string device;  ///< device name after instantiation ("CUDA1"), case-insensitive
  uint64_t free_bytes = 0;
};

/// Parses a byte size: an integer or decimal number with an optional unit: B, KiB, MiB, GiB, TiB
/// (powers of 1024; K, M, G, T are accepted as the same) or KB, MB, GB, TB (powers of 1000).
/// Examples: "512MiB", "1.5GiB", "80000000000". The result is rounded down to whole bytes.
/// Errors: kInvalidArgument "invalid size 'X' (expected a number with an optional unit such as
/// 512MiB or 40GiB)", or kOutOfRange when it does not fit in 64 bits.
Result<uint64_t> ParseByteSize(std::string_view text);

/// Parses "NAME=SIZE[,NAME=SIZE...]" (e.g. "CUDA0=40GiB,RPC[127.0.0.1:50053]=256MiB").
/// Errors: kInvalidArgument naming the bad item, also for a device named twice (case-insensitive:
/// "memory override 'cuda0=2GiB': device cuda0 is given a free memory twice (...)").
Result<std::vector<MemoryOverride>> ParseMemoryOverrides(std::string_view text);

/// The folder of manifests shipped with Stowage: `<exe dir>/../share/stowage/registry` when it
/// exists (installed tree), else the source tree's planner/registry baked in at build time.
/// `argv0` is the running program's argv[0] (may be null; then /proc/self/exe is used).
std::string ShippedRegistryDir(const char* argv0);

/// The folders a tool's registry searches, in order: `user_dirs` (--registry), then with
/// LlamacppCompat::k2026 the shipped folder's `llamacpp-2026/` (the CPU manifests cpu, cpu-avx2 and
/// cpu-avx512 whose CPU_REPACK takes llama.cpp 2026's types; every other key falls through to the
/// shipped folder), then `shipped` (ShippedRegistryDir).
std::vector<std::string> RegistrySearchDirs(const std::vector<std::string>& user_dirs,
                                            const std::string& shipped, LlamacppCompat compat);

class Registry {
 public:
  /// Scans `dirs` in order (earlier folders take precedence for equal keys). A folder that does not
  /// exist or cannot be read is an error (kNotFound / kIoError naming it); files other than *.json
  /// are ignored.
  static Result<Registry> Open(const std::vector<std::string>& dirs);

  /// Keys of every known manifest, sorted, lower-case as found on disk.
  std::vector<std::string> Names() const;

  /// Path of the manifest with this key (case-insensitive). Errors: kNotFound "unknown device
  /// 'x' (known: cpu-avx2, h200, ...)".
  Result<std::string> PathOf(std::string_view key) const;

  /// Loads one manifest by key or path (see the header comment); names still hold "{index}".
  Result<DeviceManifest> Load(std::string_view key_or_path) const;

  /// Makes the devices of a device list ("h200,h200,cpu"), in list order, with "{index}" expanded
  /// and `overrides` applied (free memory replaced; an override naming no device of the list or
  /// exceeding the device's total memory is an error; total 0 means "not reported" and accepts any
  /// free value). Errors: an empty list or item, lookup and parse errors of Load, kAlreadyExists for
  /// a duplicate device name ("device name 'CPU' appears twice in the device list
  /// 'cpu,cpu-avx512' (<file> and <file>)"),
  /// kInvalidArgument when two devices name the same buffer type differently (alignment, is_host,
  /// max_size; naming both devices and their files): buffer types are identified by name across
  /// devices (BLAS shares "CPU").
  Result<std::vector<DeviceManifest>> MakeDevices(std::string_view device_list,
                                                  const std::vector<MemoryOverride>& overrides = {}) const;

  /// The folders, in lookup order.
  const std::vector<std::string>& dirs() const { return dirs_; }

 private:
  struct Entry {
    std::string key;
    std::string path;
  };
  std::vector<std::string> dirs_;
  std::vector<Entry> entries_;  // first occurrence of each key, in folder order
};

/// kAlreadyExists when two of `devices` have the same name (ASCII case-insensitive, as ggml's
/// ggml_backend_dev_by_name), naming where each came from (its manifest file, or "probed on this
/// machine") and their types when they differ: "device name 'CPU' appears twice (cpu-as-gpu.json and
/// probed on this machine): device names must be unique (types GPU and CPU)". A tool that adds this
/// machine's probed CPU to a device list checks the whole list with it.
Status CheckUniqueDeviceNames(const std::vector<DeviceManifest>& devices);

/// Applies free-memory overrides to already-made devices (what MakeDevices does). Errors as there.
Status ApplyMemoryOverrides(std::vector<DeviceManifest>& devices,
                            const std::vector<MemoryOverride>& overrides);

}  // namespace stowage::planner
