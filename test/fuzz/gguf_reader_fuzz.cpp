// libFuzzer target for the GGUF reader (and, on what it accepts, the writer). Built and run by
// scripts/fuzz.sh with clang -fsanitize=fuzzer,address,undefined.
//
// Properties checked beyond "no crash, no leak, no UB":
//   - a rejected input yields one line that starts with "<name>: " and has no newline;
//   - every accepted file can be written back (GgufWriter::CopyFrom + WriteToBuffer) and the result
//     parses again with the same version, key/value pairs, tensor names, types and shapes;
//   - the typed accessors never fail on a key of the right type.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "stowage/runtime/gguf.h"
#include "stowage/runtime/gguf_writer.h"

namespace {
[[noreturn]] void Fail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "gguf fuzz property violated: %s: %s\n", what, detail.c_str());
  std::abort();
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace stowage;
  auto parsed = GgufFile::Parse(data, size, "fuzz.gguf");
  if (!parsed.ok()) {
    const std::string m = parsed.status().message();
    if (m.rfind("fuzz.gguf: offset ", 0) != 0 || m.find('\n') != std::string::npos) Fail("error message", m);
    return 0;
  }
  const GgufFile& f = **parsed;
  for (const auto& kv : f.kvs()) {
    if (kv.value.type == GgufValueType::STRING && !f.GetString(kv.key).ok()) Fail("GetString", kv.key);
    if (kv.value.is_array() && kv.value.elem_type == GgufValueType::STRING && !f.GetStringArray(kv.key).ok())
      Fail("GetStringArray", kv.key);
    if (kv.value.is_array() && kv.value.elem_type == GgufValueType::FLOAT32 && !f.GetF32Array(kv.key).ok())
      Fail("GetF32Array", kv.key);
  }
  GgufWriter w(f.version());
  Status st = w.CopyFrom(f);
  if (!st.ok()) Fail("CopyFrom", st.message());
  auto buf = w.WriteToBuffer();
  if (!buf.ok()) Fail("WriteToBuffer", buf.status().message());
  auto again = GgufFile::Parse(buf->data(), buf->size(), "rewritten.gguf");
  if (!again.ok()) Fail("reparse", again.status().message());
  const GgufFile& g = **again;
  if (g.version() != f.version() || g.kvs().size() != f.kvs().size() ||
      g.tensors().size() != f.tensors().size())
    Fail("rewritten counts",
         std::to_string(g.kvs().size()) + " kvs, " + std::to_string(g.tensors().size()) + " tensors");
  for (size_t i = 0; i < f.tensors().size(); ++i) {
    const auto& a = f.tensors()[i];
    const auto& b = g.tensors()[i];
    if (a.name != b.name || a.type != b.type || a.n_dims != b.n_dims ||
        std::memcmp(a.ne, b.ne, sizeof a.ne) != 0 ||
        std::memcmp(f.TensorData(a), g.TensorData(b), a.nbytes) != 0)
      Fail("rewritten tensor", a.name);
  }
  return 0;
}
