// Manifest JSON reader and writer (format: planner/registry/README.md, version 1).
// nlohmann::json does the syntax; this file checks the schema: unknown keys, missing fields,
// types and ranges, each reported as "<file>: <JSON path>: <expectation>" on one line.

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <initializer_list>
#include <iterator>
#include <nlohmann/json.hpp>
#include <set>
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "stowage/planner/manifest.h"
#include "stowage/planner/registry.h"  // ShippedRegistryDir: where shared op tables are found
#include "stowage/runtime/plan.h"
#include "stowage/runtime/read_file.h"

namespace stowage::planner {
namespace {

using json = nlohmann::ordered_json;

std::string KeyList(std::initializer_list<const char*> keys) {
  std::string s;
  for (const char* k : keys) {
    if (!s.empty()) s += ", ";
    s += k;
  }
  return s;
}

/// `s` with control characters written as \xHH, so that an error quoting a key or value from the
/// file (a JSON string may hold an escaped newline) stays on one line.
std::string OneLine(const std::string& s) {
  std::string out;
  for (unsigned char ch : s) {
    if (ch < 0x20 || ch == 0x7f) {
      char b[5];
      std::snprintf(b, sizeof b, "\\x%02x", ch);
      out += b;
    } else {
      out += static_cast<char>(ch);
    }
  }
  return out;
}

class Reader {
 public:
  explicit Reader(const std::string& file) : file_(file) {}
  const Status& status() const { return status_; }

  bool Fail(const std::string& path, const std::string& msg) {
    // A key or value quoted from the file can be of any length: the line stays readable.
    std::string line = OneLine(path) + ": " + OneLine(msg);
    if (line.size() > 1024) line = line.substr(0, 1000) + "... (" + std::to_string(line.size()) + " bytes)";
    if (status_.ok()) status_ = InvalidArgument(file_ + ": " + line);
    return false;
  }
  bool Expect(const std::string& path, const json& j, const std::string& what) {
    return Fail(path, "expected " + what + ", got " + std::string(j.type_name()));
  }

  /// `j` must be an object whose keys are all in `allowed`.
  bool Object(const json& j, const std::string& path, std::initializer_list<const char*> allowed) {
    if (!j.is_object()) return Expect(path, j, "an object");
    for (auto it = j.begin(); it != j.end(); ++it) {
      bool known = false;
      for (const char* k : allowed) known = known || it.key() == k;
      if (!known)
        return Fail(path, "unknown key '" + it.key() + "' (expected one of: " + KeyList(allowed) + ")");
    }
    return true;
  }
  /// Looks up `key`; missing + required -> error. Returns nullptr when absent.
  const json* Field(const json& obj, const std::string& path, const char* key, bool required,
                    const char* what) {
    auto it = obj.find(key);
    if (it == obj.end()) {
      if (required) Fail(path, std::string("missing required field '") + key + "' (" + what + ")");
      return nullptr;
    }
    return &*it;
  }
  static std::string Sub(const std::string& path, const char* key) { return path + "." + key; }
  static std::string Idx(const std::string& path, size_t i) { return path + "[" + std::to_string(i) + "]"; }

  bool U64(const json& obj, const std::string& path, const char* key, bool required, uint64_t* out,
           const char* what) {
    const json* j = Field(obj, path, key, required, what);
    if (!j) return status_.ok();
    if (!j->is_number_unsigned()) {
      if (j->is_number_integer())
        return Fail(Sub(path, key),
                    std::to_string(j->get<int64_t>()) + " is out of range (expected " + what + ", >= 0)");
      return Expect(Sub(path, key), *j, std::string("an unsigned integer (") + what + ")");
    }
    *out = j->get<uint64_t>();
    return true;
  }
  bool Bool(const json& obj, const std::string& path, const char* key, bool required, bool* out) {
    const json* j = Field(obj, path, key, required, "true or false");
    if (!j) return status_.ok();
    if (!j->is_boolean()) return Expect(Sub(path, key), *j, "true or false");
    *out = j->get<bool>();
    return true;
  }
  bool OptBool(const json& obj, const std::string& path, const char* key, std::optional<bool>* out) {
    bool v = false;
    if (obj.find(key) == obj.end()) return true;
    if (!Bool(obj, path, key, false, &v)) return false;
    *out = v;
    return true;
  }
  /// A string of at most `max_bytes` bytes (names: kMaxManifestNameBytes; free text such as
  /// notes and sources: kMaxManifestTextBytes).
  bool Str(const json& obj, const std::string& path, const char* key, bool required, std::string* out,
           const char* what, bool allow_empty = false, size_t max_bytes = kMaxManifestNameBytes) {
    const json* j = Field(obj, path, key, required, what);
    if (!j) return status_.ok();
    if (!j->is_string()) return Expect(Sub(path, key), *j, std::string("a string (") + what + ")");
    const std::string& text = j->get_ref<const std::string&>();
    if (text.size() > max_bytes)
      return Fail(Sub(path, key), "a string of " + std::to_string(text.size()) +
                                      " bytes, over the limit of " + std::to_string(max_bytes) + " bytes (" +
                                      what + ")");
    *out = text;
    if (out->empty() && !allow_empty)
      return Fail(Sub(path, key), std::string("expected a non-empty string (") + what + ")");
    // Names, descriptions and notes end up in log lines and plans: one line each.
    if (std::any_of(out->begin(), out->end(),
                    [](char ch) { return static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f; }))
      return Fail(Sub(path, key), std::string("expected a string without control characters (") + what +
                                      "), got \"" + OneLine(*out) + "\"");
    return true;
  }
  bool Positive(const json& obj, const std::string& path, const char* key, double* out, const char* what) {
    const json* j = Field(obj, path, key, true, what);
    if (!j) return false;
    if (!j->is_number()) return Expect(Sub(path, key), *j, std::string("a number (") + what + ")");
    *out = j->get<double>();
    if (!(*out > 0)) return Fail(Sub(path, key), "expected a positive number (" + std::string(what) + ")");
    return true;
  }
  bool NeArray(const json& obj, const std::string& path, const char* key, std::array<int64_t, 4>* out,
               int64_t min_value) {
    auto it = obj.find(key);
    if (it == obj.end()) return true;
    std::string p = Sub(path, key);
    if (!it->is_array() || it->empty() || it->size() > 4)
      return Expect(p, *it, "an array of 1 to 4 integers (ne0 first)");
    for (size_t i = 0; i < it->size(); ++i) {
      const json& e = (*it)[i];
      if (!e.is_number_integer()) return Expect(Idx(p, i), e, "an integer");
      int64_t v = e.get<int64_t>();
      if (v < min_value)
        return Fail(Idx(p, i),
                    std::to_string(v) + " is out of range (must be >= " + std::to_string(min_value) + ")");
      (*out)[i] = v;
    }
    return true;
  }

  bool Types(const json& j, const std::string& p, std::vector<GgmlType>* out) {
    if (!j.is_array()) return Expect(p, j, "an array of ggml type names");
    for (size_t i = 0; i < j.size(); ++i) {
      if (!j[i].is_string()) return Expect(Idx(p, i), j[i], "a ggml type name (\"f32\", \"q4_0\", ...)");
      auto t = ParseGgmlType(j[i].get<std::string>());
      if (!t.ok()) return Fail(Idx(p, i), "unknown ggml type '" + j[i].get<std::string>() + "'");
      out->push_back(*t);
    }
    return true;
  }

  bool Constraint(const json& j, const std::string& p, TensorConstraint* c) {
    if (!Object(j, p,
                {"present", "optional", "types", "contiguous", "host", "buft", "max_dims", "min_ne", "max_ne",
                 "ne_multiple_of"}))
      return false;
    if (!Bool(j, p, "present", false, &c->present) || !Bool(j, p, "optional", false, &c->optional))
      return false;
    if (auto it = j.find("types"); it != j.end() && !Types(*it, Sub(p, "types"), &c->types)) return false;
    if (!OptBool(j, p, "contiguous", &c->contiguous) || !OptBool(j, p, "host", &c->host)) return false;
    std::string buft;
    if (j.find("buft") != j.end()) {
      if (!Str(j, p, "buft", false, &buft, "buffer type name")) return false;
      c->buft = buft;
    }
    uint64_t max_dims = 0;
    if (!U64(j, p, "max_dims", false, &max_dims, "number of dims")) return false;
    if (max_dims > 4)
      return Fail(Sub(p, "max_dims"), std::to_string(max_dims) + " is out of range (must be 1..4)");
    c->max_dims = static_cast<int>(max_dims);
    return NeArray(j, p, "min_ne", &c->min_ne, 0) && NeArray(j, p, "max_ne", &c->max_ne, 0) &&
           NeArray(j, p, "ne_multiple_of", &c->ne_multiple_of, 1);
  }

  bool Rule(const json& j, const std::string& p, OpRule* r) {
    if (!Object(
            j, p,
            {"ops", "supported", "all_srcs_host", "src1_f32_or_vec_dot", "min_batch", "dst", "src", "note"}))
      return false;
    const json* ops = Field(j, p, "ops", true, "\"*\" or an array of ggml op names");
    if (!ops) return false;
    if (ops->is_string()) {
      if (ops->get<std::string>() != "*")
        return Fail(Sub(p, "ops"),
                    "expected \"*\" or an array of ggml op names, got \"" + ops->get<std::string>() + "\"");
    } else if (ops->is_array()) {
      if (ops->empty()) return Fail(Sub(p, "ops"), "expected at least one op (use \"*\" for every op)");
      for (size_t i = 0; i < ops->size(); ++i) {
        const json& e = (*ops)[i];
        if (!e.is_string()) return Expect(Idx(Sub(p, "ops"), i), e, "a ggml op name");
        auto op = ParseGgmlOp(e.get<std::string>());
        if (!op.ok()) return Fail(Idx(Sub(p, "ops"), i), "unknown ggml op '" + e.get<std::string>() + "'");
        r->ops.push_back(*op);
      }
    } else {
      return Expect(Sub(p, "ops"), *ops, "\"*\" or an array of ggml op names");
    }
    if (!Bool(j, p, "supported", true, &r->supported)) return false;
    if (!OptBool(j, p, "all_srcs_host", &r->all_srcs_host)) return false;
    if (!Bool(j, p, "src1_f32_or_vec_dot", false, &r->src1_f32_or_vec_dot)) return false;
    uint64_t mb = 0;
    if (!U64(j, p, "min_batch", false, &mb, "batch size")) return false;
    if (mb > static_cast<uint64_t>(INT64_MAX)) return Fail(Sub(p, "min_batch"), "out of range");
    r->min_batch = static_cast<int64_t>(mb);
    if (auto it = j.find("dst"); it != j.end()) {
      TensorConstraint c;
      if (!Constraint(*it, Sub(p, "dst"), &c)) return false;
      r->dst = c;
    }
    if (auto it = j.find("src"); it != j.end()) {
      std::string sp = Sub(p, "src");
      if (!it->is_array() || it->size() > 10)
        return Expect(sp, *it, "an array of up to 10 tensor constraints (null = none)");
      for (size_t i = 0; i < it->size(); ++i) {
        if ((*it)[i].is_null()) {
          r->src.emplace_back();
          continue;
        }
        TensorConstraint c;
        if (!Constraint((*it)[i], Idx(sp, i), &c)) return false;
        r->src.emplace_back(c);
      }
    }
    return Str(j, p, "note", false, &r->note, "text", true, kMaxManifestTextBytes);
  }

  /// The "default" and "rules" of an op_support object (or of an op table file) at `p`.
  bool OpSupport(const json& j, const std::string& p, OpSupportTable* t) {
    std::string def_s;
    if (!Str(j, p, "default", true, &def_s, "\"supported\" or \"unsupported\"")) return false;
    if (def_s != "supported" && def_s != "unsupported")
      return Fail(Sub(p, "default"), "expected \"supported\" or \"unsupported\", got \"" + def_s + "\"");
    t->default_supported = def_s == "supported";
    if (auto it = j.find("rules"); it != j.end() && !Rules(*it, Sub(p, "rules"), &t->rules)) return false;
    return true;
  }

  /// An op table file: {"default", "rules", "note"} at its root.
  bool OpTableFile(const json& j, OpSupportTable* t) {
    if (!Object(j, "$", {"default", "rules", "note"})) return false;
    std::string note;
    if (!Str(j, "$", "note", false, &note, "text", true, kMaxManifestTextBytes)) return false;
    return OpSupport(j, "$", t);
  }

  /// `op_support: {"table": name}`: reads op_tables/<name>.json beside this manifest, else in the
  /// shipped registry folder. `p` is the JSON path of "table", for errors.
  bool SharedOpTable(const std::string& name, const std::string& p, OpSupportTable* t) {
    bool name_ok = !name.empty() && name.size() <= 64 && name[0] != '.' && name[0] != '-';
    for (char c : name)
      name_ok =
          name_ok && ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-');
    if (!name_ok)
      return Fail(p,
                  "expected an op table name of up to 64 characters [a-z0-9._-] not starting with '.' or '-' "
                  "(a file op_tables/<name>.json), got \"" +
                      name + "\"");
    auto slash = file_.rfind('/');
    std::vector<std::string> dirs = {
        (slash == std::string::npos ? std::string(".") : file_.substr(0, slash)) + "/op_tables"};
    const std::string shipped = ShippedRegistryDir(nullptr) + "/op_tables";
    if (shipped != dirs[0]) dirs.push_back(shipped);
    for (const std::string& dir : dirs) {
      const std::string path = dir + "/" + name + ".json";
      struct stat st;
      if (stat(path.c_str(), &st) != 0) continue;
      auto table = LoadOpTableFile(path);
      if (!table.ok()) {
        if (status_.ok())
          status_ = Status(table.status().code(),
                           file_ + ": " + p + ": op table '" + name + "': " + table.status().message());
        return false;
      }
      *t = *std::move(table);
      return true;
    }
    std::string looked;
    for (const std::string& dir : dirs) looked += (looked.empty() ? "" : " or ") + dir + "/" + name + ".json";
    return Fail(p, "no op table '" + name + "' (expected " + looked + ")");
  }

  bool Rules(const json& j, const std::string& p, std::vector<OpRule>* out) {
    if (!j.is_array()) return Expect(p, j, "an array of rules");
    for (size_t i = 0; i < j.size(); ++i) {
      OpRule r;
      if (!Rule(j[i], Idx(p, i), &r)) return false;
      out->push_back(std::move(r));
    }
    return true;
  }

  bool Buft(const json& j, const std::string& p, bool is_extra, BufferType* b) {
    if (is_extra) {
      if (!Object(j, p, {"name", "alignment", "max_size", "is_host", "supports_op", "note"})) return false;
    } else if (!Object(j, p, {"name", "alignment", "max_size", "is_host", "note"})) {
      return false;
    }
    if (!Str(j, p, "name", true, &b->name, "buffer type name")) return false;
    if (!U64(j, p, "alignment", true, &b->alignment, "bytes")) return false;
    if (b->alignment == 0 || (b->alignment & (b->alignment - 1)) != 0 || b->alignment > kMaxBufferAlignment)
      return Fail(Sub(p, "alignment"),
                  std::to_string(b->alignment) + " is out of range (must be a power of two up to " +
                      std::to_string(kMaxBufferAlignment) + ", the most a plan records)");
    if (!U64(j, p, "max_size", false, &b->max_size, "bytes")) return false;
    if (b->max_size == 0)
      return Fail(Sub(p, "max_size"), "0 is out of range (must be > 0; omit for no limit)");
    if (!Bool(j, p, "is_host", true, &b->is_host)) return false;
    if (is_extra) {
      const json* r = Field(j, p, "supports_op", true, "rules of this buffer type's supports_op");
      if (!r || !Rules(*r, Sub(p, "supports_op"), &b->supports_op)) return false;
    }
    return Str(j, p, "note", false, &b->note, "text", true, kMaxManifestTextBytes);
  }

  bool Figure(const json& j, const std::string& p, const char* value_key, PerfFigure* f) {
    if (!Object(j, p, {value_key, "source"})) return false;
    if (!Positive(j, p, value_key, &f->value, value_key)) return false;
    return Str(j, p, "source", true, &f->source, "where the figure comes from", false, kMaxManifestTextBytes);
  }

  bool Perf(const json& j, const std::string& p, Performance* perf) {
    if (!Object(j, p, {"memory_bandwidth", "host_link_bandwidth", "peak_flops"})) return false;
    for (const char* key : {"memory_bandwidth", "host_link_bandwidth"}) {
      auto it = j.find(key);
      if (it == j.end()) continue;
      PerfFigure f;
      if (!Figure(*it, Sub(p, key), "bytes_per_second", &f)) return false;
      (std::string(key) == "memory_bandwidth" ? perf->memory_bandwidth : perf->host_link_bandwidth) = f;
    }
    if (auto it = j.find("peak_flops"); it != j.end()) {
      std::string pp = Sub(p, "peak_flops");
      if (!it->is_object()) return Expect(pp, *it, "an object keyed by ggml type name");
      for (auto e = it->begin(); e != it->end(); ++e) {
        auto t = ParseGgmlType(e.key());
        if (!t.ok())
          return Fail(pp,
                      "unknown key '" + e.key() + "' (expected a ggml type name such as f16, bf16, f32, i8)");
        PerfFigure f;
        if (!Figure(e.value(), pp + "." + e.key(), "flops_per_second", &f)) return false;
        perf->peak_flops[GgmlTypeName(*t)] = f;
      }
    }
    return true;
  }

  /// Reads manifest `j` (the file's top-level object, path "$") into `m`: its keys in the file
  /// format's order, the first error recorded (status()) and false returned.
  bool Manifest(const json& j, DeviceManifest* m) {
    const std::string p = "$";
    if (!Object(j, p,
                {"manifest_version", "backend", "name", "description", "type", "memory", "caps",
                 "buffer_types", "supports_buft", "op_support", "offload_op", "performance", "notes"}))
      return false;
    if (!Identity(j, p, m) || !Memory(j, p, m) || !Caps(j, p, m) || !BufferTypes(j, p, m) ||
        !SupportsBuft(j, p, m) || !OpSupportOrTable(j, p, m) || !OffloadOp(j, p, m))
      return false;
    if (auto it = j.find("performance"); it != j.end() && !Perf(*it, Sub(p, "performance"), &m->performance))
      return false;
    if (!Str(j, p, "notes", false, &m->notes, "text", true, kMaxManifestTextBytes)) return false;
    return RuleBuftsDefined(*m);
  }

  /// manifest_version, backend, name, description and type, the backend one of the ggml backends
  /// this build plans for with ggml's device type for it.
  bool Identity(const json& j, const std::string& p, DeviceManifest* m) {
    uint64_t version = 0;
    if (!U64(j, p, "manifest_version", true, &version, "format version")) return false;
    if (version != static_cast<uint64_t>(kManifestVersion))
      return Fail(Sub(p, "manifest_version"), "unsupported version " + std::to_string(version) +
                                                  " (this build reads " + std::to_string(kManifestVersion) +
                                                  ")");
    m->manifest_version = kManifestVersion;
    if (!Str(j, p, "backend", true, &m->backend, "ggml backend name: CPU, CUDA, BLAS, RPC, ONEDNN, ..."))
      return false;
    if (!Str(j, p, "name", true, &m->name, "device name")) return false;
    if (!Str(j, p, "description", true, &m->description, "device model name", false, kMaxManifestTextBytes))
      return false;
    std::string type;
    if (!Str(j, p, "type", true, &type, "CPU | GPU | ACCEL")) return false;
    auto t = ParseDeviceType(type);
    if (!t.ok()) return Fail(Sub(p, "type"), "expected CPU, GPU or ACCEL, got \"" + type + "\"");
    m->type = *t;
    // The ggml backends this build plans for, each with the device type ggml gives its devices
    // (ggml-cpu: CPU; ggml-cuda and ggml-rpc: GPU; ggml-blas and oneDNN: ACCEL). Another name
    // ("VULKAN") has no runtime backend; another type would be placed by the wrong rules.
    static constexpr std::pair<const char*, DeviceType> kBackends[] = {{"CPU", DeviceType::kCpu},
                                                                       {"CUDA", DeviceType::kGpu},
                                                                       {"RPC", DeviceType::kGpu},
                                                                       {"BLAS", DeviceType::kAccel},
                                                                       {"ONEDNN", DeviceType::kAccel}};
    const auto* known = std::find_if(std::begin(kBackends), std::end(kBackends),
                                     [&](const auto& b) { return m->backend == b.first; });
    if (known == std::end(kBackends)) {
      std::string names;
      for (const auto& b : kBackends) names += (names.empty() ? "" : ", ") + std::string(b.first);
      return Fail(Sub(p, "backend"),
                  "unknown backend \"" + OneLine(m->backend) + "\" (expected one of " + names + ")");
    }
    if (known->second != m->type)
      return Fail(Sub(p, "type"), "expected " + std::string(DeviceTypeName(known->second)) + " for backend " +
                                      m->backend + " (ggml's device type for it), got \"" + type + "\"");
    return true;
  }

  /// memory: total, free (<= total), reserve (<= total when total is known).
  bool Memory(const json& j, const std::string& p, DeviceManifest* m) {
    const json* mem = Field(j, p, "memory", true, "object with total, free, reserve in bytes");
    if (!mem) return false;
    std::string mp = Sub(p, "memory");
    if (!Object(*mem, mp, {"total", "free", "reserve"})) return false;
    if (!U64(*mem, mp, "total", true, &m->memory_total, "bytes") ||
        !U64(*mem, mp, "free", true, &m->memory_free, "bytes") ||
        !U64(*mem, mp, "reserve", false, &m->memory_reserve, "bytes"))
      return false;
    if (m->memory_free > m->memory_total)
      return Fail(Sub(mp, "free"),
                  std::to_string(m->memory_free) +
                      " is out of range (must be <= memory.total = " + std::to_string(m->memory_total) + ")");
    if (m->memory_total > 0 && m->memory_reserve > m->memory_total)
      return Fail(Sub(mp, "reserve"),
                  std::to_string(m->memory_reserve) +
                      " is out of range (must be <= memory.total = " + std::to_string(m->memory_total) + ")");
    return true;
  }

  /// caps: async, host_buffer, buffer_from_host_ptr, events.
  bool Caps(const json& j, const std::string& p, DeviceManifest* m) {
    const json* caps =
        Field(j, p, "caps", true, "object with async, host_buffer, buffer_from_host_ptr, events");
    if (!caps) return false;
    std::string cp = Sub(p, "caps");
    if (!Object(*caps, cp, {"async", "host_buffer", "buffer_from_host_ptr", "events"})) return false;
    return Bool(*caps, cp, "async", true, &m->caps.async) &&
           Bool(*caps, cp, "host_buffer", true, &m->caps.host_buffer) &&
           Bool(*caps, cp, "buffer_from_host_ptr", true, &m->caps.buffer_from_host_ptr) &&
           Bool(*caps, cp, "events", true, &m->caps.events);
  }

  /// buffer_types: default, host, split, extra; is_host as ggml's device kinds have it, caps.host_buffer
  /// matching buffer_types.host, names unique within the device.
  bool BufferTypes(const json& j, const std::string& p, DeviceManifest* m) {
    const json* bt = Field(j, p, "buffer_types", true, "object with default, host, split, extra");
    if (!bt) return false;
    std::string bp = Sub(p, "buffer_types");
    const std::string cp = Sub(p, "caps");
    if (!Object(*bt, bp, {"default", "host", "split", "extra"})) return false;
    const json* def = Field(*bt, bp, "default", true, "the device's default buffer type");
    if (!def || !Buft(*def, Sub(bp, "default"), false, &m->default_buft)) return false;
    for (const char* key : {"host", "split"}) {
      auto it = bt->find(key);
      if (it == bt->end()) continue;
      BufferType b;
      if (!Buft(*it, Sub(bp, key), false, &b)) return false;
      (std::string(key) == "host" ? m->host_buft : m->split_buft) = b;
    }
    // A GPU's own buffers are device memory (ggml_backend_cuda_buffer_type is not host); calling
    // them host would let the CPU read them in place.
    if (m->type == DeviceType::kGpu && m->default_buft.is_host)
      return Fail(Sub(Sub(bp, "default"), "is_host"),
                  "expected false (a GPU's default buffer type is device memory)");
    if (m->host_buft && !m->host_buft->is_host)
      return Fail(Sub(Sub(bp, "host"), "is_host"), "expected true (a host buffer type is host memory)");
    if (m->caps.host_buffer != m->host_buft.has_value())
      return Fail(Sub(cp, "host_buffer"), std::string("expected ") + (m->host_buft ? "true" : "false") +
                                              " (must match whether buffer_types.host is given)");
    if (auto it = bt->find("extra"); it != bt->end()) {
      std::string ep = Sub(bp, "extra");
      if (!it->is_array()) return Expect(ep, *it, "an array of buffer types");
      for (size_t i = 0; i < it->size(); ++i) {
        BufferType b;
        if (!Buft((*it)[i], Idx(ep, i), true, &b)) return false;
        m->extra_bufts.push_back(std::move(b));
      }
    }
    // Buffer-type names identify buffer types: they must be unique within the device.
    std::vector<std::pair<std::string, std::string>> names = {{m->default_buft.name, Sub(bp, "default")}};
    if (m->host_buft) names.push_back({m->host_buft->name, Sub(bp, "host")});
    if (m->split_buft) names.push_back({m->split_buft->name, Sub(bp, "split")});
    for (size_t i = 0; i < m->extra_bufts.size(); ++i)
      names.push_back({m->extra_bufts[i].name, Idx(Sub(bp, "extra"), i)});
    for (size_t a = 0; a < names.size(); ++a)
      for (size_t b = 0; b < a; ++b)
        if (names[a].first == names[b].first)
          return Fail(Sub(names[a].second, "name"),
                      "duplicate buffer type name '" + names[a].first + "' (also " + names[b].second + ")");
    return true;
  }

  /// supports_buft (optional): any_host and the names of the buffer types the device can use.
  bool SupportsBuft(const json& j, const std::string& p, DeviceManifest* m) {
    if (auto it = j.find("supports_buft"); it != j.end()) {
      std::string sp = Sub(p, "supports_buft");
      if (!Object(*it, sp, {"any_host", "names"})) return false;
      if (!Bool(*it, sp, "any_host", false, &m->supports_buft.any_host)) return false;
      if (auto n = it->find("names"); n != it->end()) {
        if (!n->is_array()) return Expect(Sub(sp, "names"), *n, "an array of buffer type names");
        for (size_t i = 0; i < n->size(); ++i) {
          if (!(*n)[i].is_string()) return Expect(Idx(Sub(sp, "names"), i), (*n)[i], "a buffer type name");
          if ((*n)[i].get_ref<const std::string&>().size() > kMaxManifestNameBytes)
            return Fail(Idx(Sub(sp, "names"), i),
                        "a string of " + std::to_string((*n)[i].get_ref<const std::string&>().size()) +
                            " bytes, over the limit of " + std::to_string(kMaxManifestNameBytes) +
                            " bytes (buffer type name)");
          m->supports_buft.names.push_back((*n)[i].get<std::string>());
          if (OneLine(m->supports_buft.names.back()) != m->supports_buft.names.back())
            return Fail(Idx(Sub(sp, "names"), i), "expected a buffer type name without control characters");
        }
      }
    }
    return true;
  }

  /// op_support: default and rules, or the name of a shared op table file.
  bool OpSupportOrTable(const json& j, const std::string& p, DeviceManifest* m) {
    const json* os = Field(j, p, "op_support", true,
                           "object with default and rules, or with the table of an op table file");
    if (!os) return false;
    std::string op = Sub(p, "op_support");
    if (os->is_object() && os->contains("table")) {
      if (!Object(*os, op, {"table"})) return false;
      std::string name;
      if (!Str(*os, op, "table", true, &name, "op table name")) return false;
      if (!SharedOpTable(name, Sub(op, "table"), &m->op_support)) return false;
    } else {
      if (!Object(*os, op, {"default", "rules"})) return false;
      if (!OpSupport(*os, op, &m->op_support)) return false;
    }
    return true;
  }

  /// offload_op (optional): min_batch in 1..2^30 (32 when not given).
  bool OffloadOp(const json& j, const std::string& p, DeviceManifest* m) {
    if (auto it = j.find("offload_op"); it != j.end()) {
      std::string fp = Sub(p, "offload_op");
      if (!Object(*it, fp, {"min_batch"})) return false;
      uint64_t mb = 32;
      if (!U64(*it, fp, "min_batch", false, &mb, "batch size")) return false;
      if (mb == 0 || mb > (1u << 30))
        return Fail(Sub(fp, "min_batch"), std::to_string(mb) + " is out of range (must be 1..2^30)");
      m->offload_op = OffloadRule{static_cast<int64_t>(mb)};
    }
    return true;
  }

  /// Every "buft" a supports_op rule names (op_support.rules and the extra buffer types' rules), and
  /// every name in supports_buft.names, must be a buffer type of this device: a rule about another
  /// name could never match (a typo), and a device said to support a buffer type nobody defines
  /// failed later, in placement, with a message naming no file.
  bool RuleBuftsDefined(const DeviceManifest& m) {
    std::vector<std::string> defined = {m.default_buft.name};
    if (m.host_buft) defined.push_back(m.host_buft->name);
    if (m.split_buft) defined.push_back(m.split_buft->name);
    for (const BufferType& b : m.extra_bufts) defined.push_back(b.name);
    auto defined_names = [&] {
      std::string names;
      for (const std::string& d : defined) names += (names.empty() ? "" : ", ") + d;
      return names;
    };
    for (size_t i = 0; i < m.supports_buft.names.size(); ++i)
      if (std::find(defined.begin(), defined.end(), m.supports_buft.names[i]) == defined.end())
        return Fail(Idx("$.supports_buft.names", i),
                    "buffer type '" + m.supports_buft.names[i] +
                        "' is not defined by this manifest (its buffer types: " + defined_names() + ")");
    auto check = [&](const std::vector<OpRule>& rules, const std::string& p) {
      for (size_t i = 0; i < rules.size(); ++i) {
        auto one = [&](const std::optional<TensorConstraint>& c, const std::string& cp) {
          if (!c || !c->buft || std::find(defined.begin(), defined.end(), *c->buft) != defined.end())
            return true;
          std::string names;
          for (const std::string& d : defined) names += (names.empty() ? "" : ", ") + d;
          return Fail(Sub(cp, "buft"), "buffer type '" + *c->buft +
                                           "' is not defined by this manifest (its buffer types: " + names +
                                           ")");
        };
        if (!one(rules[i].dst, Sub(Idx(p, i), "dst"))) return false;
        for (size_t k = 0; k < rules[i].src.size(); ++k)
          if (!one(rules[i].src[k], Idx(Sub(Idx(p, i), "src"), k))) return false;
      }
      return true;
    };
    if (!check(m.op_support.rules, "$.op_support.rules")) return false;
    for (size_t e = 0; e < m.extra_bufts.size(); ++e)
      if (!check(m.extra_bufts[e].supports_op, Sub(Idx("$.buffer_types.extra", e), "supports_op")))
        return false;
    return true;
  }

 private:
  const std::string& file_;
  Status status_;
};

// nlohmann exception text without its "[json.exception.<kind>.<id>] " prefix.
std::string WithoutId(std::string what) {
  if (auto pos = what.find("] "); pos != std::string::npos) what = what.substr(pos + 2);
  for (auto& c : what) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return what;
}

// ---- writer ----------------------------------------------------------------------------------

json ConstraintJson(const TensorConstraint& c) {
  json j = json::object();
  if (!c.present) {
    j["present"] = false;
    return j;
  }
  if (c.optional) j["optional"] = true;
  if (!c.types.empty()) {
    json t = json::array();
    for (GgmlType ty : c.types) t.push_back(GgmlTypeName(ty));
    j["types"] = t;
  }
  if (c.contiguous) j["contiguous"] = *c.contiguous;
  if (c.host) j["host"] = *c.host;
  if (c.buft) j["buft"] = *c.buft;
  if (c.max_dims > 0) j["max_dims"] = c.max_dims;
  auto ne = [&](const char* key, const std::array<int64_t, 4>& a, int64_t neutral) {
    int last = -1;
    for (int i = 0; i < 4; ++i)
      if (a[i] != neutral) last = i;
    if (last < 0) return;
    json arr = json::array();
    for (int i = 0; i <= last; ++i) arr.push_back(a[i]);
    j[key] = arr;
  };
  ne("min_ne", c.min_ne, 0);
  ne("max_ne", c.max_ne, 0);
  ne("ne_multiple_of", c.ne_multiple_of, 1);
  return j;
}

json RulesJson(const std::vector<OpRule>& rules) {
  json arr = json::array();
  for (const auto& r : rules) {
    json j = json::object();
    if (r.ops.empty()) {
      j["ops"] = "*";
    } else {
      json ops = json::array();
      for (GgmlOp op : r.ops) ops.push_back(GgmlOpName(op));
      j["ops"] = ops;
    }
    j["supported"] = r.supported;
    if (r.all_srcs_host) j["all_srcs_host"] = *r.all_srcs_host;
    if (r.src1_f32_or_vec_dot) j["src1_f32_or_vec_dot"] = true;
    if (r.min_batch > 0) j["min_batch"] = r.min_batch;
    if (r.dst) j["dst"] = ConstraintJson(*r.dst);
    if (!r.src.empty()) {
      json s = json::array();
      for (const auto& c : r.src) s.push_back(c ? ConstraintJson(*c) : json(nullptr));
      j["src"] = s;
    }
    if (!r.note.empty()) j["note"] = r.note;
    arr.push_back(j);
  }
  return arr;
}

json BuftJson(const BufferType& b, bool is_extra) {
  json j = json::object();
  j["name"] = b.name;
  j["alignment"] = b.alignment;
  if (b.max_size != UINT64_MAX) j["max_size"] = b.max_size;
  j["is_host"] = b.is_host;
  if (is_extra) j["supports_op"] = RulesJson(b.supports_op);
  if (!b.note.empty()) j["note"] = b.note;
  return j;
}

json FigureJson(const PerfFigure& f, const char* key) {
  json j = json::object();
  j[key] = f.value;
  j["source"] = f.source;
  return j;
}

// JSON text -> document, with one-line errors naming `file`; duplicate keys are refused.
Result<json> ParseJsonDocument(std::string_view text, const std::string& file) {
  // nlohmann keeps the last of duplicate keys silently; a manifest must not have any. The parser
  // callback sees every key; a stack of (JSON path, keys seen) per open object finds duplicates.
  struct Frame {
    std::string path;
    std::set<std::string> keys;
    std::string last_key;
    size_t next_index = 0;
    bool is_array = false;
  };
  std::vector<Frame> stack;
  std::string duplicate;
  auto child_path = [&]() -> std::string {
    if (stack.empty()) return "$";
    Frame& f = stack.back();
    return f.is_array ? f.path + "[" + std::to_string(f.next_index++) + "]" : f.path + "." + f.last_key;
  };
  // Manifests nest at most about 10 levels; a far deeper document is not one (its paths would cost
  // memory quadratic in the depth), so the parse stops there.
  constexpr int kMaxDepth = 32;
  struct TooDeep {};
  json::parser_callback_t cb = [&](int depth, json::parse_event_t ev, json& parsed) {
    switch (ev) {
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start: {
        if (depth >= kMaxDepth) throw TooDeep{};
        std::string p = child_path();
        stack.push_back({p, {}, {}, 0, ev == json::parse_event_t::array_start});
        break;
      }
      case json::parse_event_t::object_end:
      case json::parse_event_t::array_end:
        if (!stack.empty()) stack.pop_back();
        break;
      case json::parse_event_t::key: {
        Frame& f = stack.back();
        f.last_key = parsed.get<std::string>();
        if (!f.keys.insert(f.last_key).second && duplicate.empty())
          duplicate = file + ": " + OneLine(f.path) + ": duplicate key '" + OneLine(f.last_key) + "'";
        break;
      }
      case json::parse_event_t::value:
        if (!stack.empty() && stack.back().is_array) stack.back().next_index++;
        break;
    }
    return true;
  };
  json j;
  try {
    j = json::parse(text.begin(), text.end(), cb);
  } catch (const json::parse_error& e) {
    // nlohmann's message: "[json.exception.parse_error.101] parse error at line L, column C: ..."
    return DataLoss(file + ": byte " + std::to_string(e.byte) +
                    ": JSON syntax error: " + WithoutId(e.what()));
  } catch (const json::exception& e) {
    // e.g. out_of_range.406 "number overflow parsing '1e999'"
    return DataLoss(file + ": JSON value error: " + WithoutId(e.what()));
  } catch (const TooDeep&) {
    return DataLoss(file + ": " + stack.back().path + ": JSON nested deeper than " +
                    std::to_string(kMaxDepth) + " levels (device manifests nest at most about 10)");
  }
  if (!duplicate.empty()) return InvalidArgument(duplicate);
  return j;
}

}  // namespace

Result<DeviceManifest> ParseManifest(std::string_view text, const std::string& file) {
  STOWAGE_ASSIGN_OR_RETURN(json j, ParseJsonDocument(text, file));
  DeviceManifest m;
  Reader r(file);
  if (!r.Manifest(j, &m)) return r.status();
  m.source_path = file;
  return m;
}

Result<OpSupportTable> LoadOpTableFile(const std::string& path) {
  STOWAGE_ASSIGN_OR_RETURN(std::string text,
                           ReadRegularFile(path, kMaxManifestBytes, "an op table file (.json)"));
  STOWAGE_ASSIGN_OR_RETURN(json j, ParseJsonDocument(text, path));
  OpSupportTable t;
  Reader r(path);
  if (!r.OpTableFile(j, &t)) return r.status();
  return t;
}

Result<DeviceManifest> LoadManifestFile(const std::string& path) {
  STOWAGE_ASSIGN_OR_RETURN(std::string text,
                           ReadRegularFile(path, kMaxManifestBytes, "a manifest file (.json)"));
  // A manifest is one JSON object: anything else (a GGUF model or plan given by mistake, a binary
  // file) is named as such, not as a syntax error at byte 1.
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string::npos)
    return DataLoss(path + ": empty file, expected a device manifest (a JSON object starting with '{')");
  if (text[first] != '{') {
    char found[8];
    std::snprintf(found, sizeof found, "0x%02x", static_cast<unsigned char>(text[first]));
    return DataLoss(path + ": not a device manifest: expected a JSON object starting with '{', found byte " +
                    found + " at offset " + std::to_string(first));
  }
  return ParseManifest(text, path);
}

std::string SerializeManifest(const DeviceManifest& m) {
  json j = json::object();
  j["manifest_version"] = kManifestVersion;
  j["backend"] = m.backend;
  j["name"] = m.name;
  j["description"] = m.description;
  j["type"] = DeviceTypeName(m.type);
  j["memory"] = {{"total", m.memory_total}, {"free", m.memory_free}, {"reserve", m.memory_reserve}};
  j["caps"] = {{"async", m.caps.async},
               {"host_buffer", m.caps.host_buffer},
               {"buffer_from_host_ptr", m.caps.buffer_from_host_ptr},
               {"events", m.caps.events}};
  json bt = json::object();
  bt["default"] = BuftJson(m.default_buft, false);
  if (m.host_buft) bt["host"] = BuftJson(*m.host_buft, false);
  if (m.split_buft) bt["split"] = BuftJson(*m.split_buft, false);
  if (!m.extra_bufts.empty()) {
    json e = json::array();
    for (const auto& b : m.extra_bufts) e.push_back(BuftJson(b, true));
    bt["extra"] = e;
  }
  j["buffer_types"] = bt;
  if (m.supports_buft.any_host || !m.supports_buft.names.empty()) {
    json sb = json::object();
    if (m.supports_buft.any_host) sb["any_host"] = true;
    if (!m.supports_buft.names.empty()) sb["names"] = m.supports_buft.names;
    j["supports_buft"] = sb;
  }
  j["op_support"] = {{"default", m.op_support.default_supported ? "supported" : "unsupported"},
                     {"rules", RulesJson(m.op_support.rules)}};
  if (m.offload_op) j["offload_op"] = {{"min_batch", m.offload_op->min_batch}};
  const Performance& p = m.performance;
  if (p.memory_bandwidth || p.host_link_bandwidth || !p.peak_flops.empty()) {
    json pj = json::object();
    if (p.memory_bandwidth) pj["memory_bandwidth"] = FigureJson(*p.memory_bandwidth, "bytes_per_second");
    if (p.host_link_bandwidth)
      pj["host_link_bandwidth"] = FigureJson(*p.host_link_bandwidth, "bytes_per_second");
    if (!p.peak_flops.empty()) {
      json pf = json::object();
      for (const auto& [k, f] : p.peak_flops) pf[k] = FigureJson(f, "flops_per_second");
      pj["peak_flops"] = pf;
    }
    j["performance"] = pj;
  }
  if (!m.notes.empty()) j["notes"] = m.notes;
  return j.dump(2) + "\n";
}

std::string ManifestDigest(const DeviceManifest& m) {
  std::string text = SerializeManifest(m);
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx",
                static_cast<unsigned long long>(XXH64(text.data(), text.size(), 0)));
  return std::string("xxh64:") + hex;
}

}  // namespace stowage::planner
