// The internal state of a Session (session.h) and the steps that build and run it, one concept per
// file: session.cpp (creation and the public API), session_load.cpp (backends, buffers, weight
// upload), session_batch.cpp (a batch of tokens over several sequences: checks, ubatches, rollback),
// session_kv.cpp (the KV cache's cells and the sequence operations), session_ubatch.cpp (binding
// and input filling of one ubatch), session_splits.cpp (split execution: input copies, node calls,
// queue synchronization), session_profile.cpp (the op profile). Private to the executor.
#pragma once

#include <algorithm>
#include <bitset>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "../plan/plan_graph.h"
#include "backend.h"
#include "ops.h"
#include "stowage/runtime/gguf.h"
#include "stowage/runtime/gguf_attn_temperature.h"
#include "stowage/runtime/plan.h"
#include "stowage/runtime/session.h"

namespace stowage {

namespace exec {
class RemoteBackend;
}

class Session::Impl {
 public:
  std::unique_ptr<PlanFile> plan;
  /// The model, mapped once: shared with the caller when it passed its GgufFile (Create overloads).
  std::shared_ptr<const GgufFile> gguf;
  std::vector<std::unique_ptr<exec::Backend>> backends;
  std::vector<std::unique_ptr<exec::Buffer>> buffers;
  std::vector<int> buffer_backend;  // backend that owns each buffer
  std::vector<bool> buffer_mapped;  // read-only ranges of the GGUF mapping
  std::vector<BufferReport> reports;
  /// The plan's graphs as PlanFile::Verify decoded and checked them: [0] = pp, [1] = tg.
  const std::vector<plan_graph::Graph>& graphs() const { return plan->graphs().graphs; }
  /// What tensors bind against: planned buffer sizes, the buffers' bases, weights / KV cache as
  /// uploaded (data, layout).
  plan_graph::Memory mem;
  int64_t n_ctx = 0, n_ubatch = 0, n_vocab = 0;
  /// ContextParams.n_seq_max, and the sequence ids a batch may use: [0, n_seq_ids) = 256
  /// (LLAMA_MAX_SEQ) with a unified KV cache, n_seq_max otherwise (llama.cpp 2026
  /// llama_batch_allocr::init's bound), 1 for a SWA ring or a recurrent state (one sequence).
  int64_t n_seq_max = 1, n_seq_ids = 1;

  // The KV cache's cells (session_kv.cpp), llama.cpp's llama_kv_cells: the position each of the
  // n_ctx cells holds (-1: empty) and the sequences that share it. Every layer's K/V cache (the
  // base cache of an interleaved-SWA model) uses the same cells; a SWA ring has its own
  // (swa_cell_pos, below) and, like a recurrent state, one sequence only (n_seq_ids 1).
  using SeqSet = std::bitset<kMaxSequences>;
  std::vector<int32_t> cell_pos;
  std::vector<SeqSet> cell_seq;
  int64_t cells_used = 0;
  /// The first of `n` contiguous empty cells (llama.cpp Feb 2025 llama_kv_cache_find_slot: the
  /// graphs store a ubatch's K/V in one view from kv_head on), searched from cell 0; -1 when none.
  int64_t FindSlot(int64_t n) const;
  /// One past the last cell in use (0 when empty): the cells a ubatch's n_kv must cover.
  int64_t CellsEnd() const;
  /// Largest / smallest position of `seq` in the cache, -1 when it has none
  /// (llama_memory_seq_pos_max / _min).
  int32_t SeqPosMax(int32_t seq) const;
  int32_t SeqPosMin(int32_t seq) const;
  /// Stores a ubatch's tokens in the cells from `slot` on.
  void StoreCells(int64_t slot, const int32_t* pos, const int32_t* seq, int64_t n);
  /// Empties every cell (and the SWA ring).
  void ClearCells();
  int64_t kv_pad = 32;  ///< llama_kv_cache_get_padding: 256 with flash attention, else 32
  /// SessionOptions::llamacpp_numerics: n_kv as llama.cpp 2026 (at least 256 cells, padded to 256).
  bool pad_n_kv_to_256 = false;
  /// A decode failed after a recurrent model's state was (partly) updated: Decode refuses until Reset.
  bool recurrent_state_lost = false;
  std::vector<float> unwanted_logits;  ///< Decode's logits when the caller passes nullptr
  int64_t n_swa = 0;                   // sliding window of KQ_mask_swa (<arch>.attention.sliding_window)
  AttnTemperature attn_temp;           // the factors of inp_attn_scale (mistral3's temperature tuning)
  /// The SWA cache of an interleaved sliding-window model (ContextParams.n_ctx_swa cells; 0: none),
  /// a ring: the token at position p is stored in cell p % n_ctx_swa (kv_head_swa), and
  /// swa_cell_pos[c] is the position cell c holds (-1: empty).
  int64_t n_ctx_swa = 0;
  std::vector<int64_t> swa_cell_pos;
  double load_seconds = 0;
  std::vector<plan_graph::Bound> bound;  // scratch per call

  // Embeddings (session_embd.cpp; SessionOptions::embeddings): the tensor "result_norm" of each
  // graph (-1: none), its width, and what the last decode produced.
  bool embeddings = false;
  PoolingType pooling = PoolingType::kNone;
  std::vector<int> result_norm;
  int64_t n_embd = 0;
  std::vector<float> embd;                   ///< per token (kNone), batch order
  std::vector<std::vector<float>> embd_seq;  ///< pooled, by sequence id (empty: none)
  std::vector<float> embd_rows;              ///< scratch: result_norm rows of the running batch
  /// Finds result_norm in every graph and its width (Init).
  void FindResultNorm();
  /// Appends the rows of result_norm of graph `g` (bound for `s`) to embd_rows: refused when a
  /// later node of the graph reuses its memory (the plan's allocator freed it after the lm_head).
  Status ReadEmbeddingRows(const plan_graph::Graph& g, int64_t n_outputs);
  /// Drops the embeddings of the last decode.
  void ClearEmbeddings();
  /// A per-sequence state (SaveSeqState / LoadSeqState) needs cells that hold one position of any
  /// sequences: kUnimplemented naming `fn` for a recurrent state or a SWA cache.
  Status CheckSeqStatePlan(const char* fn) const;

  // Op profile (SessionOptions::profile_ops, session_profile.cpp): rows, and per graph the row of
  // each tensor (-1: not yet looked up).
  bool profile = false;
  std::vector<OpProfileEntry> prof_rows;
  std::vector<std::vector<int>> prof_slot;
  /// The row of (graph, backend, op), added with no calls when it is new.
  int ProfRow(const std::string& graph, const std::string& backend, const std::string& op);
  /// Counts one call of row `row` that started at `t0`.
  void ProfAdd(int row, std::chrono::steady_clock::time_point t0);

  // Creation (session.cpp, session_load.cpp).
  static Result<std::unique_ptr<Session>> Finish(std::unique_ptr<Impl> impl,
                                                 std::shared_ptr<const GgufFile> model,
                                                 const SessionOptions& opts,
                                                 std::chrono::steady_clock::time_point t0);
  Status Init(const SessionOptions& opts);
  Status CreateBackends(const SessionOptions& opts);
  Status AllocateBuffers(const SessionOptions& opts);
  Status LoadWeights(const SessionOptions& opts);
  /// The weight groups (GlobalTensor.parts) after LoadWeights placed their parts.
  Status LoadWeightGroups();

  /// A batch as the session runs it (session_batch.cpp): one array per field of BatchToken.
  struct BatchArrays {
    std::vector<int32_t> tokens, pos, seq;
    std::vector<uint8_t> logits;
  };
  /// Runs a checked batch (CheckBatch) in ubatches of n_ubatch tokens, the logits of the tokens
  /// that ask for them into `out` (one row each, in batch order); restores the cells on failure.
  Status DecodeChecked(const BatchArrays& b, std::vector<float>* out);
  Status CheckBatch(const BatchArrays& b) const;
  /// Runs a checked batch as DecodeChecked with every token an output, keeps the embeddings and
  /// returns the logits rows `b` asks for.
  Status DecodeWithEmbeddings(const BatchArrays& b, std::vector<float>* out);

  /// One ubatch: `n` tokens with their positions and sequences, and the indices (within the
  /// ubatch, increasing) of the tokens whose logits the graph returns. Never empty: a ubatch whose
  /// tokens ask for no logits computes its last token's (`discard`: into scratch).
  struct Ubatch {
    const int32_t* tokens = nullptr;
    const int32_t* pos = nullptr;
    const int32_t* seq = nullptr;
    int64_t n = 0;
    std::vector<int32_t> out_ids;
    bool discard = false;
  };
  /// Tokens [begin, end) of `b`, whose `logits` flags say which rows are returned.
  static Ubatch MakeUbatch(const BatchArrays& b, int64_t begin, int64_t end);
  /// Tokens [begin, end) of `u`, with u's output rows among them.
  static Ubatch SubUbatch(const Ubatch& u, int64_t begin, int64_t end);

  // One ubatch (session_ubatch.cpp): bind graph pp or tg for it, fill its inputs, run its splits,
  // read its logits into `out` (u.out_ids.size() rows; scratch when u.discard).
  Status RunUbatch(const Ubatch& u, float* out);
  Status RunUbatchOn(const plan_graph::Graph& g, const Ubatch& u, float* out);
  /// The symbol values of ubatch `u` stored from cell `slot` on, on graph `g`.
  plan_graph::Bindings UbatchBindings(const plan_graph::Graph& g, const Ubatch& u, int64_t slot) const;
  /// n_kv for `used` cells in use of a cache of `cells` cells: padded as llama.cpp pads it
  /// (kv_pad, or llama.cpp 2026's at least 256 with pad_n_kv_to_256), at most `cells`.
  int64_t PaddedKv(int64_t used, int64_t cells) const;
  /// Writes the graph inputs of ubatch `u` bound at `s` (tokens, positions, masks, recurrent state
  /// inputs, output ids); its cells are stored already.
  Status FillInputs(const plan_graph::Graph& g, const plan_graph::Bindings& s, const Ubatch& u);
  Status WriteInput(int id, const void* data, uint64_t n);  ///< graph tensor `id` (bound), when >= 0
  Status BindAll(const plan_graph::Graph& g, const plan_graph::Bindings& s) {
    return plan_graph::BindAll(g, s, mem, plan->path(), &bound);
  }

  // Split execution (session_splits.cpp).
  Status RunSplits(const plan_graph::Graph& g);
  Status CopyTensor(const plan_graph::Graph& g, int src, int dst);
  Status WaitHostWrites();
  Status WaitHostReads();
  Status SyncAll();
  // Asynchronous split execution (RunSplits): queued copies the host must wait for before it
  // touches host memory again, and host staging kept alive until every queue has drained.
  std::vector<std::shared_ptr<exec::Event>> host_reads;   // async writes whose source is host memory
  std::vector<std::shared_ptr<exec::Event>> host_writes;  // async reads whose target is host memory
  std::vector<std::vector<uint8_t>> stages;
  cpu::ComputeContext copy_ctx;  // host-side copies (split inputs)

  // Plans across hosts (session_mpi.cpp, stowage/runtime/transport.h): another host's device has a
  // placeholder backend; its splits are skipped here, the split inputs between hosts sent and
  // received, tagged with the number of graph runs so far.
  uint64_t graph_runs = 0;
  /// The placeholder of backend `backend` when another host runs it, else nullptr.
  const exec::RemoteBackend* RemoteOf(int backend) const;
  /// The bytes of split input (src -> dst) when it crosses hosts: kUnimplemented unless both are
  /// contiguous, of one type and size.
  Result<uint64_t> CrossHostBytes(const plan_graph::Graph& g, int src, int dst) const;
  /// Sends the inputs of split `split` (another host's) that this host produced.
  Status SendSplitInputs(const plan_graph::Graph& g, size_t split);
  /// Receives input `input` of split `split` (this host's) from the host that produced it.
  Status RecvSplitInput(const plan_graph::Graph& g, size_t split, size_t input);

  // A tensor split across MPI ranks (session_tensor_split.cpp): this rank's plan and the transport
  // its ALL_REDUCE nodes sum through.
  std::shared_ptr<Transport> tp_transport;
  /// For a plan of several tensor-split ranks: checks opts.tensor_split_transport (present, of the
  /// plan's rank count) and makes `plan` this rank's (nested in the file for ranks >= 1). Errors:
  /// kFailedPrecondition naming the plan and what to run; those of PlanFile::FromBytes.
  Status SelectTensorSplitRank(const SessionOptions& opts);
  /// Sums node `id` (an ALL_REDUCE, F32, contiguous, in place over its source) over the ranks:
  /// rank 0 receives every other rank's values, adds them in rank order and sends the sum back, so
  /// every rank holds the same bits. `node` tags the messages.
  Status AllReduce(const plan_graph::Graph& g, int id, uint32_t node);
  /// Reads weight `i`'s slice (Plan GlobalTensor.slice) from the file into `out`.
  Status ReadWeightSlice(size_t i, std::vector<uint8_t>* out) const;

  /// True when some weights are read in place from the file mapping (the plan's mapped buffers).
  bool ReadsMapping() const {
    return std::find(buffer_mapped.begin(), buffer_mapped.end(), true) != buffer_mapped.end();
  }
};

}  // namespace stowage
