//===- ImportModelGraphs.cpp - planner graphs / GGUF -> ggml dialect ------===//

#include "stowage/Compiler/Import/ImportModelGraphs.h"

#include <string>
#include <vector>

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "stowage/Dialect/GGML/IR/GGMLOps.h"
#include "stowage/Dialect/Place/IR/PlaceDialect.h"
#include "stowage/planner/model_graphs.h"
#include "stowage/planner/plan.h"
#include "stowage/planner/registry.h"
#include "stowage/runtime/ggml_op_params.h"
#include "stowage/runtime/gguf.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"

using namespace mlir;

namespace stowage::compiler {

place::BufferTypeAttr getBufferTypeAttr(MLIRContext *ctx, const planner::Placement &p, int index) {
  const planner::PlacedBuft &b = p.bufts[index];
  // CPU bufts are host memory too; `host` names a GPU's pinned host buffer type (CUDA_Host).
  const bool onCpu = p.devices[b.device].type != planner::DeviceKind::kGpu;
  place::BuftKind kind = place::BuftKind::extra;
  if (StringRef(b.name).ends_with("_Split"))
    kind = place::BuftKind::split;
  else if (b.is_default)
    kind = place::BuftKind::default_;
  else if (b.is_host && !onCpu)
    kind = place::BuftKind::host;
  return place::BufferTypeAttr::get(ctx, b.name, p.devices[b.device].name, kind);
}

ggml::Dim toDialectDim(const planner::DimExpr &e, bool bindTokens, bool bindOutputs) {
  using ggml::Sym;
  ggml::Dim d;
  d.c = e.c;
  d.k[static_cast<unsigned>(Sym::n_kv)] = e.kv;
  d.k[static_cast<unsigned>(Sym::kv_head)] = e.kv_head;
  d.k[static_cast<unsigned>(Sym::n_kv_swa)] = e.kv_swa;
  d.k[static_cast<unsigned>(Sym::kv_head_swa)] = e.kv_head_swa;
  if (bindTokens)
    d.c += e.tokens;
  else
    d.k[static_cast<unsigned>(Sym::n_tokens)] = e.tokens;
  if (bindOutputs)
    d.c += e.outputs;
  else
    d.k[static_cast<unsigned>(Sym::n_outputs)] = e.outputs;
  return d;
}

Location getTensorLoc(Location loc, int id) {
  MLIRContext *ctx = loc.getContext();
  return FusedLoc::get(ctx, {loc}, IntegerAttr::get(IntegerType::get(ctx, 32), id));
}

std::optional<int> getImportedTensorId(Location loc) {
  auto fused = dyn_cast<FusedLoc>(loc);
  if (!fused)
    return std::nullopt;
  auto id = dyn_cast_or_null<IntegerAttr>(fused.getMetadata());
  if (!id || !id.getType().isInteger(32))
    return std::nullopt;
  return static_cast<int>(id.getInt());
}

namespace {

using ggml::Dim;
using ggml::Sym;
using planner::DimExpr;

/// Element type of a ggml type in the dialect: builtin float/int types or a block type.
Type elementType(MLIRContext *ctx, GgmlType type) {
  switch (type) {
  case GgmlType::F32:
    return Float32Type::get(ctx);
  case GgmlType::F16:
    return Float16Type::get(ctx);
  case GgmlType::BF16:
    return BFloat16Type::get(ctx);
  case GgmlType::F64:
    return Float64Type::get(ctx);
  case GgmlType::I8:
    return IntegerType::get(ctx, 8);
  case GgmlType::I16:
    return IntegerType::get(ctx, 16);
  case GgmlType::I32:
    return IntegerType::get(ctx, 32);
  case GgmlType::I64:
    return IntegerType::get(ctx, 64);
  default:
    return ggml::BlockType::get(ctx, static_cast<uint32_t>(type));
  }
}

/// Imports one graph (pp or tg) into one function.
class GraphImporter {
public:
  GraphImporter(const planner::ModelGraphs &model, const planner::Graph &graph, bool tg,
                const planner::Placement *placement, OpBuilder &builder, Location loc)
      : m_(model), g_(graph), tg_(tg), place_(placement), b_(builder), loc_(loc),
        values_(graph.tensors.size()) {}

  /// Builds `func.func @<name>` at the builder's insertion point.
  LogicalResult run(StringRef name);

private:
  MLIRContext *ctx() { return b_.getContext(); }
  /// The dialect's form of a planner dimension; @tg binds n_tokens = 1 and n_outputs = 1 where
  /// its bound is 1 (several sequences, -np N: N tokens and outputs, kept symbolic).
  Dim dim(const DimExpr &e) const {
    return toDialectDim(e, tg_ && g_.max_tokens == 1, tg_ && g_.max_outputs == 1);
  }
  FailureOr<ggml::TensorType> tensorType(const planner::Tensor &t, Location loc);
  /// A node's location: its name inside its graph's ("pp", "tg"), inside `loc_`.
  Location nodeLoc(const planner::Tensor &t) {
    return NameLoc::get(StringAttr::get(ctx(), t.name),
                        NameLoc::get(StringAttr::get(ctx(), g_.name), loc_));
  }
  LogicalResult importLeaf(int id);
  /// Imports graph node `id` as one op (its sources, then the op of its kind).
  LogicalResult importNode(int id);
  /// The values of node t's sources in src order (a null Value for an absent optional source);
  /// an error if one is not computed yet or fewer than the op's min_srcs (ggml_ops.h) are present.
  FailureOr<SmallVector<Value, 4>> nodeSources(const planner::Tensor &t, Location loc);
  /// An error naming node t unless the first n of its sources are present.
  LogicalResult needSources(const planner::Tensor &t, ArrayRef<Value> src, size_t n, Location loc);
  /// The op of node t when its kind takes no op parameters (operands are its sources); nullptr
  /// for the other kinds.
  FailureOr<Operation *> createSourceOp(const planner::Tensor &t, ggml::TensorType type,
                                        ArrayRef<Value> src, Location loc);
  /// The op of node t when its kind takes op parameters (ggml_op_params.h) or view strides; an
  /// error for a kind the dialect has no op for.
  FailureOr<Operation *> createParamOp(const planner::Tensor &t, ggml::TensorType type,
                                       ArrayRef<Value> src, Location loc);
  FailureOr<ggml::DimsAttr> viewStrides(const planner::Tensor &t, ggml::TensorType type,
                                        Location loc);

  /// place.backend / place.cause of a node or input, when placed.
  void annotate(Operation *op, const planner::Tensor &t);
  place::BackendAttr backendAttr(int backend);
  /// Builds the place.split regions of a placed graph.
  LogicalResult importSplits();
  /// A place.copy of `source` to `backend` standing for graph tensor `copy`, numbered `index`
  /// (the pipeline-parallelism copy number; 0 without it).
  LogicalResult importCopy(int source, int copy, place::BackendAttr backend, int index = 0);
  /// Pipeline parallelism (n_copies > 1): copies 1..n-1 of every graph input, at function level
  /// after the leafs (ggml makes them on the input's own backend); no op uses them.
  LogicalResult importInputCopies();

  const planner::ModelGraphs &m_;
  const planner::Graph &g_;
  bool tg_; ///< the tg graph: n_tokens = n_outputs = 1 where its bounds are 1
  const planner::Placement *place_;
  OpBuilder &b_;
  Location loc_;
  std::vector<Value> values_; // graph tensor id -> SSA value
};

FailureOr<ggml::TensorType> GraphImporter::tensorType(const planner::Tensor &t, Location loc) {
  SmallVector<Dim, 4> shape;
  for (const DimExpr &e : t.ne)
    shape.push_back(dim(e));
  auto type = ggml::TensorType::getChecked([&] { return emitError(loc); }, ctx(),
                                           ArrayRef<Dim>(shape), elementType(ctx(), t.type));
  if (!type)
    return failure();
  return type;
}

LogicalResult GraphImporter::importLeaf(int id) {
  const planner::Tensor &t = g_.tensors[id];
  Location loc = nodeLoc(t);
  FailureOr<ggml::TensorType> type = tensorType(t, loc);
  if (failed(type))
    return failure();
  Operation *op = nullptr;
  switch (t.kind) {
  case planner::TensorKind::kWeight: {
    const planner::GlobalTensor &w = m_.globals[t.global];
    if (!w.parts.empty()) {
      // A weight group (the QKV fusion's): its parts are leaves of the graph before it.
      SmallVector<Value> parts;
      for (int part : w.parts) {
        Value v;
        for (size_t j = 0; j < g_.tensors.size() && j < values_.size(); ++j)
          if (g_.tensors[j].kind == planner::TensorKind::kWeight && g_.tensors[j].global == part)
            v = v ? v : values_[j];
        if (!v)
          return emitError(loc) << "weight group '" << w.name << "': its part '"
                                << m_.globals[part].name << "' is not a leaf before it";
        parts.push_back(v);
      }
      op = b_.create<ggml::WeightGroupOp>(loc, *type, parts);
      op->setAttr(ggml::kNodeNameAttr, b_.getStringAttr(w.name));
      break;
    }
    op = b_.create<ggml::WeightOp>(loc, *type, b_.getStringAttr(w.name),
                                   b_.getI32IntegerAttr(w.layer),
                                   w.duplicated ? b_.getUnitAttr() : UnitAttr());
    break;
  }
  case planner::TensorKind::kKvCache: {
    const planner::GlobalTensor &c = m_.globals[t.global];
    StringRef name(c.name);
    ggml::CacheKind kind;
    if (name.starts_with("cache_k_"))
      kind = ggml::CacheKind::k;
    else if (name.starts_with("cache_v_"))
      kind = ggml::CacheKind::v;
    else if (name.starts_with("cache_r_"))
      kind = ggml::CacheKind::r;
    else if (name.starts_with("cache_s_"))
      kind = ggml::CacheKind::s;
    else
      return emitError(loc) << "cache tensor '" << name << "' is not cache_{k,v,r,s}_l<il>";
    op = b_.create<ggml::KvCacheOp>(loc, *type, ggml::CacheKindAttr::get(ctx(), kind),
                                    b_.getStringAttr(name), b_.getI32IntegerAttr(c.layer));
    break;
  }
  case planner::TensorKind::kInput:
    op = b_.create<ggml::InputOp>(loc, *type, b_.getStringAttr(t.name));
    break;
  default:
    return emitError(loc) << "tensor '" << t.name << "' is listed as a leaf but is computed";
  }
  if (place_ && t.global >= 0 && t.global < static_cast<int>(place_->global_buft.size())) {
    int buft = place_->global_buft[t.global];
    if (buft >= 0 && buft < static_cast<int>(place_->bufts.size()))
      op->setAttr(place::kBuftAttr, getBufferTypeAttr(ctx(), *place_, buft));
  }
  if (t.kind == planner::TensorKind::kInput)
    annotate(op, t);
  op->setLoc(getTensorLoc(loc, id));
  values_[id] = op->getResult(0);
  return success();
}

FailureOr<ggml::DimsAttr> GraphImporter::viewStrides(const planner::Tensor &t,
                                                     ggml::TensorType type, Location loc) {
  // The planner leaves strides ggml_view_1d/_2d/_3d derive at 0: nb1 = row bytes,
  // nb[i] = nb[i-1] * ne[i] (ggml.c ggml_view_2d/3d).
  SmallVector<Dim, 3> nb;
  for (unsigned i = 0; i < 3; ++i) {
    Dim given = dim(t.view_nb[i]);
    if (!given.is(0)) {
      nb.push_back(given);
      continue;
    }
    ggml::ElementCount e;
    if (i == 0) {
      if (type.getBlockSize() == 1) {
        e.multiply(type.getNe(0));
        e.multiply(Dim::of(static_cast<int64_t>(type.getElementBytes())));
      } else if (type.getNe(0).isStatic()) {
        e.multiply(Dim::of(type.getNe(0).size() / type.getBlockSize() *
                           static_cast<int64_t>(type.getElementBytes())));
      } else {
        return emitError(loc) << "view '" << t.name << "' of a quantized type needs a static ne0";
      }
    } else {
      e.multiply(nb[i - 1]);
      e.multiply(type.getNe(i));
    }
    std::optional<Dim> d = e.asDim();
    if (!d)
      return emitError(loc) << "view '" << t.name << "': stride nb" << i + 1 << " = " << e.str()
                            << " is not affine in the symbols";
    nb.push_back(*d);
  }
  return ggml::DimsAttr::get(ctx(), nb);
}

FailureOr<SmallVector<Value, 4>> GraphImporter::nodeSources(const planner::Tensor &t,
                                                            Location loc) {
  SmallVector<Value, 4> src;
  for (int s : t.srcs) {
    if (s < 0) {
      src.push_back(Value());
      continue;
    }
    if (!values_[s])
      return emitError(loc) << "node '" << t.name << "' uses '" << g_.tensors[s].name
                            << "' before it is computed (graph order)";
    src.push_back(values_[s]);
  }
  // Sources as the op traits say (ggml_ops.h).
  if (failed(needSources(t, src, GetOpTraits(t.op).min_srcs, loc)))
    return failure();
  return src;
}

LogicalResult GraphImporter::needSources(const planner::Tensor &t, ArrayRef<Value> src, size_t n,
                                         Location loc) {
  if (src.size() < n || llvm::any_of(src.take_front(n), [](Value v) { return !v; }))
    return emitError(loc) << "node '" << t.name << "' (" << GgmlOpName(t.op) << ") needs " << n
                          << " sources, has " << src.size();
  return success();
}

FailureOr<Operation *> GraphImporter::createSourceOp(const planner::Tensor &t,
                                                     ggml::TensorType type, ArrayRef<Value> src,
                                                     Location loc) {
  switch (t.op) {
  case GgmlOp::GET_ROWS:
    return b_.create<ggml::GetRowsOp>(loc, type, src[0], src[1]).getOperation();
  case GgmlOp::MUL_MAT:
    return b_.create<ggml::MulMatOp>(loc, type, src[0], src[1]).getOperation();
  case GgmlOp::MUL_MAT_ID:
    return b_.create<ggml::MulMatIdOp>(loc, type, src[0], src[1], src[2]).getOperation();
  case GgmlOp::ADD:
    return b_.create<ggml::AddOp>(loc, type, src[0], src[1]).getOperation();
  case GgmlOp::MUL:
    return b_.create<ggml::MulOp>(loc, type, src[0], src[1]).getOperation();
  case GgmlOp::DIV:
    return b_.create<ggml::DivOp>(loc, type, src[0], src[1]).getOperation();
  case GgmlOp::SUM_ROWS:
    return b_.create<ggml::SumRowsOp>(loc, type, src[0]).getOperation();
  case GgmlOp::SILU:
    return b_.create<ggml::SiluOp>(loc, type, src[0]).getOperation();
  case GgmlOp::GELU:
    return b_.create<ggml::GeluOp>(loc, type, src[0]).getOperation();
  case GgmlOp::SIGMOID:
    return b_.create<ggml::SigmoidOp>(loc, type, src[0]).getOperation();
  case GgmlOp::TANH:
    return b_.create<ggml::TanhOp>(loc, type, src[0]).getOperation();
  case GgmlOp::SWIGLU:
  case GgmlOp::GEGLU:
  case GgmlOp::REGLU: {
    ggml::GluKind kind = t.op == GgmlOp::SWIGLU  ? ggml::GluKind::swiglu
                         : t.op == GgmlOp::GEGLU ? ggml::GluKind::geglu
                                                 : ggml::GluKind::reglu;
    Value second = src.size() > 1 ? src[1] : Value();
    return b_
        .create<ggml::GluOp>(loc, type, ggml::GluKindAttr::get(ctx(), kind), src[0], second,
                             b_.getBoolAttr(false), b_.getF32FloatAttr(1.702f),
                             b_.getF32FloatAttr(7.0f))
        .getOperation();
  }
  case GgmlOp::ADD_ID:
    return b_.create<ggml::AddIdOp>(loc, type, src[0], src[1], src[2]).getOperation();
  case GgmlOp::SSM_CONV:
    return b_.create<ggml::SsmConvOp>(loc, type, src[0], src[1]).getOperation();
  case GgmlOp::SSM_SCAN: {
    Value ids = src.size() > 6 ? src[6] : Value();
    return b_
        .create<ggml::SsmScanOp>(loc, type, src[0], src[1], src[2], src[3], src[4], src[5], ids)
        .getOperation();
  }
  case GgmlOp::CPY:
    if (src.size() == 1) // ggml_cast: no destination, a tensor of its own
      return b_.create<ggml::CastOp>(loc, type, src[0]).getOperation();
    return b_.create<ggml::CpyOp>(loc, type, src[0], src[1]).getOperation();
  case GgmlOp::SET_ROWS:
    // The planner's src order is (b, c, a): ggml_set_rows(a, b, c) stores into a (dst_src 2).
    if (failed(needSources(t, src, 3, loc)))
      return failure();
    return b_.create<ggml::SetRowsOp>(loc, type, src[2], src[0], src[1]).getOperation();
  case GgmlOp::CONT:
    return b_.create<ggml::ContOp>(loc, type, src[0]).getOperation();
  case GgmlOp::RESHAPE:
    return b_.create<ggml::ReshapeOp>(loc, type, src[0]).getOperation();
  case GgmlOp::TRANSPOSE:
    return b_.create<ggml::TransposeOp>(loc, type, src[0]).getOperation();
  case GgmlOp::REPEAT:
    return b_.create<ggml::RepeatOp>(loc, type, src[0]).getOperation();
  default:
    return static_cast<Operation *>(nullptr);
  }
}

FailureOr<Operation *> GraphImporter::createParamOp(const planner::Tensor &t, ggml::TensorType type,
                                                    ArrayRef<Value> src, Location loc) {
  // Parameters as the decodes say (ggml_op_params.h).
  const OpParamsRef params(t.iparams, t.fparams);
  auto paramError = [&](const Status &st) -> LogicalResult {
    return emitError(loc) << "node '" << t.name << "': " << st.message();
  };
  auto f32 = [&](float v) { return b_.getF32FloatAttr(v); };
  switch (t.op) {
  case GgmlOp::SWIGLU_OAI: {
    Result<SwiGluOaiParams> p = DecodeSwiGluOai(params);
    if (!p.ok())
      return paramError(p.status());
    return b_
        .create<ggml::GluOp>(loc, type, ggml::GluKindAttr::get(ctx(), ggml::GluKind::swiglu_oai),
                             src[0], src[1], b_.getBoolAttr(false), f32(p->alpha), f32(p->limit))
        .getOperation();
  }
  case GgmlOp::FILL: {
    Result<FillParams> p = DecodeFill(params);
    if (!p.ok())
      return paramError(p.status());
    return b_.create<ggml::FillOp>(loc, type, src[0], f32(p->c)).getOperation();
  }
  case GgmlOp::CLAMP: {
    Result<ClampParams> p = DecodeClamp(params);
    if (!p.ok())
      return paramError(p.status());
    return b_.create<ggml::ClampOp>(loc, type, src[0], f32(p->min), f32(p->max)).getOperation();
  }
  case GgmlOp::SCALE: {
    Result<ScaleParams> p = DecodeScale(params);
    if (!p.ok())
      return paramError(p.status());
    return b_.create<ggml::ScaleOp>(loc, type, src[0], f32(p->s), f32(p->b)).getOperation();
  }
  case GgmlOp::RMS_NORM:
  case GgmlOp::NORM:
  case GgmlOp::RMS_NORM_MUL: {
    Result<NormParams> p = DecodeNorm(t.op, params);
    if (!p.ok())
      return paramError(p.status());
    if (t.op == GgmlOp::RMS_NORM)
      return b_.create<ggml::RmsNormOp>(loc, type, src[0], f32(p->eps)).getOperation();
    if (t.op == GgmlOp::RMS_NORM_MUL) // a plan the compiler's fusion wrote
      return b_.create<ggml::RmsNormMulOp>(loc, type, src[0], src[1], f32(p->eps)).getOperation();
    return b_.create<ggml::NormOp>(loc, type, src[0], f32(p->eps)).getOperation();
  }
  case GgmlOp::MUL_MAT_GLU: { // a plan the compiler's fusion wrote
    Result<MulMatGluParams> p = DecodeMulMatGlu(params);
    if (!p.ok())
      return paramError(p.status());
    return b_
        .create<ggml::MulMatGluOp>(loc, type, static_cast<ggml::MulMatGluKind>(p->glu), src[0],
                                   src[1], src[2])
        .getOperation();
  }
  case GgmlOp::ROPE:
  case GgmlOp::ROPE_SET_ROWS:
  case GgmlOp::ROPE_CPY: {
    Result<RopeParams> p = DecodeRope(params);
    if (!p.ok())
      return paramError(p.status());
    // The dialect's modes (ggml.rope's RopeMode): normal and NEOX.
    if (p->mode != 0 && p->mode != 2)
      return emitError(loc) << "node '" << t.name << "': rope mode " << p->mode
                            << " is not normal (0) or neox (2)";
    auto mode = ggml::RopeModeAttr::get(ctx(), p->mode == 2 ? ggml::RopeMode::neox
                                                            : ggml::RopeMode::normal);
    if (t.op ==
        GgmlOp::ROPE_SET_ROWS) { // a plan the compiler's fusion wrote: x, pos, dst, idx[, ff]
      if (failed(needSources(t, src, 4, loc)))
        return failure();
      Value ff = src.size() > 4 ? src[4] : Value();
      return b_
          .create<ggml::RopeSetRowsOp>(
              loc, type, mode, src[0], src[1], src[2], src[3], ff, b_.getI32IntegerAttr(p->n_dims),
              b_.getI32IntegerAttr(p->n_ctx_orig), f32(p->freq_base), f32(p->freq_scale),
              f32(p->ext_factor), f32(p->attn_factor), f32(p->beta_fast), f32(p->beta_slow),
              b_.getI32IntegerAttr(p->n_offs))
          .getOperation();
    }
    if (t.op == GgmlOp::ROPE_CPY) { // a plan the compiler's fusion wrote: x, pos, dst[, ff]
      if (failed(needSources(t, src, 3, loc)))
        return failure();
      Value ff = src.size() > 3 ? src[3] : Value();
      return b_
          .create<ggml::RopeCpyOp>(
              loc, type, mode, src[0], src[1], src[2], ff, b_.getI32IntegerAttr(p->n_dims),
              b_.getI32IntegerAttr(p->n_ctx_orig), f32(p->freq_base), f32(p->freq_scale),
              f32(p->ext_factor), f32(p->attn_factor), f32(p->beta_fast), f32(p->beta_slow),
              b_.getI32IntegerAttr(p->n_offs))
          .getOperation();
    }
    Value opt2 = src.size() > 2 ? src[2] : Value();
    return b_
        .create<ggml::RopeOp>(loc, type, mode, src[0], src[1], opt2,
                              b_.getI32IntegerAttr(p->n_dims), b_.getI32IntegerAttr(p->n_ctx_orig),
                              f32(p->freq_base), f32(p->freq_scale), f32(p->ext_factor),
                              f32(p->attn_factor), f32(p->beta_fast), f32(p->beta_slow),
                              b_.getI32IntegerAttr(p->n_offs))
        .getOperation();
  }
  case GgmlOp::SOFT_MAX: {
    Result<SoftMaxParams> p = DecodeSoftMax(params);
    if (!p.ok())
      return paramError(p.status());
    Value mask = src.size() > 1 ? src[1] : Value();
    Value sinks = src.size() > 2 ? src[2] : Value();
    return b_
        .create<ggml::SoftMaxOp>(loc, type, src[0], mask, sinks, f32(p->scale), f32(p->max_bias))
        .getOperation();
  }
  case GgmlOp::ARGSORT: {
    Result<ArgsortParams> p = DecodeArgsort(params);
    if (!p.ok())
      return paramError(p.status());
    return b_
        .create<ggml::ArgsortOp>(
            loc, type, p->order == 1 ? ggml::SortOrder::desc : ggml::SortOrder::asc, src[0])
        .getOperation();
  }
  case GgmlOp::TOP_K: {
    Result<TopKParams> p = DecodeTopK(params);
    if (!p.ok())
      return paramError(p.status());
    return b_.create<ggml::TopKOp>(loc, type, src[0], p->k).getOperation();
  }
  case GgmlOp::CONCAT: {
    Result<ConcatParams> p = DecodeConcat(params);
    if (!p.ok())
      return paramError(p.status());
    return b_.create<ggml::ConcatOp>(loc, type, src[0], src[1], p->dim).getOperation();
  }
  case GgmlOp::FLASH_ATTN_EXT: {
    Result<FlashAttnExtParams> p = DecodeFlashAttnExt(params);
    if (!p.ok())
      return paramError(p.status());
    Value mask = src.size() > 3 ? src[3] : Value();
    Value sinks = src.size() > 4 ? src[4] : Value();
    return b_
        .create<ggml::FlashAttnExtOp>(loc, type, src[0], src[1], src[2], mask, sinks, f32(p->scale),
                                      f32(p->max_bias), f32(p->logit_softcap),
                                      b_.getI32IntegerAttr(p->prec))
        .getOperation();
  }
  case GgmlOp::PERMUTE: {
    Result<PermuteParams> p = DecodePermute(params);
    if (!p.ok())
      return paramError(p.status());
    SmallVector<int32_t, 4> axes(std::begin(p->axis), std::end(p->axis));
    return b_.create<ggml::PermuteOp>(loc, type, src[0], axes).getOperation();
  }
  case GgmlOp::VIEW: {
    FailureOr<ggml::DimsAttr> nb = viewStrides(t, type, loc);
    if (failed(nb))
      return failure();
    Dim offset = dim(t.view_offset);
    ggml::DimAttr offsetAttr = offset.is(0) ? ggml::DimAttr() : ggml::DimAttr::get(ctx(), offset);
    return b_.create<ggml::ViewOp>(loc, type, src[0], *nb, offsetAttr).getOperation();
  }
  default:
    return emitError(loc) << "node '" << t.name << "': op " << GgmlOpName(t.op)
                          << " has no op in the ggml dialect";
  }
}

LogicalResult GraphImporter::importNode(int id) {
  const planner::Tensor &t = g_.tensors[id];
  Location loc = nodeLoc(t);
  FailureOr<ggml::TensorType> type = tensorType(t, loc);
  if (failed(type))
    return failure();
  FailureOr<SmallVector<Value, 4>> src = nodeSources(t, loc);
  if (failed(src))
    return failure();
  FailureOr<Operation *> op = createSourceOp(t, *type, *src, loc);
  if (succeeded(op) && !*op)
    op = createParamOp(t, *type, *src, loc);
  if (failed(op))
    return failure();
  if (!t.name.empty())
    (*op)->setAttr(ggml::kNodeNameAttr, b_.getStringAttr(t.name));
  annotate(*op, t);
  (*op)->setLoc(getTensorLoc(loc, id));
  values_[id] = (*op)->getResult(0);
  return success();
}

place::BackendAttr GraphImporter::backendAttr(int backend) {
  return place::BackendAttr::get(ctx(), place_->backends[backend].name, backend);
}

void GraphImporter::annotate(Operation *op, const planner::Tensor &t) {
  if (!place_)
    return;
  if (t.backend >= 0 && t.backend < static_cast<int>(place_->backends.size()))
    op->setAttr(place::kBackendAttr, backendAttr(t.backend));
  // Only ggml's cause codes; the planner's own markers (e.g. "cpu-only") are not causes.
  if (place::isKnownCauseCode(t.cause))
    op->setAttr(place::kCauseAttr, place::CauseAttr::get(ctx(), t.cause));
}

LogicalResult GraphImporter::importInputCopies() {
  const planner::GraphCopies *gc = place_ ? place_->FindCopies(g_.name) : nullptr;
  if (!gc)
    return success();
  for (const planner::TensorCopies &tc : gc->inputs)
    for (size_t c = 1; c < tc.copies.size(); ++c)
      if (failed(importCopy(tc.tensor, tc.copies[c], backendAttr(tc.backend), static_cast<int>(c))))
        return failure();
  return success();
}

LogicalResult GraphImporter::importCopy(int source, int copy, place::BackendAttr backend,
                                        int index) {
  const planner::Tensor &c = g_.tensors[copy];
  Location loc = nodeLoc(c);
  if (!values_[source])
    return emitError(loc) << "split input '" << c.name << "' copies '" << g_.tensors[source].name
                          << "' before it is computed";
  auto op = b_.create<place::CopyOp>(getTensorLoc(loc, copy), values_[source].getType(),
                                     values_[source], backend, b_.getI32IntegerAttr(index));
  op->setAttr(ggml::kNodeNameAttr, b_.getStringAttr(c.name));
  values_[copy] = op.getResult();
  return success();
}

LogicalResult GraphImporter::importSplits() {
  const size_t n = g_.tensors.size();
  // The split that defines each node and split-input copy (a copy is made once per source and
  // backend, so a later split on the same backend may use it too).
  std::vector<int> splitOf(n, -1);
  // Pipeline parallelism: the other instances of each split input (copies[0] is the input's copy).
  const planner::GraphCopies *gc = place_->FindCopies(g_.name);
  auto extraCopies = [&](size_t j, size_t k) -> ArrayRef<int> {
    if (!gc || j >= gc->splits.size() || k >= gc->splits[j].size() ||
        gc->splits[j][k].copies.size() < 2)
      return {};
    return ArrayRef<int>(gc->splits[j][k].copies).drop_front();
  };
  for (auto [j, split] : llvm::enumerate(g_.splits)) {
    for (int i = split.node_begin; i < split.node_end; ++i)
      splitOf[g_.nodes[i]] = static_cast<int>(j);
    for (auto [k, in] : llvm::enumerate(split.inputs)) {
      splitOf[in.second] = static_cast<int>(j);
      for (int c : extraCopies(j, k))
        splitOf[c] = static_cast<int>(j);
    }
  }
  // Values a split must yield: those used by another split or returned.
  std::vector<SmallVector<int>> yields(g_.splits.size());
  std::vector<char> yielded(n, 0);
  auto use = [&](int t, int user) {
    if (t < 0 || splitOf[t] < 0 || splitOf[t] == user || yielded[t])
      return;
    yielded[t] = 1;
    yields[splitOf[t]].push_back(t);
  };
  for (auto [j, split] : llvm::enumerate(g_.splits)) {
    for (auto [source, copy] : split.inputs)
      use(source, static_cast<int>(j));
    for (int i = split.node_begin; i < split.node_end; ++i)
      for (int s : g_.tensors[g_.nodes[i]].srcs)
        use(s, static_cast<int>(j));
  }
  for (int id : g_.nodes)
    if (g_.tensors[id].is_output)
      use(id, -2);

  for (auto [j, split] : llvm::enumerate(g_.splits)) {
    if (split.backend < 0 || split.backend >= static_cast<int>(place_->backends.size()))
      return emitError(loc_) << "split " << j << " of graph " << g_.name << " has no backend";
    SmallVector<Type> types;
    for (int t : yields[j]) {
      FailureOr<ggml::TensorType> type = tensorType(g_.tensors[t], nodeLoc(g_.tensors[t]));
      if (failed(type))
        return failure();
      types.push_back(*type);
    }
    place::BackendAttr backend = backendAttr(split.backend);
    auto op =
        b_.create<place::SplitOp>(loc_, types, b_.getI32IntegerAttr(static_cast<int>(j)), backend);
    {
      OpBuilder::InsertionGuard guard(b_);
      b_.setInsertionPointToStart(&op.getBody().emplaceBlock());
      // Inputs whose source is ready are copied first (ggml copies them before running the
      // split). A source can also be a view node inside this split's range (views compute
      // nothing and are not split boundaries): its copy follows the view.
      // Copy 0 (the one the nodes read), then with pipeline parallelism copies 1..n-1.
      const size_t splitIndex = j; // (a structured binding cannot be captured in C++17)
      auto copyAll = [&](size_t k, int source, int copy) -> LogicalResult {
        if (failed(importCopy(source, copy, backend)))
          return failure();
        for (auto [c, extra] : llvm::enumerate(extraCopies(splitIndex, k)))
          if (failed(importCopy(source, extra, backend, static_cast<int>(c) + 1)))
            return failure();
        return success();
      };
      SmallVector<size_t> pending;
      for (auto [k, in] : llvm::enumerate(split.inputs)) {
        auto [source, copy] = in;
        if (!values_[source] && splitOf[source] == static_cast<int>(j)) {
          pending.push_back(k);
          continue;
        }
        if (failed(copyAll(k, source, copy)))
          return failure();
      }
      for (int i = split.node_begin; i < split.node_end; ++i) {
        if (failed(importNode(g_.nodes[i])))
          return failure();
        for (size_t k : pending)
          if (split.inputs[k].first == g_.nodes[i] &&
              failed(copyAll(k, split.inputs[k].first, split.inputs[k].second)))
            return failure();
      }
      SmallVector<Value> results;
      for (int t : yields[j])
        results.push_back(values_[t]);
      b_.create<place::YieldOp>(loc_, results);
    }
    // Outside the region only the split's results are visible.
    for (size_t t = 0; t < n; ++t)
      if (splitOf[t] == static_cast<int>(j))
        values_[t] = Value();
    for (auto [k, t] : llvm::enumerate(yields[j]))
      values_[t] = op.getResult(k);
  }
  return success();
}

LogicalResult GraphImporter::run(StringRef name) {
  SmallVector<Type> resultTypes;
  SmallVector<int> outputs;
  for (int id : g_.nodes)
    if (g_.tensors[id].is_output)
      outputs.push_back(id);
  auto func = b_.create<func::FuncOp>(loc_, name, b_.getFunctionType({}, {}));
  func->setAttr("ggml.n_tokens", b_.getI64IntegerAttr(g_.max_tokens));
  func->setAttr("ggml.n_kv", b_.getI64IntegerAttr(g_.max_kv));
  if (g_.max_kv_swa > 0) // interleaved sliding-window models: the SWA cache's worst case
    func->setAttr("ggml.n_kv_swa", b_.getI64IntegerAttr(g_.max_kv_swa));
  func->setAttr("ggml.n_outputs", b_.getI64IntegerAttr(g_.max_outputs));
  OpBuilder::InsertionGuard guard(b_);
  b_.setInsertionPointToStart(func.addEntryBlock());
  for (int id : g_.leafs)
    if (failed(importLeaf(id)))
      return failure();
  if (place_ && !g_.splits.empty()) {
    if (failed(importInputCopies()) || failed(importSplits()))
      return failure();
  } else {
    for (int id : g_.nodes)
      if (failed(importNode(id)))
        return failure();
  }
  SmallVector<Value> results;
  for (int id : outputs) {
    results.push_back(values_[id]);
    resultTypes.push_back(values_[id].getType());
  }
  b_.create<func::ReturnOp>(loc_, results);
  func.setFunctionType(b_.getFunctionType({}, resultTypes));
  return success();
}

} // namespace

OwningOpRef<ModuleOp> importModelGraphs(MLIRContext *context, const planner::ModelGraphs &graphs,
                                        Location loc, const planner::Placement *placement) {
  context->loadDialect<ggml::GGMLDialect, place::PlaceDialect, func::FuncDialect>();
  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
  OpBuilder builder(context);
  const planner::HParams &hp = graphs.hp;
  Operation *m = module->getOperation();
  m->setAttr("ggml.arch", builder.getStringAttr(hp.arch));
  m->setAttr("ggml.n_layer", builder.getI64IntegerAttr(hp.n_layer));
  m->setAttr("ggml.n_ctx", builder.getI64IntegerAttr(graphs.cfg.n_ctx));
  m->setAttr("ggml.n_ubatch", builder.getI64IntegerAttr(graphs.cfg.n_ubatch));
  if (placement) {
    SmallVector<Attribute> devices;
    for (const planner::PlacedDevice &d : placement->devices) {
      place::DeviceType type = d.type == planner::DeviceKind::kGpu     ? place::DeviceType::gpu
                               : d.type == planner::DeviceKind::kAccel ? place::DeviceType::accel
                                                                       : place::DeviceType::cpu;
      devices.push_back(place::DeviceAttr::get(context, d.name, type));
    }
    m->setAttr(place::kDevicesAttr, builder.getArrayAttr(devices));
  }
  builder.setInsertionPointToEnd(module->getBody());
  if (failed(GraphImporter(graphs, graphs.pp, /*tg=*/false, placement, builder, loc).run("pp")) ||
      failed(GraphImporter(graphs, graphs.tg, /*tg=*/true, placement, builder, loc).run("tg")))
    return nullptr;
  if (failed(verify(*module)))
    return nullptr;
  return module;
}

namespace {

/// stowage.import: the GGUF file and the context (as resolved) the module was imported with.
void recordImport(ModuleOp module, StringRef path, const planner::ContextConfig &cfg) {
  Builder b(module.getContext());
  auto count = [&](uint64_t v) { return b.getI64IntegerAttr(static_cast<int64_t>(v)); };
  NamedAttrList d;
  // Absolute (not canonical: symlinks and `..` kept, as plan-model records an absolute path):
  // the IR may be read from another directory.
  llvm::SmallString<256> abs(path);
  if (llvm::sys::fs::make_absolute(abs))
    abs = path;
  d.append("gguf", b.getStringAttr(abs));
  d.append("n_ctx", count(cfg.n_ctx));
  d.append("n_batch", count(cfg.n_batch));
  d.append("n_ubatch", count(cfg.n_ubatch));
  d.append("n_seq_max", count(cfg.n_seq_max));
  d.append("type_k", count(static_cast<uint64_t>(cfg.type_k)));
  d.append("type_v", count(static_cast<uint64_t>(cfg.type_v)));
  if (cfg.flash_attn)
    d.append("flash_attn", b.getBoolAttr(true));
  if (cfg.swa_full)
    d.append("swa_full", b.getBoolAttr(true));
  module->setAttr("stowage.import", d.getDictionary(module.getContext()));
}

} // namespace

OwningOpRef<ModuleOp> importGgufFile(MLIRContext *context, StringRef path,
                                     const planner::ContextConfig &config,
                                     const ImportPlacement *placement) {
  Location loc = FileLineColLoc::get(context, path, 0, 0);
  auto file = GgufFile::Open(path.str());
  if (!file.ok()) {
    emitError(loc) << file.status().message();
    return nullptr;
  }
  if (!placement) {
    auto graphs = planner::BuildModelGraphs(**file, config);
    if (!graphs.ok()) {
      emitError(loc) << graphs.status().message();
      return nullptr;
    }
    for (const std::string &warning : graphs->hp.warnings)
      emitWarning(loc) << warning;
    OwningOpRef<ModuleOp> module = importModelGraphs(context, *graphs, loc);
    if (module)
      recordImport(*module, path, graphs->cfg);
    return module;
  }

  auto registry = planner::Registry::Open(placement->registry_dirs);
  if (!registry.ok()) {
    emitError(loc) << registry.status().message();
    return nullptr;
  }
  auto machine = registry->MakeDevices(placement->devices);
  if (!machine.ok()) {
    emitError(loc) << machine.status().message();
    return nullptr;
  }
  // Without a CPU device the scheduler has no fallback backend; plan-model probes this machine's
  // CPU then, an import must not depend on the machine it runs on.
  if (llvm::none_of(*machine, [](const planner::DeviceManifest &d) {
        return d.type == planner::DeviceType::kCpu;
      })) {
    emitError(loc) << "the device list '" << placement->devices
                   << "' has no CPU device (the scheduler's last backend)";
    return nullptr;
  }
  // planner::Plan, as plan-model plans (no fit check: the IR is for inspection and passes).
  planner::PlanRequest request;
  request.context = config;
  request.llamacpp_compat = config.llamacpp_compat;
  request.flash_attn = placement->flash_attn_auto ? planner::FlashAttnMode::kAuto
                       : config.flash_attn        ? planner::FlashAttnMode::kOn
                                                  : planner::FlashAttnMode::kOff;
  request.placement = placement->options;
  request.fit = placement->fit;
  request.fit_target = placement->fit_target;
  request.serialize = false;
  auto planned = planner::Plan(**file, *machine, request, [&](const planner::PlanMessage &m) {
    if (m.kind == planner::PlanMessageKind::kWarning ||
        m.kind == planner::PlanMessageKind::kFlashAttnDisabled)
      emitWarning(loc) << m.text;
    else if (m.kind == planner::PlanMessageKind::kFlashAttnEnabled)
      emitRemark(loc) << m.text;
    else if (m.kind == planner::PlanMessageKind::kFitChosen)
      emitRemark(loc) << "--fit: " << m.text;
  });
  if (!planned.ok()) {
    emitError(loc) << planned.status().message();
    return nullptr;
  }
  OwningOpRef<ModuleOp> module =
      importModelGraphs(context, planned->graphs, loc, &planned->outcome.placement);
  if (module)
    recordImport(*module, path, planned->graphs.cfg);
  return module;
}

} // namespace stowage::compiler
