// Internal to the CPU backend's op files (ops_*.cpp): the argument checks, element access and the
// row-parallel loop their kernels share. Include only from .cpp files built with OpenMP.
#pragma once

#include <algorithm>
#include <cstring>
#include <string>

#include "ops.h"
#include "parallel.h"
#include "quants.h"

namespace stowage::cpu::op_detail {

// Returns kInvalidArgument "<op>: <what>" from the calling function unless `cond` holds. The
// message is built only on failure: ops run hundreds of times per generated token, and building
// every message eagerly (ShapeString, std::to_string) cost ~1% of token-generation time.
#define STOWAGE_CPU_NEED(cond, op, what)                                  \
  do {                                                                    \
    if (!(cond)) return InvalidArgument(std::string(op) + ": " + (what)); \
  } while (0)

inline Status NeedType(const TensorView& t, GgmlType type, const char* op, const char* name) {
  STOWAGE_CPU_NEED(t.type == type, op,
                   std::string(name) + ": expected type " + GgmlTypeName(type) + ", got " + ShapeString(t));
  return Status::Ok();
}

inline Status NeedSameShape(const TensorView& a, const TensorView& b, const char* op, const char* an,
                            const char* bn) {
  bool same = true;
  for (int i = 0; i < 4; ++i) same = same && a.ne[i] == b.ne[i];
  STOWAGE_CPU_NEED(
      same, op,
      std::string(an) + " " + ShapeString(a) + " and " + bn + " " + ShapeString(b) + " differ in shape");
  return Status::Ok();
}

// The second operand of a broadcast op (ADD/MUL/DIV's src1, RMS_NORM_MUL's weight), `name`, against
// the tensor it is repeated over, `over_name`: F32 or F16, each dimension dividing over's
// (ggml_can_repeat).
inline Status NeedRepeatable(const TensorView& t, const TensorView& over, const char* op, const char* name,
                             const char* over_name) {
  STOWAGE_CPU_NEED(t.type == GgmlType::F32 || t.type == GgmlType::F16, op,
                   std::string(name) + ": expected F32 or F16, got " + ShapeString(t));
  for (int i = 0; i < 4; ++i) {
    STOWAGE_CPU_NEED(t.ne[i] > 0 && over.ne[i] % t.ne[i] == 0, op,
                     std::string(name) + " " + ShapeString(t) + " cannot be repeated to " + over_name + " " +
                         ShapeString(over));
  }
  return Status::Ok();
}

inline Status NeedData(const TensorView& t, const char* op, const char* name) {
  STOWAGE_CPU_NEED(t.data != nullptr || t.nelements() == 0, op, std::string(name) + ": data is null");
  return Status::Ok();
}

inline char* At(const TensorView& t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
  return static_cast<char*>(t.data) + i0 * t.nb[0] + i1 * t.nb[1] + i2 * t.nb[2] + i3 * t.nb[3];
}

// Loads element i0 of a row of a plain (F32/F16/BF16) tensor as float.
inline float LoadF(GgmlType type, const char* row, size_t nb0, int64_t i0) {
  const char* p = row + i0 * nb0;
  switch (type) {
    case GgmlType::F16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      return HalfToFloat(h);
    }
    case GgmlType::BF16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      return Bf16ToFloat(h);
    }
    default: {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
  }
}

// Applies f(row index) for every row of `t` (i1, i2, i3), in parallel.
// Below this many elements an op runs on the calling thread: a thread team costs more than it saves.
constexpr int64_t kMinParallelElements = 8192;

inline int Threads(const ComputeContext& ctx, int64_t elements) {
  return elements < kMinParallelElements ? 1 : std::max(1, ctx.n_threads);
}

template <typename F>
void ParallelRows(const ComputeContext& ctx, const TensorView& t, F&& f) {
  const int64_t nr = t.nrows();
  const int64_t ne1 = t.ne[1], ne2 = t.ne[2];
  const int nt = Threads(ctx, t.nelements());
  ParallelFor(nt, nt > 1, nr, Schedule::kStatic, 1, [&](int64_t r, int) {
    const int64_t i1 = r % ne1, i2 = (r / ne1) % ne2, i3 = r / (ne1 * ne2);
    f(i1, i2, i3);
  });
}

}  // namespace stowage::cpu::op_detail
