// The session's state in a file (Session::SaveState / LoadState, session.h has the layout): the KV
// cache's cells and the bytes of the plan's KV buffers, behind the model's identity.
#include <algorithm>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "session_impl.h"
#include "stowage/plan/plan_generated.h"
#include "stowage/runtime/atomic_file.h"
#include "stowage/runtime/model_identity.h"
#include "stowage/runtime/read_file.h"

namespace stowage {
namespace {

constexpr char kMagic[8] = {'S', 'T', 'W', 'S', 'T', 'A', 'T', 'E'};
constexpr uint32_t kVersion = 1;
constexpr size_t kSeqBytes = kMaxSequences / 8;

// The plan's KV cache buffers (BufferUsage::KvCache), in plan order.
std::vector<size_t> KvBuffers(const PlanFile& plan) {
  std::vector<size_t> kv;
  const auto* bufs = plan.root().buffers();
  for (size_t i = 0; i < bufs->size(); ++i)
    if (bufs->Get(static_cast<flatbuffers::uoffset_t>(i))->usage() == plan::BufferUsage::KvCache)
      kv.push_back(i);
  return kv;
}

template <typename T>
void Put(std::vector<uint8_t>& out, T v) {
  const size_t at = out.size();
  out.resize(at + sizeof v);
  std::memcpy(out.data() + at, &v, sizeof v);
}

// Reads fields from the state file, naming the offset of the first one that does not match.
struct Reader {
  const uint8_t* b;
  const std::string& path;
  size_t at = 0;
  template <typename T>
  T Get() {
    T v{};
    std::memcpy(&v, b + at, sizeof v);
    at += sizeof v;
    return v;
  }
  Status Expect(StatusCode code, const std::string& what, int64_t want, int64_t found, size_t off) const {
    return Status(code, path + ": offset " + std::to_string(off) + ": " + what + ": expected " +
                            std::to_string(want) + ", found " + std::to_string(found));
  }
};

// The bytes of the state file `path` (magic "STWSTATE" or "STWSEQST", `what` for messages), at
// most `max_bytes`, checked from its first `head_bytes` before the rest is read: magic, format
// version, the model identity at offset 12 against `gguf`'s, then `check_header` (when the file
// has head_bytes; may be empty). A state of another model or plan says so whatever its size.
Result<std::vector<uint8_t>> ReadStateFile(const std::string& path, const char* magic, const char* what,
                                           uint64_t max_bytes, const GgufFile& gguf, size_t head_bytes,
                                           const std::function<Status(Reader&)>& check_header) {
  constexpr size_t kHead = sizeof kMagic + 4;
  const ModelIdentity id = ComputeModelIdentity(gguf);
  ReadRegularFileOptions opt;
  opt.max_bytes = max_bytes;
  opt.what = what;
  opt.head_bytes = head_bytes;
  opt.check_head = [&](const uint8_t* h, size_t n, uint64_t) -> Status {
    if (n < sizeof kMagic || std::memcmp(h, magic, sizeof kMagic) != 0)
      return DataLoss(path + ": offset 0: expected the magic \"" + std::string(magic, sizeof kMagic) +
                      "\" of " + what + ", found " +
                      (n < sizeof kMagic ? std::to_string(n) + " bytes" : "other bytes"));
    uint32_t v = 0;
    if (n >= kHead) std::memcpy(&v, h + sizeof kMagic, 4);
    if (n < kHead || v != kVersion)
      return DataLoss(path + ": offset 8: format version: expected " + std::to_string(kVersion) + ", found " +
                      (n < kHead ? std::string("the end of the file") : std::to_string(v)));
    if (n < kHead + 24) return Status::Ok();  // the size check names the truncation
    Reader r{h, path, kHead};
    const uint64_t fsize = r.Get<uint64_t>(), hsize = r.Get<uint64_t>(), hash = r.Get<uint64_t>();
    if (fsize != id.file_size || hsize != id.header_size || hash != id.header_xxh64)
      return FailedPrecondition(path + ": offset 12: model identity: expected " + gguf.path() + "'s (" +
                                std::to_string(id.file_size) + " bytes, header hash " +
                                HashHex(id.header_xxh64) + "), found a state of a model of " +
                                std::to_string(fsize) + " bytes, header hash " + HashHex(hash));
    return n >= head_bytes && check_header ? check_header(r) : Status::Ok();
  };
  return ReadRegularFileBytes(path, opt);
}

// The file's size (`expected`; `what_for` in the message), then its last 8 bytes: the XXH64 of
// the others.
Status CheckSizeAndSum(const std::vector<uint8_t>& b, const std::string& path, uint64_t expected,
                       const std::string& what_for) {
  if (b.size() != expected)
    return DataLoss(path + ": offset " + std::to_string(std::min<uint64_t>(b.size(), expected)) +
                    ": size: expected " + std::to_string(expected) + " bytes " + what_for + ", found " +
                    std::to_string(b.size()) + (b.size() < expected ? " (truncated)" : ""));
  uint64_t sum = 0;
  std::memcpy(&sum, b.data() + b.size() - 8, 8);
  const uint64_t want = Xxh64(b.data(), b.size() - 8);
  if (sum != want)
    return DataLoss(path + ": offset " + std::to_string(b.size() - 8) + ": checksum: expected " +
                    HashHex(want) + ", found " + HashHex(sum));
  return Status::Ok();
}

}  // namespace

Status Session::SaveState(const std::string& path) const {
  const Impl& s = *impl_;
  const ModelIdentity id = ComputeModelIdentity(*s.gguf);
  const std::vector<size_t> kv = KvBuffers(*s.plan);
  std::vector<uint8_t> out(kMagic, kMagic + sizeof kMagic);
  Put(out, kVersion);
  Put(out, id.file_size);
  Put(out, id.header_size);
  Put(out, id.header_xxh64);
  Put(out, s.n_ctx);
  Put(out, s.n_ctx_swa);
  Put(out, s.n_seq_ids);
  Put(out, static_cast<uint32_t>(kv.size()));
  for (const size_t i : kv) Put(out, s.reports[i].planned);
  for (size_t j = 0; j < s.cell_pos.size(); ++j) {
    Put(out, s.cell_pos[j]);
    for (size_t k = 0; k < kSeqBytes; ++k) {
      uint8_t byte = 0;
      for (size_t bit = 0; bit < 8; ++bit) byte |= static_cast<uint8_t>(s.cell_seq[j][k * 8 + bit]) << bit;
      out.push_back(byte);
    }
  }
  for (const int64_t p : s.swa_cell_pos) Put(out, p);
  out.push_back(s.recurrent_state_lost ? 1 : 0);
  for (const size_t i : kv) {
    const size_t at = out.size();
    out.resize(at + s.reports[i].planned);
    STOWAGE_RETURN_IF_ERROR(s.buffers[i]->Read(0, out.data() + at, s.reports[i].planned));
  }
  Put(out, Xxh64(out.data(), out.size()));
  return WriteFileAtomic(path, out);
}

Status Session::LoadState(const std::string& path) {
  Impl& s = *impl_;
  const std::vector<size_t> kv = KvBuffers(*s.plan);
  uint64_t kv_bytes = 0;
  for (const size_t i : kv) kv_bytes += s.reports[i].planned;
  // The size this session's state has: the header, the cells, the buffers and the checksum.
  const size_t head = sizeof kMagic + 4 + 3 * 8 + 3 * 8 + 4 + 8 * kv.size();
  const uint64_t size =
      head + s.cell_pos.size() * (4 + kSeqBytes) + s.swa_cell_pos.size() * 8 + 1 + kv_bytes + 8;
  // The context and KV buffers of the saving plan, checked before the file is read.
  auto header = [&](Reader& r) -> Status {
    struct Field {
      const char* name;
      int64_t want;
    };
    for (const Field f :
         {Field{"n_ctx", s.n_ctx}, Field{"n_ctx_swa", s.n_ctx_swa}, Field{"n_seq_ids", s.n_seq_ids}}) {
      const size_t off = r.at;
      const auto v = r.Get<int64_t>();
      if (v != f.want) return r.Expect(StatusCode::kFailedPrecondition, f.name, f.want, v, off);
    }
    const size_t off = r.at;
    const auto n = r.Get<uint32_t>();
    if (n != kv.size()) return r.Expect(StatusCode::kFailedPrecondition, "KV buffers", kv.size(), n, off);
    for (const size_t i : kv) {
      const size_t at = r.at;
      const auto v = r.Get<uint64_t>();
      if (v != s.reports[i].planned)
        return r.Expect(StatusCode::kFailedPrecondition, "bytes of KV buffer '" + s.reports[i].name + "'",
                        static_cast<int64_t>(s.reports[i].planned), static_cast<int64_t>(v), at);
    }
    return Status::Ok();
  };
  STOWAGE_ASSIGN_OR_RETURN(
      std::vector<uint8_t> b,
      ReadStateFile(path, kMagic, "a session state file (Session::SaveState, stowage_state_save_file)", size,
                    *s.gguf, head, header));
  STOWAGE_RETURN_IF_ERROR(CheckSizeAndSum(b, path, size, "for this plan's state"));
  Reader r{b.data(), path, head};
  // Checked: decode into copies, then commit.
  std::vector<int32_t> pos(s.cell_pos.size());
  std::vector<Impl::SeqSet> seq(s.cell_seq.size());
  int64_t used = 0;
  for (size_t j = 0; j < pos.size(); ++j) {
    const size_t off = r.at;
    pos[j] = r.Get<int32_t>();
    for (size_t k = 0; k < kSeqBytes; ++k) {
      const uint8_t byte = b[r.at++];
      for (size_t bit = 0; bit < 8; ++bit) seq[j][k * 8 + bit] = (byte >> bit) & 1;
    }
    if (pos[j] < -1 || (pos[j] >= 0) == seq[j].none() || (seq[j] >> static_cast<size_t>(s.n_seq_ids)).any())
      return DataLoss(path + ": offset " + std::to_string(off) + ": cell " + std::to_string(j) +
                      ": expected position -1 with no sequence or a position >= 0 of sequences below " +
                      std::to_string(s.n_seq_ids) + ", found position " + std::to_string(pos[j]) + " with " +
                      std::to_string(seq[j].count()) + " sequences");
    used += pos[j] >= 0 ? 1 : 0;
  }
  std::vector<int64_t> swa(s.swa_cell_pos.size());
  for (int64_t& p : swa) p = r.Get<int64_t>();
  const bool lost = b[r.at++] != 0;
  for (const size_t i : kv) {
    STOWAGE_RETURN_IF_ERROR(s.buffers[i]->Write(0, b.data() + r.at, s.reports[i].planned));
    r.at += s.reports[i].planned;
  }
  s.cell_pos = std::move(pos);
  s.cell_seq = std::move(seq);
  s.cells_used = used;
  s.swa_cell_pos = std::move(swa);
  s.recurrent_state_lost = lost;
  s.ClearEmbeddings();
  return Status::Ok();
}

namespace {

constexpr char kSeqMagic[8] = {'S', 'T', 'W', 'S', 'E', 'Q', 'S', 'T'};

// A KV cache tensor of the plan as the per-sequence state reads it: where its bytes are, the bytes
// of one cell, and whether it is llama.cpp's transposed V cache (v_trans: without flash attention
// element j of cell c is at (j * n_ctx + c), one element of `elem` bytes each).
struct KvTensor {
  size_t buffer = 0;
  uint64_t offset = 0, nbytes = 0, cell_bytes = 0, elem = 0;
  bool transposed = false;
};

Result<std::vector<KvTensor>> KvTensors(const PlanFile& plan, int64_t n_ctx) {
  std::vector<KvTensor> out;
  const auto* ts = plan.root().tensors();
  const bool fa = plan.root().context()->flash_attn();
  for (flatbuffers::uoffset_t i = 0; ts != nullptr && i < ts->size(); ++i) {
    const auto* t = ts->Get(i);
    if (t->kind() != plan::TensorKind::KvCache) continue;
    KvTensor k;
    k.buffer = static_cast<size_t>(t->buffer());
    k.offset = t->offset();
    k.nbytes = t->nbytes();
    k.cell_bytes = k.nbytes / static_cast<uint64_t>(n_ctx);
    const std::string name = t->name() ? t->name()->str() : "";
    k.transposed = !fa && name.rfind("cache_v_l", 0) == 0;
    const int64_t width = t->ne() && t->ne()->size() > 0 ? t->ne()->Get(0) / n_ctx : 0;
    k.elem = width > 0 ? k.cell_bytes / static_cast<uint64_t>(width) : 0;
    if (k.nbytes % static_cast<uint64_t>(n_ctx) != 0 || (k.transposed && k.elem * width != k.cell_bytes))
      return Internal(plan.path() + ": KV tensor '" + name + "' of " + std::to_string(k.nbytes) +
                      " bytes is not " + std::to_string(n_ctx) + " cells of whole elements");
    out.push_back(k);
  }
  return out;
}

// Gathers (or scatters, `to_cells`) the bytes of cell `c` of `t` between the tensor's bytes `all`
// and `cell` (t.cell_bytes bytes).
void CellBytes(const KvTensor& t, int64_t n_ctx, std::vector<uint8_t>& all, size_t c, uint8_t* cell,
               bool to_cells) {
  if (!t.transposed) {
    uint8_t* at = all.data() + c * t.cell_bytes;
    to_cells ? std::memcpy(at, cell, t.cell_bytes) : std::memcpy(cell, at, t.cell_bytes);
    return;
  }
  const uint64_t width = t.cell_bytes / t.elem;
  for (uint64_t j = 0; j < width; ++j) {
    uint8_t* at = all.data() + (j * static_cast<uint64_t>(n_ctx) + c) * t.elem;
    to_cells ? std::memcpy(at, cell + j * t.elem, t.elem) : std::memcpy(cell + j * t.elem, at, t.elem);
  }
}

}  // namespace

Status Session::Impl::CheckSeqStatePlan(const char* fn) const {
  bool recurrent = false;
  for (const plan_graph::Graph& g : graphs()) recurrent = recurrent || g.recurrent();
  if (recurrent || n_ctx_swa > 0)
    return Unimplemented(std::string(fn) + ": " + plan->path() +
                         " keeps a recurrent state or a SWA cache: save the whole state (SaveState) instead");
  return Status::Ok();
}

Status Session::SaveSeqState(int32_t seq_id, const std::string& path) const {
  const Impl& s = *impl_;
  STOWAGE_RETURN_IF_ERROR(s.CheckSeqStatePlan("SaveSeqState"));
  if (seq_id < 0 || seq_id >= s.n_seq_ids)
    return InvalidArgument("SaveSeqState: seq_id " + std::to_string(seq_id) + " outside [0, " +
                           std::to_string(s.n_seq_ids) + ")");
  STOWAGE_ASSIGN_OR_RETURN(const std::vector<KvTensor> kv, KvTensors(*s.plan, s.n_ctx));
  std::vector<size_t> cells;  // the sequence's cells, by position
  for (size_t j = 0; j < s.cell_pos.size(); ++j)
    if (s.cell_pos[j] >= 0 && s.cell_seq[j][static_cast<size_t>(seq_id)]) cells.push_back(j);
  std::sort(cells.begin(), cells.end(), [&](size_t a, size_t b) { return s.cell_pos[a] < s.cell_pos[b]; });
  const ModelIdentity id = ComputeModelIdentity(*s.gguf);
  std::vector<uint8_t> out(kSeqMagic, kSeqMagic + sizeof kSeqMagic);
  Put(out, kVersion);
  Put(out, id.file_size);
  Put(out, id.header_size);
  Put(out, id.header_xxh64);
  Put(out, static_cast<uint32_t>(kv.size()));
  for (const KvTensor& t : kv) {
    Put(out, t.cell_bytes);
    out.push_back(t.transposed ? 1 : 0);
  }
  Put(out, static_cast<uint32_t>(cells.size()));
  for (const size_t c : cells) Put(out, s.cell_pos[c]);
  std::vector<uint8_t> all;
  for (const KvTensor& t : kv) {
    all.resize(t.nbytes);
    STOWAGE_RETURN_IF_ERROR(s.buffers[t.buffer]->Read(t.offset, all.data(), t.nbytes));
    for (const size_t c : cells) {
      const size_t at = out.size();
      out.resize(at + t.cell_bytes);
      CellBytes(t, s.n_ctx, all, c, out.data() + at, /*to_cells=*/false);
    }
  }
  Put(out, Xxh64(out.data(), out.size()));
  return WriteFileAtomic(path, out);
}

Status Session::LoadSeqState(int32_t dest_seq_id, const std::string& path) {
  Impl& s = *impl_;
  STOWAGE_RETURN_IF_ERROR(s.CheckSeqStatePlan("LoadSeqState"));
  if (dest_seq_id < 0 || dest_seq_id >= s.n_seq_ids)
    return InvalidArgument("LoadSeqState: dest_seq_id " + std::to_string(dest_seq_id) + " outside [0, " +
                           std::to_string(s.n_seq_ids) + ")");
  STOWAGE_ASSIGN_OR_RETURN(const std::vector<KvTensor> kv, KvTensors(*s.plan, s.n_ctx));
  uint64_t cell_bytes = 0;
  for (const KvTensor& t : kv) cell_bytes += t.cell_bytes;
  const size_t head = sizeof kSeqMagic + 4 + 3 * 8 + 4 + 9 * kv.size() + 4;
  STOWAGE_ASSIGN_OR_RETURN(
      std::vector<uint8_t> b,
      ReadStateFile(path, kSeqMagic,
                    "a sequence state file (Session::SaveSeqState, stowage_state_seq_save_file)",
                    head + static_cast<uint64_t>(s.n_ctx) * (4 + cell_bytes) + 8, *s.gguf, head, nullptr));
  if (b.size() < head)
    return DataLoss(path + ": offset " + std::to_string(b.size()) + ": header: expected " +
                    std::to_string(head) + " bytes for this plan's KV tensors, found " +
                    std::to_string(b.size()) + " (truncated)");
  Reader r{b.data(), path, sizeof kSeqMagic + 4 + 24};
  {
    const size_t off = r.at;
    const auto n = r.Get<uint32_t>();
    if (n != kv.size()) return r.Expect(StatusCode::kFailedPrecondition, "KV tensors", kv.size(), n, off);
  }
  for (const KvTensor& t : kv) {
    const size_t off = r.at;
    const auto cb = r.Get<uint64_t>();
    const bool tr = b[r.at++] != 0;
    if (cb != t.cell_bytes || tr != t.transposed)
      return r.Expect(StatusCode::kFailedPrecondition, "bytes per cell (times 2 when transposed)",
                      static_cast<int64_t>(t.cell_bytes * (t.transposed ? 2 : 1)),
                      static_cast<int64_t>(cb * (tr ? 2 : 1)), off);
  }
  const size_t n_off = r.at;
  const auto n = r.Get<uint32_t>();
  const uint64_t size = head + static_cast<uint64_t>(n) * (4 + cell_bytes) + 8;
  STOWAGE_RETURN_IF_ERROR(CheckSizeAndSum(
      b, path, size,
      "for " + std::to_string(n) + " cells (the count at offset " + std::to_string(n_off) + ")"));
  std::vector<int32_t> pos(n);
  for (uint32_t i = 0; i < n; ++i) {
    const size_t off = r.at;
    pos[i] = r.Get<int32_t>();
    if (pos[i] < 0 || (i > 0 && pos[i] <= pos[i - 1]))
      return DataLoss(path + ": offset " + std::to_string(off) + ": position of cell " + std::to_string(i) +
                      ": expected an increasing position >= 0, found " + std::to_string(pos[i]));
  }
  // The destination sequence is replaced: its cells are free first (on copies, committed at the end).
  std::vector<int32_t> cell_pos = s.cell_pos;
  std::vector<Impl::SeqSet> cell_seq = s.cell_seq;
  int64_t used = s.cells_used;
  for (size_t j = 0; j < cell_pos.size(); ++j) {
    if (cell_pos[j] < 0 || !cell_seq[j][static_cast<size_t>(dest_seq_id)]) continue;
    cell_seq[j].reset(static_cast<size_t>(dest_seq_id));
    if (cell_seq[j].none()) {
      cell_pos[j] = -1;
      --used;
    }
  }
  std::vector<size_t> cells;
  for (size_t j = 0; j < cell_pos.size() && cells.size() < n; ++j)
    if (cell_pos[j] < 0) cells.push_back(j);
  if (cells.size() < n)
    return OutOfRange("LoadSeqState: " + path + " holds " + std::to_string(n) + " cells, the KV cache has " +
                      std::to_string(cells.size()) + " empty (of " + std::to_string(s.n_ctx) + ")");
  std::vector<uint8_t> all;
  for (const KvTensor& t : kv) {
    all.resize(t.nbytes);
    STOWAGE_RETURN_IF_ERROR(s.buffers[t.buffer]->Read(t.offset, all.data(), t.nbytes));
    for (uint32_t i = 0; i < n; ++i) {
      CellBytes(t, s.n_ctx, all, cells[i], b.data() + r.at, /*to_cells=*/true);
      r.at += t.cell_bytes;
    }
    STOWAGE_RETURN_IF_ERROR(s.buffers[t.buffer]->Write(t.offset, all.data(), t.nbytes));
  }
  for (uint32_t i = 0; i < n; ++i) {
    cell_pos[cells[i]] = pos[i];
    cell_seq[cells[i]].reset();
    cell_seq[cells[i]].set(static_cast<size_t>(dest_seq_id));
  }
  s.cell_pos = std::move(cell_pos);
  s.cell_seq = std::move(cell_seq);
  s.cells_used = used + n;
  s.ClearEmbeddings();
  return Status::Ok();
}

}  // namespace stowage
