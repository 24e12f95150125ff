/* Link-time wrapper for the reference refdump (../shared/tools/llamacpp-ref/refdump.cpp): linked
 * with -Wl,--wrap=llama_context_default_params, it returns llama.cpp's defaults with flash attention
 * and the KV cache types taken from the environment, so the unchanged refdump source dumps
 * flash-attention references. REF_FA: -1 auto, 0 off, 1 on; REF_CTK / REF_CTV: ggml type ids. */
#include <stdlib.h>

#include "llama.h"

struct llama_context_params __real_llama_context_default_params(void);

struct llama_context_params __wrap_llama_context_default_params(void) {
  struct llama_context_params p = __real_llama_context_default_params();
  const char* fa = getenv("REF_FA");
  const char* ctk = getenv("REF_CTK");
  const char* ctv = getenv("REF_CTV");
  if (fa) p.flash_attn_type = (enum llama_flash_attn_type)atoi(fa);
  if (ctk) p.type_k = (enum ggml_type)atoi(ctk);
  if (ctv) p.type_v = (enum ggml_type)atoi(ctv);
  return p;
}
