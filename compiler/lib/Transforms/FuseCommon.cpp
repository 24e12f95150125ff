//===- FuseCommon.cpp - what every fusion pass checks ---------------------===//

#include "FuseCommon.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "stowage/Compiler/Transforms/Passes.h"
#include "stowage/Dialect/GGML/IR/GGMLOps.h"

using namespace mlir;

namespace stowage::compiler {

place::SplitOp enclosingSplit(Operation *op) {
  return dyn_cast_or_null<place::SplitOp>(op->getParentOp());
}

std::string splitRefusal(Operation *first, Operation *last) {
  place::SplitOp a = enclosingSplit(first), b = enclosingSplit(last);
  if (!a || !b)
    return "not inside a place.split (the IR is not placed)";
  if (a != b)
    return "in different splits (" + std::to_string(a.getIndex()) + " and " +
           std::to_string(b.getIndex()) + ")";
  return "";
}

BackendOps::BackendOps(ModuleOp module) : module_(module) {}

const ProbedDevice *BackendOps::deviceOf(StringRef name) {
  auto it = devices_.find(name.str());
  if (it != devices_.end())
    return it->second ? &*it->second : nullptr;
  std::optional<ProbedDevice> dev;
  if (auto list = module_->getAttrOfType<ArrayAttr>(place::kDevicesAttr)) {
    for (auto d : list.getAsRange<place::DeviceAttr>()) {
      if (!d || d.getName() != name)
        continue;
      // The runtime's built-in backends by planned device (builtin_backends.cpp): the CPU, and a
      // GPU named CUDA<i>.
      if (d.getType() == place::DeviceType::cpu) {
        dev = MakeCpuDevice(CpuInfo{});
      } else if (d.getType() == place::DeviceType::gpu && name.starts_with("CUDA")) {
        unsigned index = 0;
        if (!name.drop_front(4).getAsInteger(10, index)) {
          CudaDeviceInfo info;
          info.index = static_cast<int>(index);
          dev = MakeCudaDevice(info);
        }
      }
    }
  }
  auto [pos, inserted] = devices_.emplace(name.str(), std::move(dev));
  return pos->second ? &*pos->second : nullptr;
}

std::string BackendOps::refusal(place::SplitOp split, const OpQuery &query) {
  StringRef name = split.getBackend().getName();
  const ProbedDevice *dev = deviceOf(name);
  if (!dev)
    return "backend '" + name.str() + "' has no Stowage op table";
  if (!dev->SupportsOp(query))
    return "backend '" + name.str() + "' does not run " + GgmlOpName(query.op) +
           " with these tensors";
  return "";
}

std::optional<TensorDesc> BackendOps::describe(Value value) const {
  auto type = dyn_cast<ggml::TensorType>(value.getType());
  if (!type)
    return std::nullopt;
  Result<GgmlType> element = ParseGgmlType(type.getElementTypeName());
  if (!element.ok())
    return std::nullopt;
  TensorDesc desc;
  desc.type = *element;
  SymbolBindings b;
  auto func = value.getParentRegion()->getParentOfType<func::FuncOp>();
  auto bind = [&](StringRef attr, int64_t *v) {
    if (auto a = func ? func->getAttrOfType<IntegerAttr>(attr) : IntegerAttr())
      *v = a.getInt();
  };
  bind("ggml.n_tokens", &b.n_tokens);
  bind("ggml.n_kv", &b.n_kv);
  bind("ggml.n_outputs", &b.n_outputs);
  bind("ggml.n_kv_swa", &b.n_kv_swa);
  if (auto a = module_->getAttrOfType<IntegerAttr>("ggml.n_ctx"))
    b.n_ctx = a.getInt();
  for (unsigned i = 0; i < 4; ++i) {
    std::optional<int64_t> v = evaluateDim(type.getNe(i), b);
    if (!v)
      return std::nullopt;
    desc.ne[i] = *v;
  }
  if (Operation *def = value.getDefiningOp()) {
    if (auto buft = def->getAttrOfType<place::BufferTypeAttr>(place::kBuftAttr)) {
      desc.buft = buft.getName().str();
      // Host memory: a buffer type of the CPU, a GPU's pinned host buffer or the mapped file.
      desc.buft_is_host =
          buft.getKind() == place::BuftKind::host || buft.getKind() == place::BuftKind::mapped;
      if (auto list = module_->getAttrOfType<ArrayAttr>(place::kDevicesAttr))
        for (auto d : list.getAsRange<place::DeviceAttr>())
          if (d && d.getName() == buft.getDevice() && d.getType() == place::DeviceType::cpu)
            desc.buft_is_host = true;
    }
  }
  return desc;
}

} // namespace stowage::compiler
