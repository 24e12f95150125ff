/* Stowage planner C API: plan a GGUF model for this machine's devices on the fly (as stowage-run and
 * stowage-server plan without --plan), into a plan file, a buffer, or straight into a session of the
 * runtime's C API (stowage/runtime/c_api.h). In libstowage-planner (pkg-config stowage-planner,
 * CMake Stowage::planner), on top of libstowage-runtime. The C++ API (stowage/planner/plan.h:
 * planner::Plan) plans for any devices, e.g. the registry's manifests; this one plans for the
 * devices probed on this machine (list-devices; planner::ManifestsFromProbe), CUDA GPUs numbered in
 * probe order (CUDA0, CUDA1, ...).
 *
 * The plan is the planner's, as `plan-model -O0` writes it: the compiler stage (MLIR, plan-model's
 * -O1/-O2) is not part of this library. Its flags are llama.cpp's (llama_context_params and
 * common_params: -c, -b, -ub, -np, -kvu, -ngl, -ctk, -ctv, -fa, --no-mmap, -nkvo, --swa-full,
 * --llamacpp-compat) with the meanings plan-model documents.
 *
 * Errors: as the runtime's C API: a stowage_status, the one-line message copied into the caller's
 * err buffer (err_size bytes, NUL-terminated, truncated to fit; err may be NULL). No exception
 * crosses this API. Thread-safety: no global state; calls on distinct arguments may run at once
 * (each probes the devices itself). */
#ifndef STOWAGE_PLANNER_C_API_H_
#define STOWAGE_PLANNER_C_API_H_

#include <stddef.h>
#include <stdint.h>

#include "stowage/runtime/c_api.h"

#ifdef __cplusplus
extern "C" {
#endif

/* llama.h's llama_flash_attn_type: -fa auto, off, on. */
typedef enum {
  STOWAGE_FLASH_ATTN_AUTO = -1,
  STOWAGE_FLASH_ATTN_OFF = 0,
  STOWAGE_FLASH_ATTN_ON = 1,
} stowage_flash_attn;

/* --llamacpp-compat: the llama.cpp whose loader the plan follows (planner::LlamacppCompat). */
typedef enum {
  STOWAGE_LLAMACPP_COMPAT_FEB25 = 0, /* llama.cpp of February 2025 */
  STOWAGE_LLAMACPP_COMPAT_2026 = 1,  /* llama.cpp of 2026-09-28 */
} stowage_llamacpp_compat;

/* One line the planner reports while it plans (a model warning, the -fa auto decision, --fit's
 * trace and result: what plan-model prints on its log), without a trailing newline. `line` is valid
 * during the call only. */
typedef void (*stowage_plan_log_fn)(const char* line, void* user_data);

/* What to plan (stowage_plan_default_params fills every field). */
typedef struct {
  /* -c: context tokens; 0 = the model's training context (llama.cpp -c 0). */
  uint32_t n_ctx;
  /* -b, -ub: logical and physical batch (tokens). */
  uint32_t n_batch;
  uint32_t n_ubatch;
  /* -np: sequences kept at once (1 to 256); kv_unified != 0 (-kvu): one KV cache shared by them
   * (required for n_seq_max > 1, as plan-model). */
  uint32_t n_seq_max;
  int kv_unified;
  /* -ngl: layers on the GPUs (0 = none, a count above the model's layers, up to 1048576, or any
   * value <= -2 = all, as plan-model's -ngl); -1 = auto (--fit: context, layers and overrides chosen
   * as llama.cpp 2026's common_fit_params chooses them). */
  int32_t n_gpu_layers;
  /* -ctk, -ctv: KV cache types by ggml name ("f16", "q8_0", ...); NULL = "f16". */
  const char* cache_type_k;
  const char* cache_type_v;
  stowage_flash_attn flash_attn;
  stowage_llamacpp_compat llamacpp_compat;
  /* --no-mmap when 0; -nkvo when offload_kqv is 0; --swa-full when swa_full != 0. */
  int use_mmap;
  int offload_kqv;
  int swa_full;
  /* 0 (--no-fit-check): a plan that does not fit this machine's memory is still made. */
  int fit_check;
  /* Receives the planner's lines (NULL: none are reported). */
  stowage_plan_log_fn log;
  void* log_user_data;
} stowage_plan_params;

/* The defaults of plan-model for its default --llamacpp-compat (planner::kDefaultLlamacppCompat and
 * planner::LlamacppDefaultsOf: -c, -fa and -ngl follow it; -b 2048, -ub 512, -np 1, f16 caches,
 * mmap, KV offload, fit check on, no log). */
stowage_plan_params stowage_plan_default_params(void);

/* Plans the GGUF at model_path for this machine with `params` (NULL: the defaults) and writes the
 * plan to plan_path (a temporary file renamed into place: never a partly written plan). The plan
 * records "stowage_plan_model" as the planner's command line. Errors: a NULL path
 * (STOWAGE_INVALID_ARGUMENT); a bad parameter (an unknown cache type, n_seq_max outside 1..256,
 * n_batch or n_ubatch 0, n_gpu_layers above 1048576: STOWAGE_INVALID_ARGUMENT naming the field,
 * "stowage_plan_params.n_seq_max: expected 1 to 256 sequences, found 100000"); the model's (a missing or
 * malformed GGUF, an unsupported architecture); the planner's; a plan that does not fit this machine's memory
 * when params->fit_check (STOWAGE_RESOURCE_EXHAUSTED naming the device); the write's (STOWAGE_IO_ERROR). */
stowage_status stowage_plan_model(const char* model_path, const stowage_plan_params* params,
                                  const char* plan_path, char* err, size_t err_size);

/* As stowage_plan_model, the plan returned in a buffer: on success *plan points to *plan_size bytes
 * that the caller frees with stowage_plan_buffer_free; on failure *plan is NULL and *plan_size 0. */
stowage_status stowage_plan_model_buffer(const char* model_path, const stowage_plan_params* params,
                                         void** plan, size_t* plan_size, char* err, size_t err_size);

/* Frees a buffer of stowage_plan_model_buffer (NULL: nothing). */
void stowage_plan_buffer_free(void* plan);

/* Plans model_path on the fly (stowage_plan_model_buffer) and loads it: a session as
 * stowage_session_create would make from that plan, with n_threads CPU threads (0 = all). The model
 * is mapped for planning, released, and mapped again by the session. Errors: those of
 * stowage_plan_model_buffer, then those of stowage_session_create_from_plan_buffer. */
stowage_status stowage_session_create_planned(const char* model_path, const stowage_plan_params* params,
                                              int n_threads, stowage_session** out, char* err,
                                              size_t err_size);

#ifdef __cplusplus
}
#endif

#endif /* STOWAGE_PLANNER_C_API_H_ */
