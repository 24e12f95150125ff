// gguf-dump FILE [--json]: prints a GGUF file's metadata (with types; arrays summarised) and its
// tensor infos (type, shape in ggml order, data offset), then totals. Exit status 1 with a one-line
// error on a bad file. --file-size BYTES reads FILE as the first bytes of a larger GGUF
// (GgufFile::OpenHeader, as plan-model --header-only); --save-header OUT writes the header (through
// the padding before the data section: what plan-model --header-only needs) to OUT.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "cli_numbers.h"
#include "llama_args.h"
#include "output_path.h"
#include "stdout_check.h"
#include "stowage/runtime/atomic_file.h"
#include "stowage/runtime/gguf.h"

namespace {
using stowage::GgufValue;
using stowage::GgufValueType;

// A string for one line of text output: control characters escaped, cut after `max` bytes.
std::string Quote(std::string_view s, size_t max) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size() && i < max; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '\n')
      out += "\\n";
    else if (c == '\t')
      out += "\\t";
    else if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 32 || c == 127) {
      char b[8];
      std::snprintf(b, sizeof b, "\\x%02x", c);
      out += b;
    } else
      out += static_cast<char>(c);
  }
  return out + (s.size() > max ? "...\"" : "\"");
}

std::string Scalar(const GgufValue& v) {
  switch (v.type) {
    case GgufValueType::FLOAT32:
    case GgufValueType::FLOAT64: {
      char b[64];
      std::snprintf(b, sizeof b, "%g", v.f);
      return b;
    }
    case GgufValueType::BOOL:
      return v.u ? "true" : "false";
    case GgufValueType::STRING:
      return Quote(v.str, 120);
    case GgufValueType::UINT64:
      return std::to_string(v.u);
    default:
      return std::to_string(v.i);
  }
}

std::string Summary(const GgufValue& v) {
  if (!v.is_array()) return Scalar(v);
  if (v.elem_type == GgufValueType::ARRAY) {  // arrays of arrays: each element's own summary
    std::string s = "[arr x " + std::to_string(v.count) + "]";
    for (uint64_t i = 0; i < v.count && i < 3; ++i) s += (i ? ", " : " ") + Summary(v.nested[i]);
    return s + (v.count > 3 ? ", ..." : "");
  }
  std::string s =
      "[" + std::string(stowage::GgufValueTypeName(v.elem_type)) + " x " + std::to_string(v.count) + "]";
  std::string items;
  const uint64_t n = std::min<uint64_t>(v.count, 6);
  for (uint64_t i = 0; i < n; ++i) {
    if (i) items += ", ";
    if (v.elem_type == GgufValueType::STRING)
      items += Quote(v.strings[i], 24);
    else if (v.elem_type == GgufValueType::FLOAT32 || v.elem_type == GgufValueType::FLOAT64) {
      char b[32];
      std::snprintf(b, sizeof b, "%g", v.ArrayF64(i));
      items += b;
    } else
      items += std::to_string(v.ArrayI64(i));
  }
  return s + " " + items + (v.count > n ? ", ..." : "");
}

nlohmann::json ToJson(const GgufValue& v) {
  if (v.is_array()) {
    nlohmann::json a = nlohmann::json::array();
    for (uint64_t i = 0; i < v.count; ++i) {
      if (v.elem_type == GgufValueType::STRING)
        a.push_back(std::string(v.strings[i]));
      else if (v.elem_type == GgufValueType::ARRAY)
        a.push_back(ToJson(v.nested[i]));
      else if (v.elem_type == GgufValueType::FLOAT32 || v.elem_type == GgufValueType::FLOAT64)
        a.push_back(v.ArrayF64(i));
      else
        a.push_back(v.ArrayI64(i));
    }
    return a;
  }
  switch (v.type) {
    case GgufValueType::FLOAT32:
    case GgufValueType::FLOAT64:
      return v.f;
    case GgufValueType::BOOL:
      return v.u != 0;
    case GgufValueType::STRING:
      return std::string(v.str);
    case GgufValueType::UINT64:
      return v.u;
    default:
      return v.i;
  }
}
}  // namespace

namespace {

int Run(int argc, char** argv) {
  CLI::App app{"gguf-dump: print a GGUF file's metadata and tensor infos"};
  std::string path;
  bool json = false;
  app.add_option("file", path, "GGUF file")->required();
  app.add_flag("--json", json, "print JSON instead of text");
  uint64_t file_size = 0;
  app.add_option(
         "--file-size", file_size,
         "FILE is the first bytes of a GGUF file of this many bytes (its header, e.g. head -c 20M; as "
         "plan-model --header-only)")
      ->check(stowage::tools::IntegerIn(1, UINT64_MAX));
  std::string save_header;
  app.add_option("--save-header", save_header,
                 "write the header (magic through the padding before the data section) to this file, for "
                 "plan-model --header-only, instead of printing")
      ->excludes("--json");
  if (int rc = stowage::tools::ParseWithAliases(app, argc, argv, {}); rc >= 0) return rc;
  if (app.count("--save-header") > 0 && save_header.empty()) {
    std::fprintf(stderr, "gguf-dump: error: --save-header needs an output file name (it was empty)\n");
    return 1;
  }

  if (stowage::Status st =
          stowage::tools::CheckOutputIsNotInput("--save-header", save_header, {&path}, "the header");
      !st.ok()) {
    std::fprintf(stderr, "gguf-dump: error: %s\n", st.message().c_str());
    return 1;
  }
  auto file = app.count("--file-size") > 0 ? stowage::GgufFile::OpenHeader(path, file_size)
                                           : stowage::GgufFile::Open(path);
  if (!file.ok()) {
    std::fprintf(stderr, "gguf-dump: %s\n", file.status().message().c_str());
    return 1;
  }
  const auto& f = **file;
  if (!save_header.empty()) {
    if (stowage::Status st = stowage::WriteFileAtomic(save_header, f.bytes(), f.header_size()); !st.ok()) {
      std::fprintf(stderr, "gguf-dump: error: %s\n", st.message().c_str());
      return 1;
    }
    std::printf(
        "gguf-dump: wrote %s: the header of %s, %llu of its %llu bytes (plan-model --header-only %s "
        "--file-size %llu)\n",
        save_header.c_str(), path.c_str(), static_cast<unsigned long long>(f.header_size()),
        static_cast<unsigned long long>(f.file_size()), save_header.c_str(),
        static_cast<unsigned long long>(f.file_size()));
    return 0;
  }
  uint64_t total_bytes = 0, total_elems = 0;
  for (const auto& t : f.tensors()) {
    total_bytes += t.nbytes;
    total_elems += t.nelements();
  }

  if (json) {
    nlohmann::json j;
    j["file"] = path;
    j["version"] = f.version();
    j["alignment"] = f.alignment();
    j["tensor_info_offset"] = f.tensor_info_offset();
    j["data_offset"] = f.data_offset();
    j["file_size"] = f.file_size();
    nlohmann::json md = nlohmann::json::array();
    for (const auto& kv : f.kvs()) {
      nlohmann::json e;
      e["key"] = kv.key;
      e["type"] = stowage::GgufValueTypeName(kv.value.type);
      if (kv.value.is_array()) e["element_type"] = stowage::GgufValueTypeName(kv.value.elem_type);
      e["value"] = ToJson(kv.value);
      md.push_back(e);
    }
    j["metadata"] = md;
    nlohmann::json ts = nlohmann::json::array();
    for (const auto& t : f.tensors()) {
      nlohmann::json e;
      e["name"] = t.name;
      e["type"] = stowage::GgmlTypeName(t.type);
      e["ne"] = std::vector<int64_t>(t.ne, t.ne + t.n_dims);
      e["offset"] = t.offset;
      e["nbytes"] = t.nbytes;
      ts.push_back(e);
    }
    j["tensors"] = ts;
    j["n_tensors"] = f.tensors().size();
    j["n_kv"] = f.kvs().size();
    j["total_bytes"] = total_bytes;
    j["total_elements"] = total_elems;
    std::printf("%s\n", j.dump(1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    return 0;
  }

  std::printf(
      "%s: GGUF v%u, %zu key/value pairs, %zu tensors, alignment %u, data section at byte %llu, file size "
      "%llu bytes\n",
      path.c_str(), f.version(), f.kvs().size(), f.tensors().size(), f.alignment(),
      static_cast<unsigned long long>(f.data_offset()), static_cast<unsigned long long>(f.file_size()));
  std::printf("metadata:\n");
  int key_width = 40;
  for (const auto& kv : f.kvs())
    key_width = std::max(key_width, static_cast<int>(std::min<size_t>(kv.key.size(), 80)));
  for (const auto& kv : f.kvs())
    std::printf("  %-*s %-4s = %s\n", key_width, kv.key.c_str(), stowage::GgufValueTypeName(kv.value.type),
                Summary(kv.value).c_str());
  std::printf("tensors:\n");
  for (const auto& t : f.tensors()) {
    std::string shape;
    for (uint32_t d = 0; d < t.n_dims; ++d) shape += (d ? ", " : "") + std::to_string(t.ne[d]);
    std::printf("  %-32s %-7s [%s] offset %llu, %llu bytes\n", t.name.c_str(), stowage::GgmlTypeName(t.type),
                shape.c_str(), static_cast<unsigned long long>(t.offset),
                static_cast<unsigned long long>(t.nbytes));
  }
  std::map<std::string, std::pair<size_t, uint64_t>> by_type;  // type -> (tensors, bytes)
  for (const auto& t : f.tensors()) {
    auto& e = by_type[stowage::GgmlTypeName(t.type)];
    ++e.first;
    e.second += t.nbytes;
  }
  for (const auto& [type, e] : by_type)
    std::printf("type %-7s %zu tensors, %llu bytes\n", type.c_str(), e.first,
                static_cast<unsigned long long>(e.second));
  std::printf("total: %zu tensors, %llu elements, %llu bytes (%.2f MiB)\n", f.tensors().size(),
              static_cast<unsigned long long>(total_elems), static_cast<unsigned long long>(total_bytes),
              total_bytes / 1048576.0);
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return stowage::tools::RunTool("gguf-dump", Run, argc, argv); }
