// The planner's C API (stowage/planner/c_api.h): planner::Plan for this machine's probed devices.
#include "stowage/planner/c_api.h"

#include <cstdlib>
#include <cstring>
#include <exception>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "stowage/planner/from_probe.h"
#include "stowage/planner/gpu_layers.h"
#include "stowage/planner/model_graphs.h"
#include "stowage/planner/plan.h"
#include "stowage/runtime/atomic_file.h"
#include "stowage/runtime/device_probe.h"
#include "stowage/runtime/ggml_types.h"
#include "stowage/runtime/gguf.h"
#include "stowage/runtime/plan.h"

namespace {

using stowage::Result;
using stowage::Status;

stowage_status Report(const Status& st, char* err, size_t err_size) {
  if (err != nullptr && err_size > 0) {
    std::strncpy(err, st.message().c_str(), err_size - 1);
    err[err_size - 1] = '\0';
  }
  return static_cast<stowage_status>(static_cast<int>(st.code()));
}

// A cache type field: NULL is f16; anything else one of llama.cpp's KV cache type names (the message
// of another lists them).
Result<stowage::GgmlType> CacheType(const char* field, const char* name) {
  if (name == nullptr) return stowage::GgmlType::F16;
  auto t = stowage::planner::ParseKvCacheType(name);
  if (!t.ok())
    return stowage::InvalidArgument(std::string("stowage_plan_params.") + field + ": " +
                                    t.status().message());
  return *t;
}

// The request `p` asks for, as stowage-run builds it from its flags (tools/stowage-run plan_on_the_fly).
Result<stowage::planner::PlanRequest> RequestOf(const stowage_plan_params& p) {
  using stowage::planner::FlashAttnMode;
  using stowage::planner::LlamacppCompat;
  stowage::planner::PlanRequest request;
  if (p.llamacpp_compat != STOWAGE_LLAMACPP_COMPAT_FEB25 && p.llamacpp_compat != STOWAGE_LLAMACPP_COMPAT_2026)
    return stowage::InvalidArgument(
        "stowage_plan_params.llamacpp_compat: expected STOWAGE_LLAMACPP_COMPAT_FEB25 (0) "
        "or STOWAGE_LLAMACPP_COMPAT_2026 (1), found " +
        std::to_string(static_cast<int>(p.llamacpp_compat)));
  request.llamacpp_compat =
      p.llamacpp_compat == STOWAGE_LLAMACPP_COMPAT_FEB25 ? LlamacppCompat::kFeb25 : LlamacppCompat::k2026;
  switch (p.flash_attn) {
    case STOWAGE_FLASH_ATTN_AUTO:
      request.flash_attn = FlashAttnMode::kAuto;
      break;
    case STOWAGE_FLASH_ATTN_OFF:
      request.flash_attn = FlashAttnMode::kOff;
      break;
    case STOWAGE_FLASH_ATTN_ON:
      request.flash_attn = FlashAttnMode::kOn;
      break;
    default:
      return stowage::InvalidArgument(
          "stowage_plan_params.flash_attn: expected -1 (auto), 0 (off) or 1 (on), found " +
          std::to_string(static_cast<int>(p.flash_attn)));
  }
  // -ngl's rule (GpuLayersOf, plan-model's too): -1 auto, <= -2 every layer and the output.
  const int64_t n_gpu_layers = stowage::planner::GpuLayersOf(p.n_gpu_layers);
  if (n_gpu_layers > stowage::planner::kAllGpuLayers)
    return stowage::InvalidArgument("stowage_plan_params.n_gpu_layers: expected a layer count from 0 to " +
                                    std::to_string(stowage::planner::kAllGpuLayers) +
                                    ", <= -2 (all) or -1 (auto), found " + std::to_string(p.n_gpu_layers));
  if (p.n_seq_max == 0 || p.n_seq_max > stowage::kMaxSequences)
    return stowage::InvalidArgument("stowage_plan_params.n_seq_max: expected 1 to " +
                                    std::to_string(stowage::kMaxSequences) + " sequences, found " +
                                    std::to_string(p.n_seq_max));
  for (auto [field, value] : {std::pair{"n_batch", p.n_batch}, std::pair{"n_ubatch", p.n_ubatch}})
    if (value == 0)
      return stowage::InvalidArgument(std::string("stowage_plan_params.") + field +
                                      ": expected 1 or more tokens, found 0");
  request.context.n_ctx = p.n_ctx;
  request.context.n_batch = p.n_batch;
  request.context.n_ubatch = p.n_ubatch;
  request.context.n_seq_max = p.n_seq_max;
  request.context.kv_unified = p.kv_unified != 0;
  request.context.swa_full = p.swa_full != 0;
  STOWAGE_ASSIGN_OR_RETURN(request.context.type_k, CacheType("cache_type_k", p.cache_type_k));
  STOWAGE_ASSIGN_OR_RETURN(request.context.type_v, CacheType("cache_type_v", p.cache_type_v));
  request.fit = n_gpu_layers == stowage::planner::kAutoGpuLayers;
  request.placement.n_gpu_layers = request.fit ? 0 : static_cast<int>(n_gpu_layers);
  request.placement.use_mmap = p.use_mmap != 0;
  request.placement.offload_kqv = p.offload_kqv != 0;
  request.fit_check = p.fit_check != 0;
  request.flags = "stowage_plan_model (planned on the fly for this machine)";
  return request;
}

// Plans `model_path` for this machine: the plan's bytes.
Result<std::vector<uint8_t>> PlanBytes(const char* fn, const char* model_path,
                                       const stowage_plan_params* params) {
  if (model_path == nullptr) return stowage::InvalidArgument(std::string(fn) + ": model_path is NULL");
  const stowage_plan_params p = params != nullptr ? *params : stowage_plan_default_params();
  STOWAGE_ASSIGN_OR_RETURN(stowage::planner::PlanRequest request, RequestOf(p));
  STOWAGE_ASSIGN_OR_RETURN(std::unique_ptr<stowage::GgufFile> gguf, stowage::GgufFile::Open(model_path));
  STOWAGE_ASSIGN_OR_RETURN(std::vector<stowage::planner::DeviceManifest> machine,
                           stowage::planner::ManifestsFromProbe(stowage::ProbeDevices().devices));
  stowage::planner::PlanMessageSink sink;
  if (p.log != nullptr)
    sink = [&p](const stowage::planner::PlanMessage& msg) {
      const std::string prefix = msg.kind == stowage::planner::PlanMessageKind::kWarning ? "warning: " : "";
      p.log((prefix + msg.text).c_str(), p.log_user_data);
    };
  STOWAGE_ASSIGN_OR_RETURN(stowage::planner::PlanResult planned,
                           stowage::planner::Plan(*gguf, machine, request, sink));
  if (!planned.fit.ok() && request.fit_check) return planned.fit;
  if (!planned.fit.ok() && p.log != nullptr)
    p.log(("warning: " + planned.fit.message() + " (planned anyway: fit_check is 0)").c_str(),
          p.log_user_data);
  // The runtime's one verifier (as plan-model before it writes): a plan the runtime would refuse is
  // a planner bug, reported here rather than by the session that loads it.
  if (auto verified = stowage::PlanFile::FromBytes(planned.bytes, std::string(fn) + " (" + model_path + ")");
      !verified.ok())
    return stowage::Internal("plan verifier refused the plan: " + verified.status().message());
  return std::move(planned.bytes);
}

// Runs `f`, every exception turned into a status (none crosses the C API).
template <typename F>
stowage_status Guarded(const char* fn, char* err, size_t err_size, F&& f) {
  try {
    return f();
  } catch (const std::bad_alloc&) {
    return Report(stowage::ResourceExhausted(std::string(fn) + ": out of memory"), err, err_size);
  } catch (const std::exception& e) {
    return Report(stowage::Internal(std::string(fn) + ": " + e.what()), err, err_size);
  }
}

}  // namespace

extern "C" {

stowage_plan_params stowage_plan_default_params(void) {
  const stowage::planner::LlamacppCompat compat = stowage::planner::kDefaultLlamacppCompat;
  const stowage::planner::LlamacppDefaults d = stowage::planner::LlamacppDefaultsOf(compat);
  const stowage::planner::PlanRequest request;  // the C++ defaults: one source for both APIs
  stowage_plan_params p{};
  p.n_ctx = d.n_ctx;
  p.n_batch = request.context.n_batch;
  p.n_ubatch = request.context.n_ubatch;
  p.n_seq_max = request.context.n_seq_max;
  p.kv_unified = request.context.kv_unified ? 1 : 0;
  p.n_gpu_layers = d.fit ? -1 : request.placement.n_gpu_layers;
  p.cache_type_k = nullptr;
  p.cache_type_v = nullptr;
  p.flash_attn = d.flash_attn == stowage::planner::FlashAttnMode::kAuto ? STOWAGE_FLASH_ATTN_AUTO
                 : d.flash_attn == stowage::planner::FlashAttnMode::kOn ? STOWAGE_FLASH_ATTN_ON
                                                                        : STOWAGE_FLASH_ATTN_OFF;
  p.llamacpp_compat = compat == stowage::planner::LlamacppCompat::kFeb25 ? STOWAGE_LLAMACPP_COMPAT_FEB25
                                                                         : STOWAGE_LLAMACPP_COMPAT_2026;
  p.use_mmap = request.placement.use_mmap ? 1 : 0;
  p.offload_kqv = request.placement.offload_kqv ? 1 : 0;
  p.swa_full = request.context.swa_full ? 1 : 0;
  p.fit_check = request.fit_check ? 1 : 0;
  p.log = nullptr;
  p.log_user_data = nullptr;
  return p;
}

stowage_status stowage_plan_model(const char* model_path, const stowage_plan_params* params,
                                  const char* plan_path, char* err, size_t err_size) {
  return Guarded("stowage_plan_model", err, err_size, [&]() {
    if (plan_path == nullptr)
      return Report(stowage::InvalidArgument("stowage_plan_model: plan_path is NULL"), err, err_size);
    auto bytes = PlanBytes("stowage_plan_model", model_path, params);
    if (!bytes.ok()) return Report(bytes.status(), err, err_size);
    const Status written = stowage::WriteFileAtomic(plan_path, *bytes);
    return written.ok() ? STOWAGE_OK : Report(written, err, err_size);
  });
}

stowage_status stowage_plan_model_buffer(const char* model_path, const stowage_plan_params* params,
                                         void** plan, size_t* plan_size, char* err, size_t err_size) {
  if (plan != nullptr) *plan = nullptr;
  if (plan_size != nullptr) *plan_size = 0;
  return Guarded("stowage_plan_model_buffer", err, err_size, [&]() {
    if (plan == nullptr || plan_size == nullptr)
      return Report(
          stowage::InvalidArgument("stowage_plan_model_buffer: plan and plan_size must not be NULL"), err,
          err_size);
    auto bytes = PlanBytes("stowage_plan_model_buffer", model_path, params);
    if (!bytes.ok()) return Report(bytes.status(), err, err_size);
    void* out = std::malloc(bytes->empty() ? 1 : bytes->size());
    if (out == nullptr)
      return Report(stowage::ResourceExhausted("stowage_plan_model_buffer: out of memory"), err, err_size);
    if (!bytes->empty()) std::memcpy(out, bytes->data(), bytes->size());
    *plan = out;
    *plan_size = bytes->size();
    return STOWAGE_OK;
  });
}

void stowage_plan_buffer_free(void* plan) { std::free(plan); }

stowage_status stowage_session_create_planned(const char* model_path, const stowage_plan_params* params,
                                              int n_threads, stowage_session** out, char* err,
                                              size_t err_size) {
  if (out != nullptr) *out = nullptr;
  if (out == nullptr)
    return Report(stowage::InvalidArgument("stowage_session_create_planned: out is NULL"), err, err_size);
  void* plan = nullptr;
  size_t plan_size = 0;
  const stowage_status planned =
      stowage_plan_model_buffer(model_path, params, &plan, &plan_size, err, err_size);
  if (planned != STOWAGE_OK) return planned;
  const stowage_status created =
      stowage_session_create_from_plan_buffer(plan, plan_size, model_path, n_threads, out, err, err_size);
  stowage_plan_buffer_free(plan);
  return created;
}

}  // extern "C"
