// Quantizes a GGUF with the fetched llama.cpp's quantizer (llama_model_quantize; fetch.sh builds this
// file against it). The command line of ../shared/tools/llamacpp-ref/quantize (IN OUT FTYPE [pure])
// plus options and ftype names. See README.md.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "llama.h"
#include "ref_common.h"

namespace {

const char kTool[] = "quantize";

// llama_ftype by name, the names of llama.cpp's llama-quantize.
struct Ftype {
  const char* name;
  llama_ftype ftype;
};
const Ftype kFtypes[] = {
    {"F32", LLAMA_FTYPE_ALL_F32},
    {"F16", LLAMA_FTYPE_MOSTLY_F16},
    {"BF16", LLAMA_FTYPE_MOSTLY_BF16},
    {"Q8_0", LLAMA_FTYPE_MOSTLY_Q8_0},
    {"Q4_0", LLAMA_FTYPE_MOSTLY_Q4_0},
    {"Q4_1", LLAMA_FTYPE_MOSTLY_Q4_1},
    {"Q5_0", LLAMA_FTYPE_MOSTLY_Q5_0},
    {"Q5_1", LLAMA_FTYPE_MOSTLY_Q5_1},
    {"Q2_K", LLAMA_FTYPE_MOSTLY_Q2_K},
    {"Q2_K_S", LLAMA_FTYPE_MOSTLY_Q2_K_S},
    {"Q3_K_S", LLAMA_FTYPE_MOSTLY_Q3_K_S},
    {"Q3_K_M", LLAMA_FTYPE_MOSTLY_Q3_K_M},
    {"Q3_K_L", LLAMA_FTYPE_MOSTLY_Q3_K_L},
    {"Q4_K_S", LLAMA_FTYPE_MOSTLY_Q4_K_S},
    {"Q4_K_M", LLAMA_FTYPE_MOSTLY_Q4_K_M},
    {"Q5_K_S", LLAMA_FTYPE_MOSTLY_Q5_K_S},
    {"Q5_K_M", LLAMA_FTYPE_MOSTLY_Q5_K_M},
    {"Q6_K", LLAMA_FTYPE_MOSTLY_Q6_K},
    {"IQ4_NL", LLAMA_FTYPE_MOSTLY_IQ4_NL},
    {"IQ4_XS", LLAMA_FTYPE_MOSTLY_IQ4_XS},
    {"TQ1_0", LLAMA_FTYPE_MOSTLY_TQ1_0},
    {"TQ2_0", LLAMA_FTYPE_MOSTLY_TQ2_0},
    {"MXFP4_MOE", LLAMA_FTYPE_MOSTLY_MXFP4_MOE},
};

const char kUsage[] =
    "usage: quantize [OPTIONS] IN OUT FTYPE [pure]\n"
    "Writes OUT, IN quantized by llama.cpp's llama_model_quantize.\n"
    "FTYPE: a llama_ftype number (1 F16, 7 Q8_0, 2 Q4_0, 15 Q4_K_M, 18 Q6_K, 10 Q2_K, 30 IQ4_XS, 32 BF16, "
    "...)\n"
    "       or its name as llama-quantize takes it (F16, Q8_0, Q4_K_M, ...; case-insensitive).\n"
    "Options:\n"
    "  --threads N               threads (default 2)\n"
    "  --pure                    every tensor to FTYPE's type (no mixtures; also the 4th argument 'pure')\n"
    "  --allow-requantize        allow quantizing tensors that are already quantized\n"
    "  --leave-output-tensor     keep output.weight's type\n"
    "  --output-tensor-type T    output.weight to ggml type T (name or id)\n"
    "  --token-embedding-type T  token_embd.weight to ggml type T (name or id)\n"
    "  --quiet                   without llama.cpp's log lines (default: on stderr, as llama-quantize)\n"
    "Environment: REF_BACKEND_DIR (the CPU backends' folder; default the fetched package's).\n";

llama_ftype ParseFtype(const char* s) {
  if (*s >= '0' && *s <= '9') return llama_ftype(ref::ParseInt(kTool, "FTYPE", s, 0, 1023));
  for (const Ftype& f : kFtypes)
    if (strcasecmp(f.name, s) == 0) return f.ftype;
  std::string names;
  for (const Ftype& f : kFtypes) names += std::string(names.empty() ? "" : ", ") + f.name;
  ref::Usage(kTool,
             std::string("FTYPE: expected a llama_ftype number or one of ") + names + "; got '" + s + "'");
}

void Quiet(ggml_log_level, const char*, void*) {}

}  // namespace

int main(int argc, char** argv) {
  llama_model_quantize_params p = llama_model_quantize_default_params();
  p.nthread = 2;
  bool quiet = false;
  const std::vector<const char*> pos =
      ref::ParseArgs(kTool, kUsage, argc, argv, [&](const std::string& a, auto& value) {
        if (a == "--threads") {
          p.nthread = int(ref::ParseInt(kTool, "--threads", value(), 1, 1024));
        } else if (a == "--pure") {
          p.pure = true;
        } else if (a == "--allow-requantize") {
          p.allow_requantize = true;
        } else if (a == "--leave-output-tensor") {
          p.quantize_output_tensor = false;
        } else if (a == "--output-tensor-type") {
          p.output_tensor_type = ref::ParseType(kTool, "--output-tensor-type", value());
        } else if (a == "--token-embedding-type") {
          p.token_embedding_type = ref::ParseType(kTool, "--token-embedding-type", value());
        } else if (a == "--quiet") {
          quiet = true;
        } else {
          return false;
        }
        return true;
      });
  if (pos.size() == 4) {
    if (std::strcmp(pos[3], "pure") != 0)
      ref::Usage(kTool, std::string("the 4th argument is 'pure' or nothing, got '") + pos[3] + "'");
    p.pure = true;
  } else if (pos.size() != 3) {
    ref::Usage(kTool, "expected IN OUT FTYPE [pure], got " + std::to_string(pos.size()) + " arguments");
  }
  p.ftype = ParseFtype(pos[2]);
  if (quiet) llama_log_set(Quiet, nullptr);
  ref::LoadBackends();
  llama_backend_init();
  const uint32_t rc = llama_model_quantize(pos[0], pos[1], &p);
  llama_backend_free();
  if (rc != 0)
    std::fprintf(stderr, "quantize: %s -> %s failed (llama_model_quantize: %u)\n", pos[0], pos[1], rc);
  return int(rc != 0);
}
