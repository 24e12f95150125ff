#include "model_loader.h"

#include <algorithm>

#include "stowage/planner/model_graphs.h"

namespace stowage::planner {
namespace {

std::string ShapeStr(const int64_t* ne, size_t n) {
  std::string s = "[";
  for (size_t i = 0; i < n; ++i) s += (i ? ", " : "") + std::to_string(ne[i]);
  return s + "]";
}

bool EndsWith(const std::string& s, const std::string& suf) {
  return s.size() >= suf.size() && s.compare(s.size() - suf.size(), suf.size(), suf) == 0;
}

}  // namespace

int WeightLoader::Create(const std::string& name, std::vector<int64_t> ne, int layer, LayerClass cls,
                         GgmlOp op, unsigned flags) {
  if (!status_.ok()) return -1;
  const GgufTensorInfo* ti = gguf_.FindTensor(name);
  if (ti == nullptr) {
    if (flags & kNotRequired) return -1;
    status_ = NotFound(gguf_.path() + ": missing tensor '" + name + "'");
    return -1;
  }
  int64_t want[4] = {1, 1, 1, 1};
  for (size_t i = 0; i < ne.size() && i < 4; ++i) want[i] = ne[i];
  bool match = true;
  for (int i = 0; i < 4; ++i) match = match && ti->ne[i] == want[i];
  if (!match) {
    status_ = InvalidArgument(gguf_.path() + ": tensor '" + name + "' has wrong shape; expected " +
                              ShapeStr(want, std::max<size_t>(ne.size(), 1)) + ", got " +
                              ShapeStr(ti->ne, ti->n_dims));
    return -1;
  }
  // Types: F32 where ggml's consuming op needs it and llama.cpp's converter and quantizer always
  // write it (convert_hf_to_gguf prepare_tensors: 1-D tensors, norms, non-".weight" tensors,
  // ssm_conv1d; llama-quant keeps them); matrices take any float or quantized type.
  const bool want_f32 = ne.size() <= 1 || EndsWith(name, "_norm.weight") || !EndsWith(name, ".weight") ||
                        EndsWith(name, "ssm_conv1d.weight");
  const auto& tr = GetTypeTraits(ti->type);
  const bool int_type = ti->type == GgmlType::I8 || ti->type == GgmlType::I16 || ti->type == GgmlType::I32 ||
                        ti->type == GgmlType::I64 || ti->type == GgmlType::F64;
  if ((want_f32 && ti->type != GgmlType::F32) || (!want_f32 && (int_type || !tr.valid))) {
    status_ =
        InvalidArgument(gguf_.path() + ": tensor '" + name + "' has wrong type; expected " +
                        (want_f32 ? "f32" : "a float or quantized type") + ", got " + GgmlTypeName(ti->type));
    return -1;
  }
  GlobalTensor g;
  g.name = name;
  g.kind = TensorKind::kWeight;
  g.type = ti->type;
  for (int i = 0; i < 4; ++i) g.ne[i] = ti->ne[i];
  g.nbytes = ti->nbytes;
  g.gguf_offset = gguf_.data_offset() + ti->offset;
  g.layer = layer;
  g.layer_class = cls;
  g.consumer_op = EndsWith(name, "bias") ? (op == GgmlOp::MUL_MAT_ID ? GgmlOp::ADD_ID : GgmlOp::ADD) : op;
  g.duplicated = (flags & kDuplicated) != 0;
  m_.globals.push_back(std::move(g));
  used_.push_back(name);
  return static_cast<int>(m_.globals.size() - 1);
}

void WeightLoader::SkipBlock(int il) {
  const std::string prefix = "blk." + std::to_string(il) + ".";
  for (const auto& t : gguf_.tensors())
    if (t.name.rfind(prefix, 0) == 0) used_.push_back(t.name);
}

std::vector<std::string> WeightLoader::Unused() const {
  std::vector<std::string> out;
  for (const auto& t : gguf_.tensors())
    if (std::find(used_.begin(), used_.end(), t.name) == used_.end()) out.push_back(t.name);
  return out;
}

}  // namespace stowage::planner
