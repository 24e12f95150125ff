// The op-support rule language: queries, rules, tables and their evaluation (see op_rules.h).
#include "stowage/runtime/op_rules.h"

#include <algorithm>
#include <utility>

namespace stowage {

int TensorDesc::NumDims() const {
  for (int i = 3; i >= 1; --i) {
    if (ne[i] != 1) return i + 1;
  }
  return 1;
}

int64_t OpBatchSize(const OpQuery& q) {
  switch (q.op) {
    case GgmlOp::GET_ROWS:
      return 0;
    case GgmlOp::MUL_MAT:
      return q.dst.ne[1];
    case GgmlOp::MUL_MAT_ID:
    case GgmlOp::ROPE:
      return q.dst.ne[2];
    default:
      return q.dst.NumRows();
  }
}

bool IsViewOrNoneOp(GgmlOp op) {
  return op == GgmlOp::NONE || op == GgmlOp::RESHAPE || op == GgmlOp::VIEW || op == GgmlOp::PERMUTE ||
         op == GgmlOp::TRANSPOSE;
}

OpSet OpsNamedBy(const std::vector<OpRule>& rules) {
  OpSet ops{};
  for (const OpRule& r : rules) {
    for (GgmlOp o : r.ops) {
      if (static_cast<size_t>(o) < ops.size()) ops[static_cast<size_t>(o)] = true;
    }
  }
  return ops;
}

bool Contains(const OpSet& ops, GgmlOp op) {
  const auto i = static_cast<size_t>(op);
  return i < ops.size() && ops[i];
}

GgmlType VecDotType(GgmlType type) {
  switch (type) {
    case GgmlType::Q4_0:
    case GgmlType::Q5_0:
    case GgmlType::Q8_0:
    case GgmlType::IQ4_NL:
    case GgmlType::MXFP4:
      return GgmlType::Q8_0;
    case GgmlType::Q4_1:
    case GgmlType::Q5_1:
      return GgmlType::Q8_1;
    case GgmlType::Q2_K:
    case GgmlType::Q3_K:
    case GgmlType::Q4_K:
    case GgmlType::Q5_K:
    case GgmlType::Q6_K:
    case GgmlType::IQ2_XXS:
    case GgmlType::IQ2_XS:
    case GgmlType::IQ2_S:
    case GgmlType::IQ3_XXS:
    case GgmlType::IQ3_S:
    case GgmlType::IQ1_S:
    case GgmlType::IQ1_M:
    case GgmlType::IQ4_XS:
    case GgmlType::TQ1_0:
    case GgmlType::TQ2_0:
      return GgmlType::Q8_K;
    default:
      return type;
  }
}

bool TensorConstraint::Matches(const TensorDesc* t) const {
  if (!present) return t == nullptr;
  if (t == nullptr) return optional;
  if (!types.empty() && std::find(types.begin(), types.end(), t->type) == types.end()) return false;
  if (contiguous && *contiguous != t->contiguous) return false;
  if (host && *host == t->InNonHostBuffer()) return false;
  if (buft && *buft != t->buft) return false;
  if (max_dims > 0 && t->NumDims() > max_dims) return false;
  for (int i = 0; i < 4; ++i) {
    if (t->ne[i] < min_ne[i]) return false;
    if (max_ne[i] > 0 && t->ne[i] > max_ne[i]) return false;
    if (ne_multiple_of[i] > 1 && t->ne[i] % ne_multiple_of[i] != 0) return false;
  }
  return true;
}

bool TensorConstraint::operator==(const TensorConstraint& o) const {
  return present == o.present && optional == o.optional && types == o.types && contiguous == o.contiguous &&
         host == o.host && buft == o.buft && max_dims == o.max_dims && min_ne == o.min_ne &&
         max_ne == o.max_ne && ne_multiple_of == o.ne_multiple_of;
}

TensorConstraint OfTypes(std::vector<GgmlType> types, bool optional) {
  TensorConstraint c;
  c.types = std::move(types);
  c.optional = optional;
  return c;
}

bool OpRule::AppliesTo(GgmlOp op) const {
  return ops.empty() || std::find(ops.begin(), ops.end(), op) != ops.end();
}

bool OpRule::Matches(const OpQuery& q) const {
  if (!AppliesTo(q.op)) return false;
  if (all_srcs_host) {
    bool all_host =
        std::none_of(q.src.begin(), q.src.end(), [](const TensorDesc& t) { return t.InNonHostBuffer(); });
    if (all_host != *all_srcs_host) return false;
  }
  if (src1_f32_or_vec_dot) {
    if (q.src.size() < 2) return false;
    GgmlType t1 = q.src[1].type;
    if (t1 != GgmlType::F32 && t1 != VecDotType(q.src[0].type)) return false;
  }
  if (min_batch > 0 && OpBatchSize(q) < min_batch) return false;
  if (dst && !dst->Matches(&q.dst)) return false;
  for (size_t i = 0; i < src.size(); ++i) {
    if (!src[i]) continue;
    const TensorDesc* t = i < q.src.size() ? &q.src[i] : nullptr;
    if (!src[i]->Matches(t)) return false;
  }
  return true;
}

bool OpRule::operator==(const OpRule& o) const {
  return ops == o.ops && supported == o.supported && all_srcs_host == o.all_srcs_host &&
         src1_f32_or_vec_dot == o.src1_f32_or_vec_dot && min_batch == o.min_batch && dst == o.dst &&
         src == o.src && note == o.note;
}

OpRule AcceptRule(std::vector<GgmlOp> ops, std::vector<TensorConstraint> src, std::vector<GgmlType> dst_types,
                  int64_t min_batch, std::string note) {
  OpRule r;
  r.ops = std::move(ops);
  r.supported = true;
  r.min_batch = min_batch;
  if (!dst_types.empty()) r.dst = OfTypes(std::move(dst_types));
  for (auto& c : src) r.src.emplace_back(std::move(c));
  r.note = std::move(note);
  return r;
}

bool OpSupportTable::Evaluate(const OpQuery& q, int* decided_by) const {
  for (size_t i = 0; i < rules.size(); ++i) {
    if (rules[i].Matches(q)) {
      if (decided_by) *decided_by = static_cast<int>(i);
      return rules[i].supported;
    }
  }
  if (decided_by) *decided_by = -1;
  return default_supported;
}

bool OpSupportTable::operator==(const OpSupportTable& o) const {
  return default_supported == o.default_supported && rules == o.rules;
}

bool RefusedBySplitBuft(const OpQuery& q, std::string_view split_buft) {
  return !split_buft.empty() && q.op != GgmlOp::MUL_MAT &&
         std::any_of(q.src.begin(), q.src.end(), [&](const TensorDesc& t) { return t.buft == split_buft; });
}

bool ExtraBuftAccepts(const std::vector<OpRule>& rules, const OpQuery& q) {
  for (const auto& rule : rules) {
    if (rule.Matches(q)) return rule.supported;
  }
  return false;
}

}  // namespace stowage
