// A Session executes a plan: it loads and verifies the plan, checks that the GGUF file is the one
// the plan was made for, instantiates the planned backends, allocates every buffer with exactly the
// planned size (mapping the file where the plan says so), uploads weights, keeps the KV cache, and
// evaluates token batches split by split (DESIGN.md "Runtime").
//
// Sequences: Decode appends tokens to sequence 0 at position n_past(); DecodeBatch takes tokens of
// several sequences with their positions (llama_decode of a llama_batch), and SeqRm / SeqCp /
// Reset edit the KV cache (llama_memory_seq_rm / seq_cp / clear). The plan says how many
// sequences (plan-model -np, -kvu): with a unified KV cache (-kvu) the sequences share the plan's
// n_ctx cells and a token attends only to the cells of its own sequence (llama.cpp 2026
// llama_kv_cache::set_input_kq_mask).
// Thread-safety: a Session is not thread-safe; use one per thread. Memory: all memory is owned by
// the session and released by its destructor. Weights the plan keeps in CPU_Mapped are read from
// a shared mapping of the model file for the session's whole life (as llama.cpp's mmap): the file
// must not be rewritten or truncated meanwhile. Decode checks it first (GgufFile::CheckUnchanged:
// an error naming the file), but a truncation during a decode makes the read fault with SIGBUS,
// which only the process can turn into a message (stowage-run does, tools/common/mapped_file_guard.h);
// plan with `plan-model --no-mmap` to copy every weight at load instead.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "stowage/runtime/status.h"

namespace stowage {
class GgufFile;
class Transport;
namespace exec {
class BackendFactory;
}

/// The thread counts a Session accepts (SessionOptions::n_threads): 0 (all hardware threads) up to
/// 4x the hardware threads. Errors (kInvalidArgument): "<subject> N is outside [0, 4*hw] (0 = all
/// hw hardware threads; at most 4x oversubscription)", `subject` naming the value ("n_threads" in
/// Session::Create; a tool checking its list before the first Session opens names its option).
Status CheckThreadCount(int n_threads, const std::string& subject = "n_threads");

/// Instruction-set levels of the CPU backend's kernels (the values of cpu::IsaLevel), each including
/// the ones below: kScalar the portable reference code, kAvx2 AVX2 + FMA + F16C (llama.cpp's
/// `haswell` CPU variant; Zen 3), kAvx512 AVX-512 F/BW/VL/DQ without VNNI (`skylakex`; Skylake-X),
/// kAvx512Vnni with AVX512-VNNI's integer dots (`icelake` / `zen4`; Cascade Lake and later Intel,
/// Zen 4/5). A cap below the CPU's level runs that level's code on this CPU: one machine stands in
/// for the others.
enum class CpuIsa : int { kScalar = 0, kAvx2 = 1, kAvx512 = 2, kAvx512Vnni = 3 };

/// How Session embeddings are pooled per sequence (llama.cpp llama_pooling_type, same values; its
/// RANK, a classifier head, is not supported). kNone: one embedding per token; kMean: the mean of a
/// sequence's token embeddings; kCls: the embedding of its token of the smallest position; kLast:
/// of its token of the largest position (llama.cpp 2026 llm_graph_input_mean / llm_graph_input_cls
/// ::set_input).
enum class PoolingType : int { kNone = 0, kMean = 1, kCls = 2, kLast = 3 };

struct SessionOptions {
  int n_threads =
      0;  ///< CPU threads; 0 = all hardware threads; more than 4x the hardware threads is an error
  /// Called while weights are uploaded, with the fraction done (0..1]; may be empty.
  std::function<void(float)> progress;
  /// Backends for planned devices this runtime does not build in (tests); may be empty.
  std::shared_ptr<exec::BackendFactory> backend_factory;
  /// A plan split by tensors across MPI ranks (Plan.tp_n_ranks > 1, plan-model --cluster -sm
  /// tensor) runs rank transport->rank()'s part (its plan nested in the file for ranks >= 1) and
  /// sums its ALL_REDUCE nodes through it (stowage/runtime/transport.h); required for such a plan,
  /// with size() the plan's rank count.
  std::shared_ptr<Transport> tensor_split_transport;
  /// Mapped weight buffers (the plan's CPU_Mapped: weights used in place from the file mapping, as
  /// llama.cpp's mmap) are never copied unless this is set. When set, their 2 MiB-aligned interior
  /// is copied at load into anonymous transparent huge pages at the same addresses (skipped when
  /// THP is off or the copy would take more than half of MemAvailable): token generation then
  /// streams the weights with far fewer TLB misses (0.85B Q4_K_M, 1 thread: 31 -> 18 ms of CPU per
  /// token on the dev machine) at the cost of the copy and of memory no longer shared through the
  /// page cache. stowage-run: --huge-pages.
  bool copy_mapped_weights_to_huge_pages = false;
  /// Times every node, split input copy and ubatch on the host clock (Session::OpProfile); costs
  /// two clock reads per node. stowage-run: bench --profile.
  bool profile_ops = false;
  /// CPU matrix products sum in the orders of llama.cpp's CPU backend in prompt processing too
  /// (cpu::ComputeContext::llamacpp_numerics), and n_kv follows llama.cpp 2026 (at least 256 cells,
  /// padded to 256), so that logits and greedy text stay bit-identical to llama.cpp's over long
  /// prompts instead of drifting apart after one rounding flip: every logit of a 240-token prompt
  /// and 32 greedy tokens equals llama.cpp 2026's (its zen4 CPU variant on an AVX-512 VNNI machine,
  /// its haswell variant with cpu_max_isa = kAvx2) for the eleven shared models and six synthetic
  /// mixture-of-experts models of test/data/golden-exact (F32, F16, Q8_0, Q4_0, Q4_K_M, Q6_K, IQ4_XS,
  /// mixtral, qwen2moe...; the default mode differs
  /// from position ~20 for Q8_0/Q4_0, whose GEMM kernels keep one float per output). For
  /// most weight types that order is the token-generation one, so the products are then
  /// batch-invariant (any ubatch split gives the same bits), as in llama.cpp; where llama.cpp
  /// itself is not (repacked Q4_K, IQ4_XS from 8 columns, IQ4_NL, F32/F16 with K % 16 == 0) its
  /// orders are followed.
  /// Costs prompt-processing speed (figures in README.md, "Agreement with llama.cpp").
  /// stowage-run: --llamacpp-numerics.
  bool llamacpp_numerics = false;
  /// The highest level the CPU kernels may use; the CPU's own best level when that is lower (never an
  /// error). With llamacpp_numerics and kAvx2 an AVX-512 machine reproduces what llama.cpp's haswell
  /// variant computes (test/data/golden-exact/haswell). stowage-run: --cpu-isa.
  CpuIsa cpu_max_isa = CpuIsa::kAvx512Vnni;
  /// Keep embeddings (llama_context_params.embeddings): the output of the model's final norm
  /// ("result_norm", llama.cpp's t_embd) for every token of each decode, pooled per `pooling`
  /// (Session::Embeddings, Session::SeqEmbeddings). Costs the logits of every token (llama.cpp
  /// 2026 llama_context::decode's output_all: every token is an output while embeddings are on).
  /// Session::SetEmbeddings changes both later.
  bool embeddings = false;
  PoolingType pooling = PoolingType::kNone;
};

/// One row of Session::OpProfile: host wall time of one kind of work in one graph ("pp" or "tg"),
/// summed over the calls since the session was created or ResetOpProfile.
struct OpProfileEntry {
  std::string graph;    ///< "pp" / "tg" (the plan's graph names)
  std::string backend;  ///< "CPU", "CUDA0", ...; empty for session-level rows
  /// The ggml op name ("RMS_NORM"), with the weight type for matrix products ("MUL_MAT q4_0"), or
  /// one of the session-level rows: "(split input copies)", "(sync)" (waiting for queued work at
  /// the end of a ubatch), "(ubatch)" (whole ubatches: calls = ubatches run, seconds = their wall
  /// time, which includes every other row plus binding, inputs and logits).
  std::string op;
  uint64_t calls = 0;
  double seconds = 0;  ///< host wall time; for asynchronous backends (CUDA) the time to queue
};

/// One buffer as planned and as allocated (bytes).
/// One token of Session::DecodeBatch: llama_batch's per-token fields, with one sequence per token
/// (llama_batch.seq_id[i][0]; SeqCp shares cells between sequences instead).
struct BatchToken {
  int32_t token = 0;
  int32_t pos = 0;      ///< position in its sequence (RoPE, causal mask), >= 0
  int32_t seq_id = 0;   ///< its sequence, in [0, Session::n_seq_ids())
  bool logits = false;  ///< return its logits (llama_batch.logits[i])
};

struct BufferReport {
  std::string name;   ///< "CPU_Mapped", "CPU_REPACK", "CPU", "CUDA0"
  std::string usage;  ///< "model", "KV", "compute", "output"
  std::string device;
  uint64_t planned = 0;
  uint64_t allocated = 0;
  bool mapped = false;
};

class Session {
 public:
  /// Opens `plan_path` for `model_path`. Errors: those of PlanFile::Load and GgufFile::Open;
  /// kFailedPrecondition when the model's identity differs from the plan's ("... was planned for a
  /// file of N bytes with header hash H, found ..."); kUnavailable when a planned device is absent;
  /// kResourceExhausted when a buffer cannot be allocated.
  static Result<std::unique_ptr<Session>> Create(const std::string& plan_path, const std::string& model_path,
                                                 const SessionOptions& opts = {});
  /// Same, with the plan already in memory (e.g. planned on the fly).
  static Result<std::unique_ptr<Session>> CreateFromPlanBytes(std::vector<uint8_t> plan_bytes,
                                                              const std::string& model_path,
                                                              const SessionOptions& opts = {});
  /// Both, for a model the caller has opened (GgufFile::Open): the session shares its mapping
  /// instead of mapping the file again, so a tool that also reads the model (tokenizer, planning on
  /// the fly) maps it once — a file of N bytes then needs N bytes of address space, not 2N or 3N
  /// (ulimit -v). The GgufFile lives as long as its last owner. Errors: as above (kInvalidArgument
  /// for a null `model`).
  static Result<std::unique_ptr<Session>> Create(const std::string& plan_path,
                                                 std::shared_ptr<const GgufFile> model,
                                                 const SessionOptions& opts = {});
  static Result<std::unique_ptr<Session>> CreateFromPlanBytes(std::vector<uint8_t> plan_bytes,
                                                              std::shared_ptr<const GgufFile> model,
                                                              const SessionOptions& opts = {});
  ~Session();

  /// Evaluates `tokens` of sequence 0 at positions n_past() .. n_past()+n-1, in ubatches of the
  /// plan's n_ubatch (DecodeBatch of those tokens).
  /// When `all_logits`, `logits` receives n * n_vocab floats (row i = logits after token i);
  /// otherwise n_vocab floats for the last token; `logits` may be nullptr (the tokens are only
  /// added to the cache, like a llama_batch without outputs). Errors: kInvalidArgument (empty
  /// batch, token id out of range), kOutOfRange (the context would exceed n_ctx: "context full"),
  /// kDataLoss when weights are read in place and the model file shrank or was rewritten since it
  /// was opened (GgufFile::CheckUnchanged: "<file>: changed or truncated while in use ..."), and
  /// kernel errors (named "graph G node 'N'"). On error n_past() is as before the call; a
  /// transformer's KV cache needs nothing more, but a recurrent model's state (Mamba) was updated
  /// in place by the ubatches that ran and cannot be rolled back, so every later Decode fails with
  /// kFailedPrecondition until Reset().
  Status Decode(const std::vector<int32_t>& tokens, bool all_logits, std::vector<float>* logits);

  /// Evaluates a batch of tokens of one or more sequences (llama.cpp's llama_decode): the tokens are
  /// split in ubatches of the plan's n_ubatch in batch order, each stored in n contiguous empty
  /// cells of the KV cache (the first such run from cell 0: the graphs write a ubatch's K/V into
  /// one view from kv_head on). A token attends to the cells of its own sequence at positions up to
  /// its own (llama.cpp 2026 llama_kv_cache::set_input_kq_mask), so interleaved sequences compute
  /// what each would alone, up to the summation order over the cells (softmax sums and V products
  /// run over the cells of all sequences, masked ones adding zeros in other SIMD lanes).
  /// `logits` receives n_vocab floats per token with `logits` set, in batch order (resized; may be
  /// nullptr). Rules, as llama.cpp 2026 llama_batch_allocr::init checks them: seq_id in
  /// [0, n_seq_ids()), the tokens of one sequence at consecutive positions (any order within the
  /// batch), the first at SeqPosMax(seq_id) + 1 when the sequence is in the cache; a plan with an
  /// SWA ring or a recurrent state keeps one sequence (n_seq_ids() 1) whose tokens come in position
  /// order. Errors: kInvalidArgument (empty batch, token id, seq_id or position out of range,
  /// positions not consecutive), kOutOfRange ("context full": fewer empty cells than tokens;
  /// "KV cache full": no run of a ubatch's length among them), kFailedPrecondition (a recurrent state lost,
  /// see Decode), kDataLoss and kernel errors as Decode. On error the cache is as before the call.
  /// Thread-safety: as every other call, one thread at a time.
  Status DecodeBatch(const std::vector<BatchToken>& batch, std::vector<float>* logits);

  /// Removes sequence `seq_id`'s tokens at positions [p0, p1) from the KV cache (p0 < 0: from 0;
  /// p1 < 0: to the end); seq_id < 0 removes every sequence's (llama_memory_seq_rm). A cell shared
  /// with another sequence (SeqCp) stays for that one. Errors: kInvalidArgument (seq_id >=
  /// n_seq_ids()); kFailedPrecondition when the plan cannot drop part of a sequence: a recurrent
  /// state (only the whole sequence; llama.cpp returns false there), or a SWA ring whose cells kept
  /// for [p0, p1) were overwritten (only a tail p1 < 0 whose last position lies within
  /// n_ctx_swa - n_swa of p0); the cache is unchanged then.
  Status SeqRm(int32_t seq_id, int32_t p0, int32_t p1);
  /// Makes sequence `dst` share sequence `src`'s cells at positions [p0, p1) (negative: open
  /// bounds), as llama_memory_seq_cp does in a unified cache: no K/V is copied, later tokens of
  /// either sequence attend to them. Errors: kInvalidArgument (an id outside [0, n_seq_ids()));
  /// nothing to do when src == dst.
  Status SeqCp(int32_t src, int32_t dst, int32_t p0, int32_t p1);
  /// Largest / smallest position of `seq_id` in the KV cache, -1 when it has none or the id is
  /// outside [0, n_seq_ids()) (llama_memory_seq_pos_max / _min).
  int32_t SeqPosMax(int32_t seq_id) const;
  int32_t SeqPosMin(int32_t seq_id) const;
  /// The plan's n_seq_max (plan-model -np), and the sequence ids DecodeBatch accepts: 256
  /// (LLAMA_MAX_SEQ) with a unified KV cache, else n_seq_max (1 with a SWA ring or a recurrent
  /// state).
  int64_t n_seq_max() const;
  int64_t n_seq_ids() const;

  /// Turns embeddings on or off for the following decodes and sets their pooling (llama_set_embeddings
  /// with llama_context_params.pooling_type; see SessionOptions::embeddings). While on, every token
  /// of a batch is computed as an output (its logits row too: llama.cpp 2026's output_all), but
  /// Decode / DecodeBatch still return only the logits rows they were asked for. Errors:
  /// kInvalidArgument (a pooling value outside PoolingType); kUnimplemented when the plan's graphs
  /// have no tensor "result_norm" to read (an architecture without llama.cpp's final norm output).
  /// Nothing changes on error. Embeddings of earlier decodes are dropped.
  Status SetEmbeddings(bool enabled, PoolingType pooling);
  /// The settings of SessionOptions::embeddings / pooling or the last SetEmbeddings.
  bool embeddings() const;
  PoolingType pooling() const;
  /// The width of an embedding: the model's n_embd (ne0 of result_norm), floats.
  int64_t n_embd() const;
  /// Per-token embeddings of the last successful decode (pooling kNone; empty otherwise, and when
  /// embeddings are off): n_embd floats per token of the batch, in batch order (every token: all
  /// are outputs), as llama_get_embeddings. Valid until the next decode, Reset, SetEmbeddings.
  const std::vector<float>& Embeddings() const;
  /// The pooled embedding of sequence `seq_id` (n_embd floats) from the last successful decode
  /// (pooling kMean / kCls / kLast), as llama_get_embeddings_seq; nullptr when that decode had no
  /// token of the sequence, pooling is kNone or embeddings are off. Pooled over the sequence's
  /// tokens in that decode's batch (llama.cpp pools per ubatch and keeps the last ubatch's: the
  /// same when a sequence's tokens fit one ubatch, as llama.cpp requires of embedding models);
  /// mean = sum in batch order times 1/count. Valid until the next decode, Reset, SetEmbeddings.
  const float* SeqEmbeddings(int32_t seq_id) const;

  /// Writes the session's state to `path`, atomically (AtomicFile: a complete file or none), as
  /// llama_state_save_file keeps a context's memory: every sequence's KV cache cells (position and
  /// sequences of each cell, the SWA ring's positions) and the bytes of every KV buffer of the plan
  /// (a recurrent model's state included), whole: the file is as large as the plan's KV buffers
  /// plus 36 bytes per cell. Layout (little-endian): "STWSTATE", u32 format version (1), the
  /// model's identity (u64 file size, header size, header XXH64; model_identity.h), i64 n_ctx,
  /// n_ctx_swa, n_seq_ids, u32 KV buffer count and u64 size of each, per cell i32 position and 32
  /// bytes of sequence bits, per SWA cell i64 position, u8 recurrent state lost, the buffers' bytes,
  /// and a u64 XXH64 of all that precedes it. Logits and embeddings are not saved. Errors: kIoError
  /// (the write, naming `path`), a backend's read error.
  Status SaveState(const std::string& path) const;
  /// Restores a state SaveState wrote for the same model (identity) and a plan of the same context
  /// and KV buffers: decoding afterwards gives what the saving session gave next, bit for bit.
  /// Errors, one line "<path>: offset N: expected ..., found ..." (the session is unchanged):
  /// kDataLoss (not a state file: magic; another format version; a truncated or longer file; a
  /// checksum mismatch), kFailedPrecondition (another model's identity, another n_ctx / n_ctx_swa /
  /// n_seq_ids / KV buffer layout), and ReadRegularFileBytes' errors (kIoError: missing, not a
  /// regular file). The last decode's embeddings are dropped.
  Status LoadState(const std::string& path);
  /// Writes sequence `seq_id`'s part of the KV cache to `path` (llama_state_seq_save_file): its
  /// positions and, for each KV cache tensor of the plan, the bytes of its cells (a transposed V
  /// cache's elements gathered per cell). Layout (little-endian): "STWSEQST", u32 version (1), the
  /// model identity (3 u64), u32 KV tensor count, per tensor u64 bytes per cell and u8 transposed,
  /// u32 cell count, i32 position per cell (increasing), the cells' bytes tensor by tensor, u64
  /// XXH64 of all that precedes. Errors: kInvalidArgument (seq_id outside [0, n_seq_ids())),
  /// kUnimplemented (a recurrent state or a SWA cache: SaveState only), kIoError (the write).
  Status SaveSeqState(int32_t seq_id, const std::string& path) const;
  /// Replaces sequence `dest_seq_id` with the one SaveSeqState wrote (for the same model and a plan
  /// of the same KV tensors; any n_ctx that has room): its cells are freed, and the saved ones stored
  /// in the first empty cells (llama_state_seq_load_file). Decoding then gives that sequence what the
  /// saving session gave it, up to the summation order over other cells (bit for bit when the cells
  /// land where they were, as in a fresh session). Errors, one line naming the file and offset where
  /// it has one: kInvalidArgument (dest_seq_id out of range), kUnimplemented (as SaveSeqState),
  /// kDataLoss (magic, version, size, checksum, positions not increasing), kFailedPrecondition
  /// (another model, other KV tensors), kOutOfRange (too few empty cells); the cache is unchanged then.
  Status LoadSeqState(int32_t dest_seq_id, const std::string& path);

  /// Clears the KV cache of every sequence (n_past() = 0) and a recurrent model's state
  /// (llama_memory_clear).
  void Reset();
  /// SeqPosMax(0) + 1: where Decode appends.
  int64_t n_past() const;
  int64_t n_ctx() const;
  int64_t n_vocab() const;
  /// Every buffer, planned vs allocated bytes ("planned == allocated" is a test invariant).
  std::vector<BufferReport> Buffers() const;
  /// Seconds spent in Create (plan verification, mapping, uploads).
  double load_seconds() const;
  /// The op profile (SessionOptions::profile_ops; empty when off), largest time first within each
  /// graph.
  std::vector<OpProfileEntry> OpProfile() const;
  /// Starts the op profile afresh (e.g. after a warm-up run).
  void ResetOpProfile();

  class Impl;

 private:
  explicit Session(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace stowage
