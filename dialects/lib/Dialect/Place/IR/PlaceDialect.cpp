//===- PlaceDialect.cpp - the placement dialect and its attributes --------===//

#include "stowage/Dialect/Place/IR/PlaceDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace stowage::place;

#include "stowage/Dialect/Place/IR/PlaceDialect.cpp.inc"
#include "stowage/Dialect/Place/IR/PlaceEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "stowage/Dialect/Place/IR/PlaceAttrs.cpp.inc"

void PlaceDialect::initialize() {
  registerAttributes();
  addOperations<
#define GET_OP_LIST
#include "stowage/Dialect/Place/IR/PlaceOps.cpp.inc"
      >();
}

void PlaceDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "stowage/Dialect/Place/IR/PlaceAttrs.cpp.inc"
      >();
}

namespace stowage::place {

bool isKnownCauseCode(StringRef code) {
  // ggml-backend.cpp SET_CAUSE: "1.wgt%d" with the source index (< GGML_MAX_SRC = 10).
  if (code.consume_front("1.wgt"))
    return code.size() == 1 && code[0] >= '0' && code[0] <= '9';
  return llvm::StringSwitch<bool>(code)
      .Cases("1.dst", "1.vsrc", "1.inp", "1.off", "2.sup", true)
      .Cases("3.best", "3.upg", "4.vsrc", "4.cur", "usr", true)
      // llama.cpp's graph-callback pins (ggml reports them as "usr"): per-layer norm nodes
      // (n_tokens < 32 or full offload) and kqv_merged_cont with -nkvo.
      .Cases("pin.norm", "pin.nkvo", true)
      .Cases("load.head", "load.fallback", "load.override", "load.override.cpu", true)
      .Cases("load.mmap", "load.dup", "kv.layer", "kv.nkvo", true)
      .Default(false);
}

} // namespace stowage::place

LogicalResult DeviceAttr::verify(function_ref<InFlightDiagnostic()> emitError, StringRef name,
                                 DeviceType) {
  if (name.empty())
    return emitError() << "device name must not be empty";
  return success();
}

LogicalResult BufferTypeAttr::verify(function_ref<InFlightDiagnostic()> emitError, StringRef name,
                                     StringRef device, BuftKind) {
  if (name.empty())
    return emitError() << "buffer type name must not be empty";
  if (device.empty())
    return emitError() << "buffer type '" << name << "' needs a device name";
  return success();
}

LogicalResult BackendAttr::verify(function_ref<InFlightDiagnostic()> emitError, StringRef name,
                                  int32_t priority) {
  if (name.empty())
    return emitError() << "backend name must not be empty";
  // GGML_SCHED_MAX_BACKENDS = 16.
  if (priority < 0 || priority >= 16)
    return emitError() << "backend priority must be in [0, 16) (GGML_SCHED_MAX_BACKENDS), got "
                       << priority;
  return success();
}

LogicalResult CauseAttr::verify(function_ref<InFlightDiagnostic()> emitError, StringRef code) {
  if (!isKnownCauseCode(code))
    return emitError() << "unknown placement cause '" << code
                       << "' (expected 1.dst, 1.vsrc, 1.inp, 1.wgt<i>, 1.off, 2.sup, 3.best, "
                          "3.upg, 4.vsrc, 4.cur, usr, pin.norm, pin.nkvo, load.head, "
                          "load.fallback, load.override, "
                          "load.override.cpu, load.mmap, load.dup, kv.layer or kv.nkvo)";
  return success();
}

LogicalResult stowage::place::verifyBackendIsDevice(Operation *op, BackendAttr backend) {
  for (Operation *scope = op; scope; scope = scope->getParentOp()) {
    auto module = dyn_cast<ModuleOp>(scope);
    auto devices = module ? module->getAttrOfType<ArrayAttr>(kDevicesAttr) : ArrayAttr();
    if (!devices)
      continue;
    std::string names;
    for (auto device : devices.getAsRange<DeviceAttr>()) {
      if (!device)
        continue;
      if (device.getName() == backend.getName())
        return success();
      names += (names.empty() ? "" : ", ") + device.getName().str();
    }
    return op->emitOpError() << "backend '" << backend.getName()
                             << "' is not a device of the module (place.devices: " << names << ")";
  }
  return success();
}

LogicalResult PlaceDialect::verifyOperationAttribute(Operation *op, NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  Attribute value = attr.getValue();
  auto expect = [&](bool ok, StringRef what) -> LogicalResult {
    if (ok)
      return success();
    return op->emitOpError() << "attribute '" << name << "' must be " << what << ", got " << value;
  };
  if (name == kBuftAttr)
    return expect(isa<BufferTypeAttr>(value), "a #place.buft");
  if (name == kBackendAttr) {
    if (failed(expect(isa<BackendAttr>(value), "a #place.backend")))
      return failure();
    return verifyBackendIsDevice(op, cast<BackendAttr>(value));
  }
  if (name == kCauseAttr)
    return expect(isa<CauseAttr>(value), "a #place.cause");
  if (name == kDeviceAttr)
    return expect(isa<DeviceAttr>(value), "a #place.device");
  if (name == kDevicesAttr) {
    auto array = dyn_cast<ArrayAttr>(value);
    return expect(array && llvm::all_of(array, [](Attribute a) { return isa<DeviceAttr>(a); }),
                  "an array of #place.device");
  }
  return op->emitOpError() << "unknown placement attribute '" << name
                           << "' (expected place.buft, place.backend, place.cause, "
                              "place.device or place.devices)";
}
