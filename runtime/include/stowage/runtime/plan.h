// Loading and verifying a plan file (schema: runtime/schema/plan.fbs, compatibility rules in
// runtime/schema/COMPATIBILITY.md).
//
// Load() checks the file's size and identifier ("STWP") from its first bytes before reading it,
// then PlanFile::Verify runs every check the runtime makes before it creates backends and
// allocates (one verifier for plan-dump, plan-dump --check-memory / --seal and Session): the
// flatbuffers verifier, the schema version and (from version 2) the content checksum, so that a
// flipped bit anywhere is refused rather than computed with; every cross reference (device, buffer,
// tensor and backend indices in range; tensors inside their buffers; node and split ranges valid;
// required fields present); the graphs, decoded once into the form the executor runs (graphs():
// sources, views, graph inputs, worst cases against the context, every source defined before it is
// read); every graph tensor bound at its graph's worst case (dimensions and sizes without
// overflow, view offsets and strides, the bytes it spans inside the planned size of its buffer,
// element alignment); the result shapes of the simple ops; and no two tensors sharing buffer bytes
// while live (CheckComputeMemory).
// Every failure is a kDataLoss Status with one line naming the file and the field.
//
// What needs the model file is CheckPlanAgainstModel (identity, weights, sliding window); what
// needs the machine (the planned devices present, memory to allocate) only a Session can check.
//
// Thread-safety: a PlanFile is immutable after loading.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "stowage/runtime/ggml_ops.h"
#include "stowage/runtime/status.h"

namespace stowage {
namespace plan {
struct Plan;
}
namespace plan_graph {  // internal to the runtime (src/plan/plan_graph.h)
struct Graphs;
struct Memory;
}  // namespace plan_graph
class GgufFile;

/// Highest plan schema version this runtime reads: 6 (version 2 added the required
/// Plan.content_xxh64 checksum, version 3 the SWA cache of interleaved sliding-window models,
/// version 4 the attention sinks and SWIGLU_OAI of gpt-oss, version 5 several sequences,
/// ContextParams.n_seq_max > 1, version 6 the tensor split across MPI ranks; COMPATIBILITY.md). Writers set
/// the lowest version a plan needs (PlanSchemaVersionFor), so that plans without these features stay readable
/// by older runtimes.
inline constexpr uint32_t kPlanSchemaVersion = 6;
inline constexpr uint32_t kPlanSchemaVersionBase = 2;
inline constexpr uint32_t kPlanSchemaVersionSwa = 3;
inline constexpr uint32_t kPlanSchemaVersionSinks = 4;
inline constexpr uint32_t kPlanSchemaVersionSeqs = 5;
/// A tensor split across MPI ranks (Plan.tp_n_ranks > 1: ALL_REDUCE nodes, weights' slices, the
/// other ranks' plans nested in rank 0's; plan-model --cluster -sm tensor).
inline constexpr uint32_t kPlanSchemaVersionTensorSplit = 6;
/// Most sequences a plan may keep (ContextParams.n_seq_max) and sequence ids a unified KV cache
/// accepts: llama.cpp 2026's LLAMA_MAX_SEQ.
inline constexpr uint32_t kMaxSequences = 256;

/// True when a graph node needs schema version kPlanSchemaVersionSinks: SWIGLU_OAI, SOFT_MAX with
/// sinks (src 2 present, ggml_soft_max_add_sinks) or FLASH_ATTN_EXT with sinks (src 4 present,
/// ggml_flash_attn_ext_add_sinks). `srcs` are the node's graph tensor ids, -1 for an absent optional
/// source (plan.fbs GraphTensor.srcs). A runtime before version 4 would run such a SOFT_MAX or
/// FLASH_ATTN_EXT without its sinks, silently.
bool NeedsSinksSchema(GgmlOp op, const int32_t* srcs, size_t n_srcs);

/// The schema version a writer sets on a plan: kPlanSchemaVersionSeqs for several sequences
/// (ContextParams.n_seq_max > 1), else kPlanSchemaVersionSinks when a node needs it
/// (NeedsSinksSchema), else kPlanSchemaVersionSwa with a SWA cache (ContextParams.n_ctx_swa > 0),
/// else kPlanSchemaVersionBase.
inline uint32_t PlanSchemaVersionFor(bool swa_cache, bool sinks, bool several_seqs = false) {
  return several_seqs ? kPlanSchemaVersionSeqs
         : sinks      ? kPlanSchemaVersionSinks
         : swa_cache  ? kPlanSchemaVersionSwa
                      : kPlanSchemaVersionBase;
}

/// Seals a finished plan buffer (flatbuffers, file identifier "STWP") in place: stores in
/// Plan.content_xxh64 the XXH64 (seed 0) of all `size` bytes with that field's 8 bytes taken as
/// zero. The field must be present in the buffer (a writer sets it to any non-zero placeholder
/// before packing, since flatbuffers leaves out scalars equal to their default). Errors:
/// kInvalidArgument when the buffer fails the flatbuffers verifier or lacks the field.
Status SealPlan(uint8_t* data, size_t size);

/// Largest plan file (bytes) the loader reads: 1 GiB. Plans are a few MiB (a 70B model's graphs,
/// tensors and explain records); the flatbuffers verifier cannot read past 2 GiB anyway, and a
/// file this large is refused before it is read.
inline constexpr uint64_t kMaxPlanFileSize = uint64_t(1) << 30;

/// The bytes of the plan file at `path`, read as PlanFile::Load reads them (ReadRegularFileBytes,
/// read_file.h): a regular file only, of at most kMaxPlanFileSize bytes, whose first 8 bytes carry
/// the file identifier "STWP" at byte 4; both are checked before the rest is read (a large file
/// that is not a plan costs one small read). Nothing else is verified. Errors: kInvalidArgument
/// (empty path); ReadRegularFile's, with "a plan file written by plan-model" as what the file should
/// be (kIoError "<path>: cannot open: <OS error>", "<path>: not a regular file (a folder), expected
/// a plan file written by plan-model", the same for a device, FIFO or socket -- never blocks on a
/// FIFO --, a read error; kResourceExhausted for a file that grows past the limit while it is read);
/// kDataLoss naming the path and the field ("file size", "header" for fewer than 8 bytes, "file
/// identifier") with what was expected and found.
Result<std::vector<uint8_t>> ReadPlanBytes(const std::string& path);

/// Largest buffer alignment (bytes) a plan may record, and so a device manifest may declare:
/// 64 KiB (ggml backends ask for 32 to 4096; a page is the most any allocator needs).
inline constexpr uint64_t kMaxBufferAlignment = 65536;

/// Which of PlanFile::Verify's checks run.
enum class PlanChecks {
  kAll,             ///< every check (what Session and plan-dump accept)
  kAllButOverlaps,  ///< all but the last, CheckComputeMemory: for plan-dump --check-memory, which
                    ///< lists every overlap instead of the first
};

class PlanFile {
 public:
  /// Reads (ReadPlanBytes) and verifies `path` (see the top of this file). Errors: those of
  /// ReadPlanBytes, kDataLoss (corrupted, truncated, wrong identifier, inconsistent),
  /// kUnimplemented (newer schema version).
  static Result<std::unique_ptr<PlanFile>> Load(const std::string& path,
                                                PlanChecks checks = PlanChecks::kAll);
  /// Verifies a plan held in memory (moved in). `name` is used in messages.
  static Result<std::unique_ptr<PlanFile>> FromBytes(std::vector<uint8_t> bytes, std::string name,
                                                     PlanChecks checks = PlanChecks::kAll);

  ~PlanFile();

  /// The verified root table (generated accessors of plan_generated.h).
  const plan::Plan& root() const { return *root_; }
  /// The context and graphs as Verify decoded and checked them: what a Session runs (the runtime's
  /// internal form, src/plan/plan_graph.h; decoded once, at load).
  const plan_graph::Graphs& graphs() const { return *graphs_; }
  /// The buffers and weight / KV cache tensors as Verify bound the graphs against them (planned
  /// sizes, no data): what a Session binds against once it has allocated and uploaded.
  const plan_graph::Memory& planned_memory() const { return *memory_; }
  const std::string& path() const { return path_; }
  size_t size() const { return bytes_.size(); }

 private:
  PlanFile();
  Status Verify(PlanChecks checks);
  Status VerifyStructure();

  std::string path_;
  std::vector<uint8_t> bytes_;
  const plan::Plan* root_ = nullptr;
  std::unique_ptr<const plan_graph::Graphs> graphs_;  ///< set by Verify
  std::unique_ptr<const plan_graph::Memory> memory_;  ///< set by Verify
};

/// The result of CheckComputeMemory.
struct MemoryCheckReport {
  int tensors_checked = 0;             ///< memory-owning compute tensors, all graphs
  std::vector<std::string> conflicts;  ///< one line each: graph, buffer, the two tensors, bytes, lifetimes
};

/// An independent check of a verified plan's buffer offsets (plan-dump --check-memory, and
/// PlanFile::Verify at every load): no two weights / KV cache tensors (Plan.tensors) share a byte
/// of an allocated (not mapped) buffer unless they are the same weight's file data (KV cache
/// tensors never), no two graph tensors live at the same time share a byte of a buffer, and no
/// graph tensor shares a byte with a weight or KV cache tensor (live throughout).
///
/// It re-derives liveness from the plan file alone (not from the planner's memory pass), with
/// ggml-alloc's rules as the planner documents them (memory_plan.h; ggml-alloc.c
/// ggml_gallocr_alloc_graph_impl, ggml-backend.cpp ggml_backend_sched_split_graph, FEB25):
///   time 2*i+1 is node i (ggml graph order, Graph.nodes); time 2*b is the start of the split whose
///   first node is b, when its input copies are made (before node b runs);
///   born:  graph leafs and tensors of kind Input at the start (-1); a split input copy at its
///          split's start (with Plan.n_copies > 1 every instance of a graph input or split input is
///          allocated first, at -1); a node at 2*i+1;
///   dies:  at its last read: a node reading a tensor or any view of it (Graph.tensors srcs, views
///          resolved to the tensor that owns the memory), a split copying it (2*b); never when no
///          node reads it (ggml frees only sources: a graph output stays) or, with n_copies > 1,
///          when it is an instance of a graph input or split input (ggml flags them INPUT|OUTPUT);
///   allowed sharing: a node written in place over its first source when that read is the
///          source's last (ggml_gallocr's in-place reuse).
/// The graph tensors checked are those that own memory in an allocated buffer of any usage: not
/// views (view_src) and not weights / KV cache (global). Sizes are the contiguous bytes with each
/// dimension at its largest over the values a session binds (n_tokens 1..max_tokens, n_kv
/// 1..max_kv, kv_head 0..n_ctx-1, n_outputs 1..max_outputs; with a SWA cache n_kv_swa
/// 1..max_kv_swa, kv_head_swa 0..n_ctx_swa-1): the graph's worst case, as the planner sizes them,
/// for the dimensions it writes.
/// At most `max_conflicts` lines are collected (the count of the rest is appended as a last line).
/// Never fails otherwise: tensors whose size cannot be computed are reported as conflicts.
/// With `overlaps_only`, tensors whose size cannot be computed or that leave their buffer are
/// skipped instead of reported (PlanFile::Verify's binding names those more precisely, before this runs).
MemoryCheckReport CheckComputeMemory(const PlanFile& plan, size_t max_conflicts = 20,
                                     bool overlaps_only = false);

/// Checks a verified plan against the model file it is to run with (Session::Create runs it before
/// creating backends; plan-dump -m MODEL too): the model identity (file size, header size and
/// header XXH64 as recorded in Plan.model; ComputeModelIdentity), the context's n_layer and n_embd
/// against the model's <arch>.block_count and <arch>.embedding_length, mapped buffers inside the file,
/// every weight present with the planned type, shape and data offset (and a mapped weight's buffer
/// offset pointing at that data), and, when a graph reads KQ_mask_swa, the model's sliding window
/// (GgufSlidingWindow, gguf_sliding_window.h: the planner's reading), stored in *n_swa (0 when
/// no graph reads it; n_swa may be null), and that a SWA ring smaller than the context
/// (ContextParams.n_ctx_swa < n_ctx) holds that window plus a ubatch (the session overwrites its
/// oldest cells). Errors: kFailedPrecondition naming the model (another model, a weight missing or
/// different), kDataLoss naming the plan (a mapped range or offset that does not fit the file, no
/// sliding window, a ring below the window + n_ubatch), the GGUF getters' errors.
Status CheckPlanAgainstModel(const PlanFile& plan, const GgufFile& gguf, uint32_t* n_swa = nullptr);

}  // namespace stowage
