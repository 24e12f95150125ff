//===- GGMLOps.cpp - ggml op verifiers ------------------------------------===//
//
// Each verifier checks what the ggml constructor of that op asserts (ggml/src/ggml.c), so that a
// graph that verifies here can be built by ggml. Symbolic dimensions are compared structurally.
//
//===----------------------------------------------------------------------===//

#include "stowage/Dialect/GGML/IR/GGMLOps.h"

#include <limits>

#include "mlir/IR/Builders.h"
#include "stowage/runtime/ggml_op_params.h"
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

std::string shapeOf(TensorType t) { return t.shapeString(); }

/// The result must have exactly `shape` and `element`; `rule` names ggml's rule for it.
LogicalResult checkResult(Operation *op, ArrayRef<Dim> shape, Type element, StringRef rule) {
  auto got = cast<TensorType>(op->getResult(0).getType());
  if (got.getShape() == shape && got.getElementType() == element)
    return success();
  return op->emitOpError() << "result must be " << formatTensor(shape, element) << " (" << rule
                           << "), got " << got;
}

LogicalResult checkSameAsA(Operation *op, TensorType a, StringRef rule) {
  return checkResult(op, a.getShape(), a.getElementType(), rule);
}

bool isI32(TensorType t) { return t.getElementType().isSignlessInteger(32); }
bool isF32(TensorType t) { return t.getElementType().isF32(); }

/// x.ne[i] is a multiple of y.ne[i] (ggml's broadcast rule for one dimension).
bool dimRepeats(const Dim &y, const Dim &x) {
  if (y.is(1) || y == x)
    return true;
  if (x.isStatic() && y.isStatic())
    return y.size() > 0 && x.size() % y.size() == 0;
  return false;
}

/// ggml_can_repeat(b, a): every a.ne[i] is a multiple of b.ne[i].
bool canRepeat(TensorType b, TensorType a) {
  for (unsigned i = 0; i < 4; ++i)
    if (!dimRepeats(b.getNe(i), a.getNe(i)))
      return false;
  return true;
}

/// x >= y for every binding of the symbols (all symbols are >= 0): provable when every term of
/// x - y is >= 0.
bool dimAtLeast(const Dim &x, const Dim &y) {
  Dim d = x - y;
  if (d.c < 0)
    return false;
  return llvm::all_of(d.k, [](int64_t v) { return v >= 0; });
}

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

LogicalResult verifyBinary(Operation *op, StringRef ggmlName) {
  TensorType a = tensorOf(op->getOperand(0)), b = tensorOf(op->getOperand(1));
  if (!canRepeat(b, a))
    return op->emitOpError() << "b " << shapeOf(b) << " cannot be repeated to a " << shapeOf(a)
                             << " (" << ggmlName << ": ggml_can_repeat(b, a))";
  return checkSameAsA(op, a, (ggmlName + ": like a").str());
}

LogicalResult verifyUnary(Operation *op, StringRef ggmlName) {
  return checkSameAsA(op, tensorOf(op->getOperand(0)), (ggmlName + ": like a").str());
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
  if (!b.getNe(3).is(1))
    return emitOpError() << "b must have ne3 == 1 (ggml_get_rows), got " << shapeOf(b);
  if (a.getNe(2) != b.getNe(1))
    return emitOpError() << "a.ne2 (" << a.getNe(2).str() << ") must equal b.ne1 ("
                         << b.getNe(1).str() << ") (ggml_get_rows)";
  Type element = isI32(a) ? a.getElementType() : Float32Type::get(getContext());
  return checkResult(*this, {a.getNe(0), b.getNe(0), b.getNe(1), b.getNe(2)}, element,
                     "ggml_get_rows: [a.ne0, b.ne0, b.ne1, b.ne2], f32");
}

LogicalResult MulMatOp::verify() {
  TensorType a = tensorOf(getA()), b = tensorOf(getB());
  if (isTransposed(getA()))
    return emitOpError() << "a must not be transposed (ggml_mul_mat); use ggml.cont first";
  if (a.getNe(0) != b.getNe(0))
    return emitOpError() << "a.ne0 (" << a.getNe(0).str() << ") must equal b.ne0 ("
                         << b.getNe(0).str() << ") (ggml_can_mul_mat)";
  if (!dimRepeats(a.getNe(2), b.getNe(2)) || !dimRepeats(a.getNe(3), b.getNe(3)))
    return emitOpError() << "a " << shapeOf(a) << " cannot be broadcast over the batch "
                         << "dimensions of b " << shapeOf(b) << " (ggml_can_mul_mat)";
  return checkResult(*this, {a.getNe(1), b.getNe(1), b.getNe(2), b.getNe(3)},
                     Float32Type::get(getContext()),
                     "ggml_mul_mat: [a.ne1, b.ne1, b.ne2, b.ne3], f32");
}

LogicalResult MulMatIdOp::verify() {
  TensorType as = tensorOf(getAs()), b = tensorOf(getB()), ids = tensorOf(getIds());
  if (isTransposed(getAs()))
    return emitOpError() << "as must not be transposed";
  if (!isI32(ids))
    return emitOpError() << "ids must be i32, got " << ids.getElementTypeName();
  if (!as.getNe(3).is(1))
    return emitOpError() << "as must be 3-D (one matrix per expert), got " << shapeOf(as);
  if (!b.getNe(3).is(1))
    return emitOpError() << "b must be 3-D, got " << shapeOf(b);
  if (!ids.getNe(2).is(1) || !ids.getNe(3).is(1))
    return emitOpError() << "ids must be 2-D [n_expert_used, n_tokens], got " << shapeOf(ids);
  if (ids.getNe(1) != b.getNe(2))
    return emitOpError() << "ids.ne1 (" << ids.getNe(1).str() << ") must equal b.ne2 ("
                         << b.getNe(2).str() << "): one expert list per token";
  if (as.getNe(0) != b.getNe(0))
    return emitOpError() << "as.ne0 (" << as.getNe(0).str() << ") must equal b.ne0 ("
                         << b.getNe(0).str() << ")";
  if (!dimRepeats(b.getNe(1), ids.getNe(0)))
    return emitOpError() << "ids.ne0 (" << ids.getNe(0).str() << ") must be a multiple of b.ne1 ("
                         << b.getNe(1).str() << ")";
  return checkResult(*this, {as.getNe(1), ids.getNe(0), b.getNe(2), Dim::of(1)},
                     Float32Type::get(getContext()),
                     "ggml_mul_mat_id: [as.ne1, ids.ne0, b.ne2], f32");
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

LogicalResult AddOp::verify() { return verifyBinary(*this, "ggml_add"); }
LogicalResult MulOp::verify() { return verifyBinary(*this, "ggml_mul"); }
LogicalResult DivOp::verify() { return verifyBinary(*this, "ggml_div"); }
LogicalResult ScaleOp::verify() { return verifyUnary(*this, "ggml_scale"); }
LogicalResult SiluOp::verify() { return verifyUnary(*this, "ggml_silu"); }
LogicalResult GeluOp::verify() { return verifyUnary(*this, "ggml_gelu"); }
LogicalResult SigmoidOp::verify() { return verifyUnary(*this, "ggml_sigmoid"); }

LogicalResult GluOp::verify() {
  TensorType a = tensorOf(getA());
  if (getB()) {
    TensorType b = tensorOf(getB());
    if (a.getShape() != b.getShape() || a.getElementType() != b.getElementType())
      return emitOpError() << "a " << a << " and b " << b
                           << " must have the same shape and type (ggml_glu_split)";
    if (getSwapped())
      return emitOpError() << "swapped applies to the one-operand form only";
    return checkSameAsA(*this, a, "ggml_glu_split: like a");
  }
  Dim ne0 = a.getNe(0);
  if (!ne0.isStatic() || ne0.size() % 2 != 0)
    return emitOpError() << "a.ne0 (" << ne0.str()
                         << ") must be a static even size: it holds both halves (ggml_glu)";
  SmallVector<Dim, 4> shape(a.getShape());
  shape[0] = Dim::of(ne0.size() / 2);
  return checkResult(*this, shape, a.getElementType(), "ggml_glu: [a.ne0 / 2, ...]");
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
  return verifyUnary(op, ggmlName);
}

LogicalResult RmsNormOp::verify() {
  return verifyNorm(*this, GgmlOp::RMS_NORM, getEps().convertToFloat(), "ggml_rms_norm");
}

LogicalResult NormOp::verify() {
  return verifyNorm(*this, GgmlOp::NORM, getEps().convertToFloat(), "ggml_norm");
}

LogicalResult RopeOp::verify() {
  TensorType a = tensorOf(getA()), pos = tensorOf(getPos());
  if (!isF32(a) && !a.getElementType().isF16())
    return emitOpError() << "a must be f32 or f16, got " << a.getElementTypeName();
  if (!isI32(pos))
    return emitOpError() << "pos must be i32, got " << pos.getElementTypeName();
  if (!pos.getNe(1).is(1) || !pos.getNe(2).is(1) || !pos.getNe(3).is(1))
    return emitOpError() << "pos must be a vector [n_tokens], got " << shapeOf(pos);
  if (a.getNe(2) != pos.getNe(0))
    return emitOpError() << "a.ne2 (" << a.getNe(2).str() << ") must equal pos.ne0 ("
                         << pos.getNe(0).str() << "): one position per token (ggml_rope_ext)";
  int32_t nDims = getNDims();
  RopeParams rope;
  rope.n_dims = nDims;
  const int64_t ne0 =
      a.getNe(0).isStatic() ? a.getNe(0).size() : std::numeric_limits<int64_t>::max();
  if (Status st = CheckRopeDims(rope, ne0); !st.ok())
    return emitOpError() << st.message() << " (the head size a.ne0)";
  if (getFreqFactors()) {
    TensorType f = tensorOf(getFreqFactors());
    if (!isF32(f))
      return emitOpError() << "freq_factors must be f32, got " << f.getElementTypeName();
    if (f.getNe(0).isStatic() && f.getNe(0).size() < nDims / 2)
      return emitOpError() << "freq_factors.ne0 (" << f.getNe(0).size()
                           << ") must be >= n_dims / 2 (" << nDims / 2 << ") (ggml_rope_ext)";
  }
  return checkSameAsA(*this, a, "ggml_rope_ext: like a");
}

LogicalResult SoftMaxOp::verify() {
  TensorType a = tensorOf(getA());
  if (getMask()) {
    TensorType m = tensorOf(getMask());
    if (!isF32(m) && !m.getElementType().isF16())
      return emitOpError() << "mask must be f16 or f32, got " << m.getElementTypeName();
    if (m.getNe(0) != a.getNe(0))
      return emitOpError() << "mask.ne0 (" << m.getNe(0).str() << ") must equal a.ne0 ("
                           << a.getNe(0).str() << ") (ggml_soft_max_ext)";
    if (!dimAtLeast(m.getNe(1), a.getNe(1)))
      return emitOpError() << "mask.ne1 (" << m.getNe(1).str() << ") must be >= a.ne1 ("
                           << a.getNe(1).str() << ") (ggml_soft_max_ext)";
    if (!dimRepeats(m.getNe(2), a.getNe(2)) || !dimRepeats(m.getNe(3), a.getNe(3)))
      return emitOpError() << "mask " << shapeOf(m) << " cannot be broadcast over a " << shapeOf(a)
                           << " (ggml_soft_max_ext)";
  } else if (getMaxBias().convertToFloat() > 0.0f) {
    return emitOpError() << "max_bias > 0 (ALiBi) requires a mask";
  }
  return checkSameAsA(*this, a, "ggml_soft_max_ext: like a");
}

LogicalResult FlashAttnExtOp::verify() {
  TensorType q = tensorOf(getQ()), k = tensorOf(getK()), v = tensorOf(getV());
  if (!isF32(q))
    return emitOpError() << "q must be f32, got " << q.getElementTypeName();
  if (k.getNe(0) != q.getNe(0))
    return emitOpError() << "k.ne0 (" << k.getNe(0).str() << ") must equal q.ne0 ("
                         << q.getNe(0).str() << ") (ggml_flash_attn_ext)";
  if (v.getNe(1) != k.getNe(1) || v.getNe(2) != k.getNe(2) || v.getNe(3) != k.getNe(3))
    return emitOpError() << "v " << shapeOf(v) << " must have k's n_kv and heads " << shapeOf(k)
                         << " (ggml_flash_attn_ext)";
  if (!dimRepeats(k.getNe(2), q.getNe(2)) || !dimRepeats(k.getNe(3), q.getNe(3)))
    return emitOpError() << "k " << shapeOf(k) << " cannot be broadcast over the heads of q "
                         << shapeOf(q) << " (ggml_flash_attn_ext)";
  if (getMask()) {
    TensorType m = tensorOf(getMask());
    if (!m.getElementType().isF16())
      return emitOpError() << "mask must be f16, got " << m.getElementTypeName();
    if (m.getNe(0) != k.getNe(1))
      return emitOpError() << "mask.ne0 (" << m.getNe(0).str() << ") must equal k.ne1 ("
                           << k.getNe(1).str() << ") (ggml_flash_attn_ext)";
    if (!dimAtLeast(m.getNe(1), q.getNe(1)))
      return emitOpError() << "mask.ne1 (" << m.getNe(1).str() << ") must be >= q.ne1 ("
                           << q.getNe(1).str() << ") (ggml_flash_attn_ext)";
    if (!m.getNe(2).is(1) || !m.getNe(3).is(1))
      return emitOpError() << "mask must be 2-D, got " << shapeOf(m) << " (ggml_flash_attn_ext)";
  } else if (getMaxBias().convertToFloat() > 0.0f) {
    return emitOpError() << "max_bias > 0 (ALiBi) requires a mask";
  }
  const int32_t prec = getPrec();
  const float fparams[3] = {getScale().convertToFloat(), getMaxBias().convertToFloat(),
                            getLogitSoftcap().convertToFloat()};
  if (Result<FlashAttnExtParams> p = DecodeFlashAttnExt(OpParamsRef(&prec, 1, fparams, 3)); !p.ok())
    return emitOpError() << p.status().message();
  return checkResult(*this, {v.getNe(0), q.getNe(2), q.getNe(1), q.getNe(3)},
                     Float32Type::get(getContext()),
                     "ggml_flash_attn_ext: [v.ne0, q.ne2, q.ne1, q.ne3], f32");
}

LogicalResult SumRowsOp::verify() {
  TensorType a = tensorOf(getA());
  return checkResult(*this, {Dim::of(1), a.getNe(1), a.getNe(2), a.getNe(3)}, a.getElementType(),
                     "ggml_sum_rows: [1, a.ne1, a.ne2, a.ne3]");
}

LogicalResult ArgsortOp::verify() {
  TensorType a = tensorOf(getA());
  if (!isF32(a))
    return emitOpError() << "a must be f32, got " << a.getElementTypeName();
  return checkResult(*this, a.getShape(), IntegerType::get(getContext(), 32),
                     "ggml_argsort: a's shape, i32");
}

LogicalResult TopKOp::verify() {
  TensorType a = tensorOf(getA());
  if (!isF32(a))
    return emitOpError() << "a must be f32, got " << a.getElementTypeName();
  int32_t k = getK();
  if (Result<TopKParams> p = DecodeTopK(OpParamsRef(&k, 1, nullptr, 0)); !p.ok())
    return emitOpError() << p.status().message();
  if (a.getNe(0).isStatic() && a.getNe(0).size() < k)
    return emitOpError() << "k (" << k << ") must not exceed a.ne0 (" << a.getNe(0).size()
                         << ") (ggml_top_k)";
  return checkResult(*this, {Dim::of(k), a.getNe(1), a.getNe(2), a.getNe(3)},
                     IntegerType::get(getContext(), 32),
                     "ggml_top_k: [k, a.ne1, a.ne2, a.ne3], i32");
}

//===----------------------------------------------------------------------===//
// Data movement and views
//===----------------------------------------------------------------------===//

LogicalResult CpyOp::verify() {
  TensorType a = tensorOf(getA()), b = tensorOf(getB());
  if (failed(checkCount(*this, a, b, "a and b", "ggml_cpy")))
    return failure();
  return checkResult(*this, b.getShape(), b.getElementType(), "ggml_cpy: like b");
}

LogicalResult CastOp::verify() {
  TensorType a = tensorOf(getA()), r = tensorOf(getResult());
  return checkResult(*this, a.getShape(), r.getElementType(), "ggml_cast: a's shape");
}

LogicalResult SetRowsOp::verify() {
  TensorType a = tensorOf(getA()), b = tensorOf(getB()), c = tensorOf(getC());
  auto mismatch = [&](StringRef what, const Dim &got, StringRef name, const Dim &want) {
    return emitOpError() << what << " (" << got.str() << ") must equal " << name << " ("
                         << want.str() << ") (ggml_set_rows)";
  };
  if (!isF32(b))
    return emitOpError() << "b (the rows) must be f32, got " << b.getElementTypeName();
  Type ct = c.getElementType();
  if (!ct.isSignlessInteger(64) && !ct.isSignlessInteger(32))
    return emitOpError() << "c (the row indices) must be i64 or i32, got "
                         << c.getElementTypeName();
  if (isTransposed(getA()) || isTransposed(getB()))
    return emitOpError() << "the rows of a and b must be contiguous (ggml_set_rows)";
  if (a.getNe(0) != b.getNe(0))
    return mismatch("a.ne0", a.getNe(0), "b.ne0", b.getNe(0));
  if (a.getNe(2) != b.getNe(2))
    return mismatch("a.ne2", a.getNe(2), "b.ne2", b.getNe(2));
  if (a.getNe(3) != b.getNe(3))
    return mismatch("a.ne3", a.getNe(3), "b.ne3", b.getNe(3));
  if (b.getNe(1) != c.getNe(0))
    return mismatch("b.ne1", b.getNe(1), "c.ne0 (one index per row)", c.getNe(0));
  if (!dimRepeats(c.getNe(1), b.getNe(2)) || !dimRepeats(c.getNe(2), b.getNe(3)))
    return emitOpError() << "c " << shapeOf(c) << " cannot be broadcast over b " << shapeOf(b)
                         << " (ggml_set_rows)";
  if (!c.getNe(3).is(1))
    return emitOpError() << "c must have ne3 == 1, got " << shapeOf(c);
  return checkSameAsA(*this, a, "ggml_set_rows: like a");
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
  TensorType a = tensorOf(getA());
  ArrayRef<int32_t> axes = getAxes();
  if (Result<PermuteParams> p = DecodePermute(OpParamsRef(axes.data(), axes.size(), nullptr, 0));
      !p.ok())
    return emitOpError() << p.status().message();
  SmallVector<Dim, 4> shape(4);
  for (unsigned i = 0; i < 4; ++i)
    shape[axes[i]] = a.getNe(i);
  return checkResult(*this, shape, a.getElementType(), "ggml_permute: ne[axes[i]] = a.ne[i]");
}

LogicalResult TransposeOp::verify() {
  TensorType a = tensorOf(getA());
  return checkResult(*this, {a.getNe(1), a.getNe(0), a.getNe(2), a.getNe(3)}, a.getElementType(),
                     "ggml_transpose: [a.ne1, a.ne0, a.ne2, a.ne3]");
}

LogicalResult ConcatOp::verify() {
  TensorType a = tensorOf(getA()), b = tensorOf(getB());
  int32_t dim = getDim();
  if (Result<ConcatParams> p = DecodeConcat(OpParamsRef(&dim, 1, nullptr, 0)); !p.ok())
    return emitOpError() << p.status().message();
  if (a.getElementType() != b.getElementType())
    return emitOpError() << "a and b must have the same element type (ggml_concat)";
  SmallVector<Dim, 4> shape(a.getShape());
  for (int i = 0; i < 4; ++i) {
    if (i == dim)
      continue;
    if (a.getNe(i) != b.getNe(i))
      return emitOpError() << "a " << shapeOf(a) << " and b " << shapeOf(b)
                           << " must agree in every dimension but " << dim << " (ggml_concat)";
  }
  shape[dim] = a.getNe(dim) + b.getNe(dim);
  return checkResult(*this, shape, a.getElementType(), "ggml_concat");
}

//===----------------------------------------------------------------------===//
// State-space models
//===----------------------------------------------------------------------===//

LogicalResult SsmConvOp::verify() {
  TensorType sx = tensorOf(getSx()), c = tensorOf(getC());
  if (!sx.getNe(3).is(1))
    return emitOpError() << "sx must be 3-D, got " << shapeOf(sx);
  if (!c.getNe(2).is(1) || !c.getNe(3).is(1))
    return emitOpError() << "c must be a matrix [d_conv, d_inner], got " << shapeOf(c);
  if (!c.getNe(0).isStatic() || c.getNe(0).size() < 1)
    return emitOpError() << "d_conv = c.ne0 must be a static size >= 1";
  int64_t dConv = c.getNe(0).size();
  if (sx.getNe(1) != c.getNe(1))
    return emitOpError() << "sx.ne1 (" << sx.getNe(1).str() << ") must equal d_inner = c.ne1 ("
                         << c.getNe(1).str() << ") (ggml_ssm_conv)";
  Dim nT = sx.getNe(0) - Dim::of(dConv - 1);
  if (nT.isStatic() && nT.size() < 0)
    return emitOpError() << "sx.ne0 (" << sx.getNe(0).str() << ") must be >= d_conv - 1 ("
                         << dConv - 1 << ")";
  return checkResult(*this, {c.getNe(1), nT, sx.getNe(2), Dim::of(1)},
                     Float32Type::get(getContext()),
                     "ggml_ssm_conv: [d_inner, sx.ne0 - d_conv + 1, sx.ne2], f32");
}

/// ggml_ssm_scan of ggml Feb 2025 (no ids): s [d_state, d_inner, n_seqs], x and dt
/// [d_inner, n_seq_tokens, n_seqs], A [d_state, d_inner], B and C [d_state, n_seq_tokens, n_seqs].
static LogicalResult verifySsmScanFeb2025(SsmScanOp op) {
  TensorType s = tensorOf(op.getS()), x = tensorOf(op.getX()), dt = tensorOf(op.getDt());
  TensorType A = tensorOf(op.getA()), B = tensorOf(op.getB()), C = tensorOf(op.getC());
  auto mismatch = [&](StringRef what, const Dim &got, StringRef name, const Dim &want) {
    return op.emitOpError() << what << " (" << got.str() << ") must equal " << name << " ("
                            << want.str() << ") (ggml_ssm_scan)";
  };
  Dim dState = s.getNe(0), dInner = s.getNe(1), nSeqTokens = x.getNe(1), nSeqs = x.getNe(2);
  if (x.getShape() != dt.getShape())
    return op.emitOpError() << "x " << shapeOf(x) << " and dt " << shapeOf(dt)
                            << " must have the same shape";
  if (B.getShape() != C.getShape())
    return op.emitOpError() << "B " << shapeOf(B) << " and C " << shapeOf(C)
                            << " must have the same shape";
  if (!s.getNe(3).is(1) || !x.getNe(3).is(1) || !B.getNe(3).is(1))
    return op.emitOpError() << "s, x and B must be 3-D without ids (ggml_ssm_scan)";
  if (s.getNe(2) != nSeqs)
    return mismatch("s.ne2", s.getNe(2), "n_seqs = x.ne2", nSeqs);
  if (x.getNe(0) != dInner)
    return mismatch("x.ne0", x.getNe(0), "d_inner = s.ne1", dInner);
  if (!A.getNe(2).is(1) || !A.getNe(3).is(1))
    return op.emitOpError() << "A must be a matrix [d_state, d_inner], got " << shapeOf(A);
  if (A.getNe(0) != dState)
    return mismatch("A.ne0", A.getNe(0), "d_state = s.ne0", dState);
  if (A.getNe(1) != dInner)
    return mismatch("A.ne1", A.getNe(1), "d_inner = s.ne1", dInner);
  if (B.getNe(0) != dState)
    return mismatch("B.ne0", B.getNe(0), "d_state = s.ne0", dState);
  if (B.getNe(1) != nSeqTokens)
    return mismatch("B.ne1", B.getNe(1), "n_seq_tokens = x.ne1", nSeqTokens);
  if (B.getNe(2) != nSeqs)
    return mismatch("B.ne2", B.getNe(2), "n_seqs = x.ne2", nSeqs);
  std::optional<Dim> y = x.getNumElements().asDim(), st = s.getNumElements().asDim();
  if (!y || !st)
    return op.emitOpError() << "cannot express the result size " << x.getNumElements().str()
                            << " + " << s.getNumElements().str() << " as one dimension";
  return checkResult(op, {*y + *st, Dim::of(1), Dim::of(1), Dim::of(1)},
                     Float32Type::get(op.getContext()),
                     "ggml_ssm_scan: [nelements(x) + nelements(s)], f32");
}

LogicalResult SsmScanOp::verify() {
  if (!getIds())
    return verifySsmScanFeb2025(*this);
  TensorType s = tensorOf(getS()), x = tensorOf(getX()), dt = tensorOf(getDt());
  TensorType A = tensorOf(getA()), B = tensorOf(getB()), C = tensorOf(getC());
  TensorType ids = tensorOf(getIds());
  Dim dState = s.getNe(0), headDim = x.getNe(0), nHead = x.getNe(1);
  Dim nSeqTokens = x.getNe(2), nSeqs = x.getNe(3);
  auto mismatch = [&](StringRef what, const Dim &got, StringRef name, const Dim &want) {
    return emitOpError() << what << " (" << got.str() << ") must equal " << name << " ("
                         << want.str() << ") (ggml_ssm_scan)";
  };
  if (B.getShape() != C.getShape())
    return emitOpError() << "B " << shapeOf(B) << " and C " << shapeOf(C)
                         << " must have the same shape";
  if (!isI32(ids))
    return emitOpError() << "ids must be i32, got " << ids.getElementTypeName();
  if (dt.getNe(0) != nHead)
    return mismatch("dt.ne0", dt.getNe(0), "n_head = x.ne1", nHead);
  if (dt.getNe(1) != nSeqTokens)
    return mismatch("dt.ne1", dt.getNe(1), "n_seq_tokens = x.ne2", nSeqTokens);
  if (dt.getNe(2) != nSeqs)
    return mismatch("dt.ne2", dt.getNe(2), "n_seqs = x.ne3", nSeqs);
  if (!dt.getNe(3).is(1))
    return emitOpError() << "dt must be 3-D, got " << shapeOf(dt);
  if (s.getNe(1) != headDim)
    return mismatch("s.ne1", s.getNe(1), "head_dim = x.ne0", headDim);
  if (s.getNe(2) != nHead)
    return mismatch("s.ne2", s.getNe(2), "n_head = x.ne1", nHead);
  if (B.getNe(0) != dState)
    return mismatch("B.ne0", B.getNe(0), "d_state = s.ne0", dState);
  if (B.getNe(2) != nSeqTokens)
    return mismatch("B.ne2", B.getNe(2), "n_seq_tokens = x.ne2", nSeqTokens);
  if (B.getNe(3) != nSeqs)
    return mismatch("B.ne3", B.getNe(3), "n_seqs = x.ne3", nSeqs);
  if (!ids.getNe(1).is(1) || !ids.getNe(2).is(1) || !ids.getNe(3).is(1))
    return emitOpError() << "ids must be a vector [n_seqs], got " << shapeOf(ids);
  if (ids.getNe(0) != nSeqs)
    return mismatch("ids.ne0", ids.getNe(0), "n_seqs = x.ne3", nSeqs);
  if (!A.getNe(2).is(1) || !A.getNe(3).is(1))
    return emitOpError() << "A must be a matrix [d_state or 1, n_head], got " << shapeOf(A);
  if (A.getNe(1) != nHead)
    return mismatch("A.ne1", A.getNe(1), "n_head = x.ne1", nHead);
  if (!A.getNe(0).is(1) && A.getNe(0) != dState)
    return mismatch("A.ne0", A.getNe(0), "1 or d_state = s.ne0", dState);
  // Result: y (nelements(x)) then the final states (d_state * head_dim * n_head * n_seqs).
  ElementCount states;
  for (const Dim &d : {dState, headDim, nHead, ids.getNe(0)})
    states.multiply(d);
  std::optional<Dim> y = x.getNumElements().asDim(), st = states.asDim();
  if (!y || !st)
    return emitOpError() << "cannot express the result size " << x.getNumElements().str() << " + "
                         << states.str() << " as one dimension";
  return checkResult(*this, {*y + *st, Dim::of(1), Dim::of(1), Dim::of(1)},
                     Float32Type::get(getContext()),
                     "ggml_ssm_scan: [nelements(x) + d_state*head_dim*n_head*n_seqs], f32");
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
