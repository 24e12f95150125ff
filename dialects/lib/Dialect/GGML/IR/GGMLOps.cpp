//===- GGMLOps.cpp - ggml op verifiers ------------------------------------===//
//
// Each verifier checks what the ggml constructor of that op asserts (ggml/src/ggml.c), so that a
// graph that verifies here can be built by ggml. Shapes are checked by the op's shape rule, shared
// with the planner's graph builder and the plan verifier (stowage/runtime/ggml_op_shapes.h),
// evaluated over the symbols' range (ruleShape); element types, transposed operands and view
// bounds are checked here. Element counts of reshape, cont and view are compared structurally.
//
//===----------------------------------------------------------------------===//

#include "stowage/Dialect/GGML/IR/GGMLOps.h"

#include "mlir/IR/Builders.h"
#include "stowage/runtime/ggml_op_params.h"
#include "stowage/runtime/ggml_op_shapes.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace stowage::ggml {
// Custom directive of ggml.view's assembly format (defined at the end of this file).
ParseResult parseViewLayout(OpAsmParser &parser, DimsAttr &nb, DimAttr &offset);
void printViewLayout(OpAsmPrinter &printer, ViewOp op, DimsAttr nb, DimAttr offset);
} // namespace stowage::ggml

#define GET_OP_CLASSES
#include "stowage/Dialect/GGML/IR/GGMLOps.cpp.inc"

namespace stowage::ggml {

StringRef getNodeName(Operation *op) {
  if (auto name = op->getAttrOfType<StringAttr>(kNodeNameAttr))
    return name.getValue();
  return "";
}

static TensorType tensorOf(Value v) { return cast<TensorType>(v.getType()); }

/// Packed byte strides nb1..nb3 of a contiguous tensor of `type` (ggml_nbytes-style), when they
/// are affine in the symbols.
static std::optional<std::array<Dim, 3>> packedStrides(TensorType type) {
  if (!type.getNe(0).isStatic())
    return std::nullopt;
  std::array<Dim, 3> nb;
  nb[0] = Dim::of(type.getNe(0).size() / type.getBlockSize() *
                  static_cast<int64_t>(type.getElementBytes()));
  for (unsigned i = 1; i < 3; ++i) {
    ElementCount e;
    e.multiply(nb[i - 1]);
    e.multiply(type.getNe(i));
    std::optional<Dim> d = e.asDim();
    if (!d)
      return std::nullopt;
    nb[i] = *d;
  }
  return nb;
}

bool isKnownNonContiguous(Value value) {
  Operation *def = value.getDefiningOp();
  if (!def)
    return false;
  if (isa<TransposeOp>(def))
    return true;
  if (auto permute = dyn_cast<PermuteOp>(def))
    return permute.getAxes() != ArrayRef<int32_t>{0, 1, 2, 3};
  if (auto view = dyn_cast<ViewOp>(def)) {
    auto packed = packedStrides(tensorOf(view.getResult()));
    if (!packed)
      return false;
    ArrayRef<Dim> nb = view.getNb().getValues();
    // Strides of dimensions of size 1 never matter (ggml_is_contiguous skips them).
    for (unsigned i = 0; i < nb.size() && i < 3; ++i)
      if (!tensorOf(view.getResult()).getNe(i + 1).is(1) && nb[i] != (*packed)[i])
        return true;
  }
  return false;
}

namespace {

std::string formatTensor(ArrayRef<Dim> shape, Type element) {
  std::string s;
  llvm::raw_string_ostream os(s);
  size_t n = shape.size();
  while (n > 1 && shape[n - 1].is(1))
    --n;
  os << "!ggml.tensor<[";
  for (size_t i = 0; i < n; ++i)
    os << (i ? ", " : "") << shape[i].str();
  os << "], ";
  if (auto block = llvm::dyn_cast<BlockType>(element))
    os << block.getTypeName();
  else
    element.print(os);
  os << ">";
  return s;
}

/// The result must have exactly `shape` and `element`; `rule` names ggml's rule for it.
LogicalResult checkResult(Operation *op, ArrayRef<Dim> shape, Type element, StringRef rule) {
  auto got = cast<TensorType>(op->getResult(0).getType());
  if (got.getShape() == shape && got.getElementType() == element)
    return success();
  return op->emitOpError() << "result must be " << formatTensor(shape, element) << " (" << rule
                           << "), got " << got;
}

bool isI32(TensorType t) { return t.getElementType().isSignlessInteger(32); }
bool isF32(TensorType t) { return t.getElementType().isF32(); }

/// ggml_is_transposed: the result of a transpose, or of a permute moving ne0 away.
bool isTransposed(Value v) {
  Operation *def = v.getDefiningOp();
  if (!def)
    return false;
  if (isa<TransposeOp>(def))
    return true;
  if (auto permute = dyn_cast<PermuteOp>(def))
    return !permute.getAxes().empty() && permute.getAxes()[0] != 0;
  return false;
}

LogicalResult checkNonEmptyName(Operation *op, StringRef name, StringRef what) {
  if (name.empty())
    return op->emitOpError() << what << " must not be empty";
  return success();
}

LogicalResult checkCount(Operation *op, TensorType from, TensorType to, StringRef what,
                         StringRef rule) {
  ElementCount n = from.getNumElements(), m = to.getNumElements();
  if (n.overflow || m.overflow)
    return op->emitOpError() << "element count overflows int64";
  if (n != m)
    return op->emitOpError() << what << " have " << n.str() << " and " << m.str()
                             << " elements; they must be equal (" << rule << ")";
  return success();
}

//===----------------------------------------------------------------------===//
// The shared shape rules (stowage/runtime/ggml_op_shapes.h) on symbolic dimensions
//===----------------------------------------------------------------------===//

/// A value of each symbol (Sym order).
using Binding = std::array<int64_t, kNumSyms>;

/// Symbols range over [1, kBig] (kv_head and kv_head_swa over [0, kBig]) where the rules are
/// evaluated.
constexpr int64_t kBig = int64_t(1) << 20;

/// The value of `d` at `b`; std::nullopt on int64 overflow.
std::optional<int64_t> evalDim(const Dim &d, const Binding &b) {
  int64_t v = d.c;
  for (unsigned s = 0; s < kNumSyms; ++s) {
    int64_t term = 0;
    if (__builtin_mul_overflow(d.k[s], b[s], &term) || __builtin_add_overflow(v, term, &v))
      return std::nullopt;
  }
  return v;
}

/// The result shape of `ggmlOp` over `srcs` (absent optional operands null) by its rule, as Dims.
/// The rule is a function of concrete shapes: it must hold at every vertex of the box of symbol
/// values (each symbol at its least value or kBig; for an affine dimension the extremes are at the
/// vertices), and the result is read back as an affine form from the least binding and one step in
/// each symbol, then checked at the vertices. Emits the rule's message and fails.
/// The bindings where the rules are evaluated: the vertices of the box of symbol values (the
/// first is every symbol at its least value), then the least binding plus one step in each symbol.
SmallVector<Binding> ruleBindings() {
  Binding lo{};
  for (unsigned s = 0; s < kNumSyms; ++s)
    lo[s] = static_cast<Sym>(s) == Sym::kv_head || static_cast<Sym>(s) == Sym::kv_head_swa ? 0 : 1;
  SmallVector<Binding> at;
  for (unsigned v = 0; v < (1u << kNumSyms); ++v) { // the vertices; v = 0 is lo
    Binding b = lo;
    for (unsigned s = 0; s < kNumSyms; ++s)
      if (v & (1u << s))
        b[s] = kBig;
    at.push_back(b);
  }
  for (unsigned s = 0; s < kNumSyms; ++s) { // lo + one step in symbol s
    Binding b = lo;
    ++b[s];
    at.push_back(b);
  }
  return at;
}

/// The shape of `v` at binding `b`; std::nullopt on int64 overflow.
std::optional<Ne4> shapeAt(Value v, const Binding &b) {
  Ne4 ne{};
  for (unsigned i = 0; i < 4; ++i) {
    std::optional<int64_t> x = evalDim(tensorOf(v).getNe(i), b);
    if (!x)
      return std::nullopt;
    ne[i] = *x;
  }
  return ne;
}

/// The result shape of `ggmlOp` over `srcs` (absent optional operands null) by its rule, as Dims.
/// The rule is a function of concrete shapes: it must hold at every vertex of the box of symbol
/// values (each symbol at its least value or kBig; for an affine dimension the extremes are at the
/// vertices), and the result is read back as an affine form from the least binding and one step in
/// each symbol, then checked at the vertices. Emits the rule's message and fails.
FailureOr<SmallVector<Dim, 4>> ruleShape(Operation *op, GgmlOp ggmlOp, ArrayRef<Value> srcs,
                                         const EncodedOpParams &params = {}) {
  const SmallVector<Binding> at = ruleBindings();
  const Binding &lo = at[0];
  // Messages name the operands' dimensions as they are written (n_tokens, n_kv+3).
  const DimNamer namer = [&](size_t i, int d) { return tensorOf(srcs[i]).getNe(d).str(); };
  const OpParamsRef p(params.iparams, params.fparams);
  SmallVector<Ne4> results;
  for (const Binding &b : at) {
    SrcShapes shapes;
    for (Value v : srcs) {
      shapes.emplace_back();
      if (!v)
        continue;
      shapes.back() = shapeAt(v, b);
      if (!shapes.back()) {
        op->emitOpError() << "an operand dimension overflows int64";
        return failure();
      }
    }
    Result<Ne4> r = InferShape(ggmlOp, shapes, p, namer);
    if (!r.ok()) {
      op->emitOpError() << r.status().message();
      return failure();
    }
    results.push_back(*r);
  }
  const unsigned nv = 1u << kNumSyms;
  SmallVector<Dim, 4> shape(4);
  for (unsigned i = 0; i < 4; ++i) {
    Dim &d = shape[i];
    d.c = results[0][i];
    for (unsigned s = 0; s < kNumSyms; ++s) {
      d.k[s] = results[nv + s][i] - results[0][i];
      d.c -= d.k[s] * lo[s];
    }
    for (unsigned v = 0; v < nv; ++v)
      if (evalDim(d, at[v]) != results[v][i]) {
        op->emitOpError() << GgmlOpName(ggmlOp) << ": cannot express the result's ne" << i
                          << " as one dimension: it is not affine in the symbols";
        return failure();
      }
  }
  return shape;
}

/// The result must be `ggmlOp`'s rule's shape with `element`; `rule` names ggml's rule.
LogicalResult checkRule(Operation *op, GgmlOp ggmlOp, ArrayRef<Value> srcs, Type element,
                        StringRef rule, const EncodedOpParams &params = {}) {
  FailureOr<SmallVector<Dim, 4>> shape = ruleShape(op, ggmlOp, srcs, params);
  if (failed(shape))
    return failure();
  return checkResult(op, *shape, element, rule);
}

/// The result shape of a kGiven op (an argument of its constructor) must pass the op's CheckShape
/// at every binding of ruleBindings.
LogicalResult checkGiven(Operation *op, GgmlOp ggmlOp, ArrayRef<Value> srcs) {
  for (const Binding &b : ruleBindings()) {
    SrcShapes shapes;
    for (Value v : srcs)
      shapes.push_back(shapeAt(v, b));
    std::optional<Ne4> result = shapeAt(op->getResult(0), b);
    if (!result || llvm::any_of(shapes, [](const std::optional<Ne4> &s) { return !s; }))
      return op->emitOpError() << "a dimension overflows int64";
    if (Status st = CheckShape(ggmlOp, shapes, OpParamsRef(), *result); !st.ok())
      return op->emitOpError() << st.message();
  }
  return success();
}

LogicalResult verifyBinary(Operation *op, GgmlOp ggmlOp, StringRef ggmlName) {
  return checkRule(op, ggmlOp, {op->getOperand(0), op->getOperand(1)},
                   tensorOf(op->getOperand(0)).getElementType(), (ggmlName + ": like a").str());
}

LogicalResult verifyUnary(Operation *op, GgmlOp ggmlOp, StringRef ggmlName) {
  return checkRule(op, ggmlOp, {op->getOperand(0)}, tensorOf(op->getOperand(0)).getElementType(),
                   (ggmlName + ": like a").str());
}

} // namespace

//===----------------------------------------------------------------------===//
// Leaves
//===----------------------------------------------------------------------===//

LogicalResult WeightOp::verify() {
  if (std::optional<uint32_t> layer = getLayer())
    if (static_cast<int32_t>(*layer) < -1)
      return emitOpError() << "layer must be -1 (input layer), a block index or n_layer (output "
                              "layer), got "
                           << static_cast<int32_t>(*layer);
  return checkNonEmptyName(*this, getGgufName(), "the GGUF tensor name");
}

LogicalResult WeightGroupOp::verify() {
  if (getParts().size() < 2)
    return emitOpError() << "needs at least two parts, got " << getParts().size();
  TensorType first = tensorOf(getParts().front());
  Dim rows = Dim::of(0);
  for (Value part : getParts()) {
    if (!part.getDefiningOp<WeightOp>())
      return emitOpError() << "every part must be a ggml.weight";
    TensorType t = tensorOf(part);
    if (t.getElementType() != first.getElementType() || t.getNe(0) != first.getNe(0) ||
        !t.getNe(2).is(1) || !t.getNe(3).is(1))
      return emitOpError() << "parts must share element type and ne0, with ne2 = ne3 = 1; got "
                           << first << " and " << t;
    rows = rows + t.getNe(1);
  }
  SmallVector<Dim, 4> shape = {first.getNe(0), rows, Dim::of(1), Dim::of(1)};
  if (failed(checkResult(*this, shape, first.getElementType(), "[ne0, sum of the parts' ne1]")))
    return failure();
  return checkNonEmptyName(*this, getNodeName(*this), "the group's name");
}

LogicalResult InputOp::verify() {
  return checkNonEmptyName(*this, getInputName(), "the input name");
}

LogicalResult KvCacheOp::verify() {
  // I32Attr is signless: read it as ggml's int32 layer index.
  int32_t layer = static_cast<int32_t>(getLayer());
  if (layer < 0)
    return emitOpError() << "layer must be >= 0, got " << layer;
  return checkNonEmptyName(*this, getCacheName(), "the cache tensor name");
}

//===----------------------------------------------------------------------===//
// Matrix products and lookups
//===----------------------------------------------------------------------===//

LogicalResult GetRowsOp::verify() {
  TensorType a = tensorOf(getA()), b = tensorOf(getB());
  if (!isI32(b))
    return emitOpError() << "b (row indices) must be i32, got " << b.getElementTypeName();
  Type element = isI32(a) ? a.getElementType() : Float32Type::get(getContext());
  return checkRule(*this, GgmlOp::GET_ROWS, {getA(), getB()}, element,
                   "ggml_get_rows: [a.ne0, b.ne0, b.ne1, b.ne2], f32");
}

LogicalResult MulMatOp::verify() {
  if (isTransposed(getA()))
    return emitOpError() << "a must not be transposed (ggml_mul_mat); use ggml.cont first";
  return checkRule(*this, GgmlOp::MUL_MAT, {getA(), getB()}, Float32Type::get(getContext()),
                   "ggml_mul_mat: [a.ne1, b.ne1, b.ne2, b.ne3], f32");
}

LogicalResult MulMatGluOp::verify() {
  if (isTransposed(getGate()) || isTransposed(getUp()))
    return emitOpError() << "gate and up must not be transposed (ggml_mul_mat)";
  TensorType gate = tensorOf(getGate()), up = tensorOf(getUp());
  if (gate.getElementType() != up.getElementType())
    return emitOpError() << "gate " << gate << " and up " << up
                         << " must have the same element type";
  const int32_t iparams[1] = {static_cast<int32_t>(getGlu())};
  Result<MulMatGluParams> p = DecodeMulMatGlu(OpParamsRef(iparams, 1, nullptr, 0));
  if (!p.ok())
    return emitOpError() << p.status().message();
  return checkRule(*this, GgmlOp::MUL_MAT_GLU, {getGate(), getX(), getUp()},
                   Float32Type::get(getContext()),
                   "ggml_mul_mat(gate, x): [gate.ne1, x.ne1, x.ne2, x.ne3], f32", Encode(*p));
}

LogicalResult MulMatIdOp::verify() {
  TensorType ids = tensorOf(getIds());
  if (isTransposed(getAs()))
    return emitOpError() << "as must not be transposed";
  if (!isI32(ids))
    return emitOpError() << "ids must be i32, got " << ids.getElementTypeName();
  return checkRule(*this, GgmlOp::MUL_MAT_ID, {getAs(), getB(), getIds()},
                   Float32Type::get(getContext()),
                   "ggml_mul_mat_id: [as.ne1, ids.ne0, b.ne2], f32");
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

LogicalResult AddOp::verify() { return verifyBinary(*this, GgmlOp::ADD, "ggml_add"); }
LogicalResult MulOp::verify() { return verifyBinary(*this, GgmlOp::MUL, "ggml_mul"); }
LogicalResult DivOp::verify() { return verifyBinary(*this, GgmlOp::DIV, "ggml_div"); }
LogicalResult ScaleOp::verify() { return verifyUnary(*this, GgmlOp::SCALE, "ggml_scale"); }
LogicalResult FillOp::verify() { return verifyUnary(*this, GgmlOp::FILL, "ggml_fill"); }
LogicalResult ClampOp::verify() { return verifyUnary(*this, GgmlOp::CLAMP, "ggml_clamp"); }
LogicalResult SiluOp::verify() { return verifyUnary(*this, GgmlOp::SILU, "ggml_silu"); }
LogicalResult GeluOp::verify() { return verifyUnary(*this, GgmlOp::GELU, "ggml_gelu"); }
LogicalResult SigmoidOp::verify() { return verifyUnary(*this, GgmlOp::SIGMOID, "ggml_sigmoid"); }
LogicalResult TanhOp::verify() { return verifyUnary(*this, GgmlOp::TANH, "ggml_tanh"); }

LogicalResult GluOp::verify() {
  TensorType a = tensorOf(getA());
  if (getOp() == GluKind::swiglu_oai) {
    if (!getB())
      return emitOpError() << "swiglu_oai needs both halves (ggml_swiglu_oai(a, b, alpha, limit))";
    const float fparams[2] = {getAlpha().convertToFloat(), getLimit().convertToFloat()};
    if (Result<SwiGluOaiParams> p = DecodeSwiGluOai(OpParamsRef(nullptr, 0, fparams, 2)); !p.ok())
      return emitOpError() << p.status().message();
    return checkRule(*this, GgmlOp::SWIGLU_OAI, {getA(), getB()}, a.getElementType(),
                     "ggml_swiglu_oai: like a");
  }
  if (getB()) {
    TensorType b = tensorOf(getB());
    if (a.getElementType() != b.getElementType())
      return emitOpError() << "a " << a << " and b " << b
                           << " must have the same element type (ggml_glu_split)";
    if (getSwapped())
      return emitOpError() << "swapped applies to the one-operand form only";
    return checkRule(*this, GgmlOp::SWIGLU, {getA(), getB()}, a.getElementType(),
                     "ggml_glu_split: like a");
  }
  return checkRule(*this, GgmlOp::SWIGLU, {getA()}, a.getElementType(),
                   "ggml_glu: [a.ne0 / 2, ...]");
}

//===----------------------------------------------------------------------===//
// Normalization, attention
//===----------------------------------------------------------------------===//

// The parameter rules are the plan's (ggml_op_params.h Decode*): one place for each.
static LogicalResult verifyNorm(Operation *op, GgmlOp ggmlOp, float eps, StringRef ggmlName) {
  const float fparams[1] = {eps};
  Result<NormParams> p = DecodeNorm(ggmlOp, OpParamsRef(nullptr, 0, fparams, 1));
  if (!p.ok())
    return op->emitOpError() << p.status().message();
  return verifyUnary(op, ggmlOp, ggmlName);
}

LogicalResult RmsNormOp::verify() {
  return verifyNorm(*this, GgmlOp::RMS_NORM, getEps().convertToFloat(), "ggml_rms_norm");
}

LogicalResult RmsNormMulOp::verify() {
  const float fparams[1] = {getEps().convertToFloat()};
  if (Result<NormParams> p = DecodeNorm(GgmlOp::RMS_NORM_MUL, OpParamsRef(nullptr, 0, fparams, 1));
      !p.ok())
    return emitOpError() << p.status().message();
  return verifyBinary(*this, GgmlOp::RMS_NORM_MUL, "ggml_mul(ggml_rms_norm(a), w)");
}

LogicalResult NormOp::verify() {
  return verifyNorm(*this, GgmlOp::NORM, getEps().convertToFloat(), "ggml_norm");
}

/// ROPE's parameters from the attributes of a ggml.rope or ggml.rope_set_rows.
template <typename OpT> static RopeParams ropeParamsOf(OpT op) {
  RopeParams rope;
  rope.n_dims = op.getNDims();
  rope.mode = static_cast<int>(op.getMode());
  rope.n_ctx_orig = op.getNCtxOrig();
  rope.freq_base = op.getFreqBase().convertToFloat();
  rope.freq_scale = op.getFreqScale().convertToFloat();
  rope.ext_factor = op.getExtFactor().convertToFloat();
  rope.attn_factor = op.getAttnFactor().convertToFloat();
  rope.beta_fast = op.getBetaFast().convertToFloat();
  rope.beta_slow = op.getBetaSlow().convertToFloat();
  rope.n_offs = op.getNOffs();
  return rope;
}

RopeParams getRopeParams(RopeOp op) { return ropeParamsOf(op); }
RopeParams getRopeParams(RopeSetRowsOp op) { return ropeParamsOf(op); }
RopeParams getRopeParams(RopeCpyOp op) { return ropeParamsOf(op); }

// The sources every ROPE form shares (ggml_rope_ext): i32 positions and optional f32 freq factors.
static LogicalResult verifyRopePosAndFactors(Operation *op, Value pos, Value freqFactors) {
  if (!isI32(tensorOf(pos)))
    return op->emitOpError() << "pos must be i32, got " << tensorOf(pos).getElementTypeName();
  if (freqFactors && !isF32(tensorOf(freqFactors)))
    return op->emitOpError() << "freq_factors must be f32, got "
                             << tensorOf(freqFactors).getElementTypeName();
  return success();
}

LogicalResult RopeCpyOp::verify() {
  TensorType x = tensorOf(getX()), dst = tensorOf(getDst());
  if (!isF32(x))
    return emitOpError() << "x must be f32, got " << x.getElementTypeName();
  if (failed(verifyRopePosAndFactors(*this, getPos(), getFreqFactors())))
    return failure();
  return checkRule(*this, GgmlOp::ROPE_CPY, {getX(), getPos(), getDst(), getFreqFactors()},
                   dst.getElementType(), "ggml_cpy(ggml_rope_ext(x, pos), dst): like dst",
                   Encode(ropeParamsOf(*this)));
}

LogicalResult RopeSetRowsOp::verify() {
  TensorType x = tensorOf(getX()), dst = tensorOf(getDst());
  if (!isF32(x))
    return emitOpError() << "x must be f32, got " << x.getElementTypeName();
  if (failed(verifyRopePosAndFactors(*this, getPos(), getFreqFactors())))
    return failure();
  Type it = tensorOf(getIdx()).getElementType();
  if (!it.isSignlessInteger(64) && !it.isSignlessInteger(32))
    return emitOpError() << "idx (the row indices) must be i64 or i32, got "
                         << tensorOf(getIdx()).getElementTypeName();
  if (isTransposed(getDst()))
    return emitOpError() << "the rows of dst must be contiguous (ggml_set_rows)";
  return checkRule(*this, GgmlOp::ROPE_SET_ROWS,
                   {getX(), getPos(), getDst(), getIdx(), getFreqFactors()}, dst.getElementType(),
                   "ggml_set_rows(dst, ggml_rope_ext(x, pos)): like dst",
                   Encode(ropeParamsOf(*this)));
}

LogicalResult RopeOp::verify() {
  TensorType a = tensorOf(getA());
  if (!isF32(a) && !a.getElementType().isF16())
    return emitOpError() << "a must be f32 or f16, got " << a.getElementTypeName();
  if (failed(verifyRopePosAndFactors(*this, getPos(), getFreqFactors())))
    return failure();
  return checkRule(*this, GgmlOp::ROPE, {getA(), getPos(), getFreqFactors()}, a.getElementType(),
                   "ggml_rope_ext: like a", Encode(ropeParamsOf(*this)));
}

// The sinks of ggml_soft_max_add_sinks / ggml_flash_attn_ext_add_sinks: f32 (ggml asserts it) and
// only beside a mask (the graph builder's form; the shape is the rule's).
static LogicalResult verifySinks(Operation *op, Value sinks, Value mask) {
  if (!sinks)
    return success();
  if (!isF32(tensorOf(sinks)))
    return op->emitOpError() << "sinks must be f32, got " << tensorOf(sinks).getElementTypeName();
  if (!mask)
    return op->emitOpError() << "sinks require a mask";
  return success();
}

LogicalResult AddIdOp::verify() {
  TensorType ids = tensorOf(getIds());
  if (!isI32(ids))
    return emitOpError() << "ids must be i32, got " << ids.getElementTypeName();
  return checkRule(*this, GgmlOp::ADD_ID, {getA(), getB(), getIds()},
                   tensorOf(getA()).getElementType(), "ggml_add_id: like a");
}

LogicalResult SoftMaxOp::verify() {
  if (failed(verifySinks(*this, getSinks(), getMask())))
    return failure();
  TensorType a = tensorOf(getA());
  if (getMask()) {
    TensorType m = tensorOf(getMask());
    if (!isF32(m) && !m.getElementType().isF16())
      return emitOpError() << "mask must be f16 or f32, got " << m.getElementTypeName();
  } else if (getMaxBias().convertToFloat() > 0.0f) {
    return emitOpError() << "max_bias > 0 (ALiBi) requires a mask";
  }
  return checkRule(*this, GgmlOp::SOFT_MAX, {getA(), getMask(), getSinks()}, a.getElementType(),
                   "ggml_soft_max_ext: like a");
}

LogicalResult FlashAttnExtOp::verify() {
  if (failed(verifySinks(*this, getSinks(), getMask())))
    return failure();
  TensorType q = tensorOf(getQ());
  if (!isF32(q))
    return emitOpError() << "q must be f32, got " << q.getElementTypeName();
  if (getMask()) {
    TensorType m = tensorOf(getMask());
    if (!m.getElementType().isF16())
      return emitOpError() << "mask must be f16, got " << m.getElementTypeName();
  } else if (getMaxBias().convertToFloat() > 0.0f) {
    return emitOpError() << "max_bias > 0 (ALiBi) requires a mask";
  }
  const int32_t prec = getPrec();
  const float fparams[3] = {getScale().convertToFloat(), getMaxBias().convertToFloat(),
                            getLogitSoftcap().convertToFloat()};
  if (Result<FlashAttnExtParams> p = DecodeFlashAttnExt(OpParamsRef(&prec, 1, fparams, 3)); !p.ok())
    return emitOpError() << p.status().message();
  return checkRule(*this, GgmlOp::FLASH_ATTN_EXT, {getQ(), getK(), getV(), getMask(), getSinks()},
                   Float32Type::get(getContext()),
                   "ggml_flash_attn_ext: [v.ne0, q.ne2, q.ne1, q.ne3], f32");
}

LogicalResult SumRowsOp::verify() {
  return checkRule(*this, GgmlOp::SUM_ROWS, {getA()}, tensorOf(getA()).getElementType(),
                   "ggml_sum_rows: [1, a.ne1, a.ne2, a.ne3]");
}

LogicalResult ArgsortOp::verify() {
  TensorType a = tensorOf(getA());
  if (!isF32(a))
    return emitOpError() << "a must be f32, got " << a.getElementTypeName();
  return checkRule(*this, GgmlOp::ARGSORT, {getA()}, IntegerType::get(getContext(), 32),
                   "ggml_argsort: a's shape, i32");
}

LogicalResult TopKOp::verify() {
  TensorType a = tensorOf(getA());
  if (!isF32(a))
    return emitOpError() << "a must be f32, got " << a.getElementTypeName();
  return checkRule(*this, GgmlOp::TOP_K, {getA()}, IntegerType::get(getContext(), 32),
                   "ggml_top_k: [k, a.ne1, a.ne2, a.ne3], i32",
                   EncodedOpParams{{static_cast<int32_t>(getK())}, {}});
}

//===----------------------------------------------------------------------===//
// Data movement and views
//===----------------------------------------------------------------------===//

LogicalResult CpyOp::verify() {
  return checkRule(*this, GgmlOp::CPY, {getA(), getB()}, tensorOf(getB()).getElementType(),
                   "ggml_cpy: like b");
}

LogicalResult CastOp::verify() {
  return checkRule(*this, GgmlOp::CPY, {getA()}, tensorOf(getResult()).getElementType(),
                   "ggml_cast: a's shape");
}

LogicalResult SetRowsOp::verify() {
  TensorType b = tensorOf(getB()), c = tensorOf(getC());
  if (!isF32(b))
    return emitOpError() << "b (the rows) must be f32, got " << b.getElementTypeName();
  Type ct = c.getElementType();
  if (!ct.isSignlessInteger(64) && !ct.isSignlessInteger(32))
    return emitOpError() << "c (the row indices) must be i64 or i32, got "
                         << c.getElementTypeName();
  if (isTransposed(getA()) || isTransposed(getB()))
    return emitOpError() << "the rows of a and b must be contiguous (ggml_set_rows)";
  // The rule takes ggml's source order b, c, a (a is the destination).
  return checkRule(*this, GgmlOp::SET_ROWS, {getB(), getC(), getA()},
                   tensorOf(getA()).getElementType(), "ggml_set_rows: like a");
}

LogicalResult ContOp::verify() {
  TensorType a = tensorOf(getA()), r = tensorOf(getResult());
  if (r.getElementType() != a.getElementType())
    return emitOpError() << "result element type must be a's (" << a.getElementTypeName()
                         << "), got " << r.getElementTypeName() << " (ggml_cont)";
  return checkCount(*this, a, r, "a and the result", "ggml_cont_4d");
}

LogicalResult ViewOp::verify() {
  TensorType a = tensorOf(getA()), r = tensorOf(getResult());
  if (r.getElementType() != a.getElementType())
    return emitOpError() << "result element type must be a's (" << a.getElementTypeName()
                         << "), got " << r.getElementTypeName() << " (ggml_view)";
  ArrayRef<Dim> nb = getNb().getValues();
  if (nb.size() != 3)
    return emitOpError() << "nb must hold the 3 byte strides nb1, nb2, nb3, got " << nb.size();
  Dim offset = getOffset() ? getOffset()->getValue() : Dim::of(0);
  for (const Dim &d : nb)
    if (d.isStatic() && d.size() < 0)
      return emitOpError() << "strides must be >= 0";
  if (offset.isStatic() && offset.size() < 0)
    return emitOpError() << "offset must be >= 0, got " << offset.size();
  // ggml_view_impl: offset + bytes spanned by the view <= ggml_nbytes(a).
  std::optional<uint64_t> aBytes = a.getStaticBytes();
  bool allStatic = r.hasStaticShape() && offset.isStatic() &&
                   llvm::all_of(nb, [](const Dim &d) { return d.isStatic(); });
  if (!aBytes || !allStatic)
    return success();
  if (llvm::any_of(r.getShape(), [](const Dim &d) { return d.is(0); }))
    return success();
  // Checked arithmetic: a huge stride must not wrap the span below a's size.
  uint64_t span = 0, end = 0;
  bool overflow =
      __builtin_mul_overflow(static_cast<uint64_t>(r.getNe(0).size() / r.getBlockSize()),
                             static_cast<uint64_t>(r.getElementBytes()), &span);
  for (unsigned i = 1; i < 4; ++i) {
    uint64_t term = 0;
    overflow |= __builtin_mul_overflow(static_cast<uint64_t>(r.getNe(i).size() - 1),
                                       static_cast<uint64_t>(nb[i - 1].size()), &term);
    overflow |= __builtin_add_overflow(span, term, &span);
  }
  overflow |= __builtin_add_overflow(static_cast<uint64_t>(offset.size()), span, &end);
  if (overflow)
    return emitOpError()
           << "view spans more than 2^64 bytes (strides or offset too large; ggml_view)";
  if (end > *aBytes)
    return emitOpError() << "view of " << span << " bytes at offset " << offset.size()
                         << " exceeds a's " << *aBytes << " bytes (ggml_view)";
  return success();
}

LogicalResult ReshapeOp::verify() {
  TensorType a = tensorOf(getA()), r = tensorOf(getResult());
  if (r.getElementType() != a.getElementType())
    return emitOpError() << "result element type must be a's (" << a.getElementTypeName()
                         << "), got " << r.getElementTypeName();
  if (isKnownNonContiguous(getA()))
    return emitOpError() << "a must be contiguous (ggml_reshape asserts ggml_is_contiguous); "
                            "insert ggml.cont after a permute, transpose or strided view";
  return checkCount(*this, a, r, "a and the result", "ggml_reshape");
}

LogicalResult PermuteOp::verify() {
  ArrayRef<int32_t> axes = getAxes();
  return checkRule(*this, GgmlOp::PERMUTE, {getA()}, tensorOf(getA()).getElementType(),
                   "ggml_permute: ne[axes[i]] = a.ne[i]",
                   EncodedOpParams{std::vector<int32_t>(axes.begin(), axes.end()), {}});
}

LogicalResult TransposeOp::verify() {
  return checkRule(*this, GgmlOp::TRANSPOSE, {getA()}, tensorOf(getA()).getElementType(),
                   "ggml_transpose: [a.ne1, a.ne0, a.ne2, a.ne3]");
}

LogicalResult RepeatOp::verify() {
  TensorType a = tensorOf(getA()), r = tensorOf(getResult());
  if (r.getElementType() != a.getElementType())
    return emitOpError() << "result element type must be a's (" << a.getElementTypeName()
                         << "), got " << r.getElementTypeName() << " (ggml_repeat_4d)";
  return checkGiven(*this, GgmlOp::REPEAT, {getA()});
}

LogicalResult ConcatOp::verify() {
  TensorType a = tensorOf(getA()), b = tensorOf(getB());
  if (a.getElementType() != b.getElementType())
    return emitOpError() << "a and b must have the same element type (ggml_concat)";
  return checkRule(*this, GgmlOp::CONCAT, {getA(), getB()}, a.getElementType(), "ggml_concat",
                   EncodedOpParams{{static_cast<int32_t>(getDim())}, {}});
}

//===----------------------------------------------------------------------===//
// State-space models
//===----------------------------------------------------------------------===//

LogicalResult SsmConvOp::verify() {
  return checkRule(*this, GgmlOp::SSM_CONV, {getSx(), getC()}, Float32Type::get(getContext()),
                   "ggml_ssm_conv: [d_inner, sx.ne0 - d_conv + 1, sx.ne2], f32");
}

LogicalResult SsmScanOp::verify() {
  if (getIds() && !isI32(tensorOf(getIds())))
    return emitOpError() << "ids must be i32, got " << tensorOf(getIds()).getElementTypeName();
  // ggml Feb 2025 without ids: [nelements(x) + nelements(s)]; ggml Jun 2025 with ids:
  // [nelements(x) + d_state*head_dim*n_head*n_seqs].
  return checkRule(*this, GgmlOp::SSM_SCAN,
                   {getS(), getX(), getDt(), getA(), getB(), getC(), getIds()},
                   Float32Type::get(getContext()),
                   getIds() ? "ggml_ssm_scan: [nelements(x) + d_state*head_dim*n_head*n_seqs], f32"
                            : "ggml_ssm_scan: [nelements(x) + nelements(s)], f32");
}

//===----------------------------------------------------------------------===//
// Custom assembly: `nb [s1, s2, s3] (offset o)?` of ggml.view
//===----------------------------------------------------------------------===//

ParseResult parseViewLayout(OpAsmParser &parser, DimsAttr &nb, DimAttr &offset) {
  SmallVector<Dim> strides;
  if (parser.parseKeyword("nb") ||
      parser.parseCommaSeparatedList(AsmParser::Delimiter::Square,
                                     [&]() { return parseDim(parser, strides.emplace_back()); }))
    return failure();
  nb = DimsAttr::get(parser.getContext(), strides);
  if (succeeded(parser.parseOptionalKeyword("offset"))) {
    Dim o;
    if (parseDim(parser, o))
      return failure();
    offset = DimAttr::get(parser.getContext(), o);
  }
  return success();
}

void printViewLayout(OpAsmPrinter &printer, ViewOp, DimsAttr nb, DimAttr offset) {
  printer << "nb [";
  for (auto [i, d] : llvm::enumerate(nb.getValues()))
    printer << (i ? ", " : "") << d.str();
  printer << "]";
  if (offset)
    printer << " offset " << offset.getValue().str();
}

} // namespace stowage::ggml
