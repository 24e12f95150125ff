// GGUF reader: see gguf.h for the format and the validation rules.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>

#include "gguf_rules.h"
#include "stowage/runtime/gguf.h"

namespace stowage {

namespace {
constexpr uint32_t kMaxNestingDepth = 8;
using gguf_rules::kMaxTensorName;
using gguf_rules::ScalarSize;

template <typename T>
T LoadLE(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}
}  // namespace

const char* GgufValueTypeName(GgufValueType type) {
  switch (type) {
    case GgufValueType::UINT8:
      return "u8";
    case GgufValueType::INT8:
      return "i8";
    case GgufValueType::UINT16:
      return "u16";
    case GgufValueType::INT16:
      return "i16";
    case GgufValueType::UINT32:
      return "u32";
    case GgufValueType::INT32:
      return "i32";
    case GgufValueType::FLOAT32:
      return "f32";
    case GgufValueType::BOOL:
      return "bool";
    case GgufValueType::STRING:
      return "str";
    case GgufValueType::ARRAY:
      return "arr";
    case GgufValueType::UINT64:
      return "u64";
    case GgufValueType::INT64:
      return "i64";
    case GgufValueType::FLOAT64:
      return "f64";
  }
  return "?";
}

bool IsGgufIntegerType(GgufValueType type) {
  switch (type) {
    case GgufValueType::UINT8:
    case GgufValueType::INT8:
    case GgufValueType::UINT16:
    case GgufValueType::INT16:
    case GgufValueType::UINT32:
    case GgufValueType::INT32:
    case GgufValueType::UINT64:
    case GgufValueType::INT64:
      return true;
    default:
      return false;
  }
}

bool IsGgufSignedType(GgufValueType type) {
  return type == GgufValueType::INT8 || type == GgufValueType::INT16 || type == GgufValueType::INT32 ||
         type == GgufValueType::INT64;
}

double GgufValue::ArrayF64(uint64_t idx) const {
  const uint8_t* p = raw + idx * ScalarSize(elem_type);
  switch (elem_type) {
    case GgufValueType::FLOAT32:
      return LoadLE<float>(p);
    case GgufValueType::FLOAT64:
      return LoadLE<double>(p);
    default:
      return static_cast<double>(ArrayI64(idx));
  }
}

int64_t GgufValue::ArrayI64(uint64_t idx) const {
  const uint8_t* p = raw + idx * ScalarSize(elem_type);
  switch (elem_type) {
    case GgufValueType::UINT8:
    case GgufValueType::BOOL:
      return *p;
    case GgufValueType::INT8:
      return static_cast<int8_t>(*p);
    case GgufValueType::UINT16:
      return LoadLE<uint16_t>(p);
    case GgufValueType::INT16:
      return LoadLE<int16_t>(p);
    case GgufValueType::UINT32:
      return LoadLE<uint32_t>(p);
    case GgufValueType::INT32:
      return LoadLE<int32_t>(p);
    case GgufValueType::UINT64:
      return static_cast<int64_t>(LoadLE<uint64_t>(p));
    case GgufValueType::INT64:
      return LoadLE<int64_t>(p);
    case GgufValueType::FLOAT32:
      return static_cast<int64_t>(LoadLE<float>(p));
    case GgufValueType::FLOAT64:
      return static_cast<int64_t>(LoadLE<double>(p));
    default:
      return 0;
  }
}

// Bounds-checked cursor over the file bytes; every read reports the offset on failure.
class GgufParser {
 public:
  GgufParser(GgufFile& f) : f_(f), p_(f.data_), n_(f.size_), file_n_(f.file_size_) {}

  Status Run() {
    uint64_t n_tensors = 0, n_kv = 0;
    STOWAGE_RETURN_IF_ERROR(ReadHeader(&n_tensors, &n_kv));
    STOWAGE_RETURN_IF_ERROR(ReadKvs(n_kv));
    STOWAGE_RETURN_IF_ERROR(ReadAlignment());
    STOWAGE_RETURN_IF_ERROR(ReadTensorInfos(n_tensors));
    return CheckTensorData();
  }

 private:
  // Magic, version (2 or 3, little-endian), the tensor and KV counts (bounded by the file size).
  Status ReadHeader(uint64_t* n_tensors, uint64_t* n_kv) {
    STOWAGE_RETURN_IF_ERROR(Need(4, "magic"));
    if (std::memcmp(p_, "GGUF", 4) != 0) {
      return Err(0, "magic", "\"GGUF\"", Printable(p_, 4));
    }
    pos_ = 4;
    uint32_t version = 0;
    STOWAGE_RETURN_IF_ERROR(ReadU32(&version, "version"));
    if (version == 1) {
      return Status(StatusCode::kUnimplemented,
                    f_.path_ + ": offset 4: version: GGUF v1 is not supported (expected 2 or 3)");
    }
    if ((version & 0xFFFF) == 0 && version != 0) {
      return Status(StatusCode::kUnimplemented,
                    f_.path_ + ": offset 4: version: big-endian GGUF files are not supported (found 0x" +
                        Hex(version) + ")");
    }
    if (version != 2 && version != 3) return Err(4, "version", "2 or 3", std::to_string(version));
    f_.version_ = version;

    STOWAGE_RETURN_IF_ERROR(ReadU64(n_tensors, "n_tensors"));
    STOWAGE_RETURN_IF_ERROR(ReadU64(n_kv, "n_kv"));
    // Each KV needs >= 12 bytes (key length + type), each tensor info >= 8+4+8+4+8 bytes.
    if (*n_kv > (n_ - pos_) / 12)
      return Err(16, "n_kv",
                 "at most " + std::to_string((n_ - pos_) / 12) + " " + Limit("bounded by file size"),
                 std::to_string(*n_kv));
    if (*n_tensors > (n_ - pos_) / 32)
      return Err(8, "n_tensors",
                 "at most " + std::to_string((n_ - pos_) / 32) + " " + Limit("bounded by file size"),
                 std::to_string(*n_tensors));

    return Status::Ok();
  }

  // The n_kv key-value pairs; keys unique.
  Status ReadKvs(uint64_t n_kv) {
    f_.kvs_.reserve(n_kv);
    for (uint64_t i = 0; i < n_kv; ++i) {
      GgufKV kv;
      kv.offset = pos_;
      STOWAGE_RETURN_IF_ERROR(ReadString(&kv.key, "key of kv #" + std::to_string(i)));
      const std::string key = Esc(kv.key);
      uint32_t t = 0;
      const uint64_t type_off = pos_;
      STOWAGE_RETURN_IF_ERROR(ReadU32(&t, "type of key '" + key + "'"));
      if (t >= kGgufValueTypeCount)
        return Err(type_off, "type of key '" + key + "'", "a value type 0..12", std::to_string(t));
      STOWAGE_RETURN_IF_ERROR(ReadValue(static_cast<GgufValueType>(t), &kv.value, key, 0));
      f_.kvs_.push_back(std::move(kv));
    }
    for (size_t i = 0; i < f_.kvs_.size(); ++i) {
      if (!f_.kv_index_.emplace(f_.kvs_[i].key, i).second)
        return Err(f_.kvs_[i].offset, "key '" + Esc(f_.kvs_[i].key) + "'", "unique keys", "a duplicate");
    }

    return Status::Ok();
  }

  // general.alignment when present: a u32, a non-zero power of two.
  Status ReadAlignment() {
    if (const GgufValue* a = f_.Find("general.alignment")) {
      if (a->type != GgufValueType::UINT32)
        return Err(f_.kvs_[f_.kv_index_["general.alignment"]].offset, "general.alignment", "type u32",
                   GgufValueTypeName(a->type));
      if (a->u == 0 || (a->u & (a->u - 1)) != 0)
        return Err(f_.kvs_[f_.kv_index_["general.alignment"]].offset, "general.alignment",
                   "a non-zero power of two", std::to_string(a->u));
      f_.alignment_ = static_cast<uint32_t>(a->u);
    }

    return Status::Ok();
  }

  // The n_tensors tensor infos; names unique.
  Status ReadTensorInfos(uint64_t n_tensors) {
    f_.tensor_info_offset_ = pos_;
    f_.tensors_.reserve(n_tensors);
    for (uint64_t i = 0; i < n_tensors; ++i) {
      GgufTensorInfo ti;
      STOWAGE_RETURN_IF_ERROR(ReadTensorInfo(i, &ti));
      f_.tensors_.push_back(std::move(ti));
    }
    for (size_t i = 0; i < f_.tensors_.size(); ++i) {
      if (!f_.tensor_index_.emplace(f_.tensors_[i].name, i).second)
        return Err(f_.tensors_[i].info_offset, "tensor '" + Esc(f_.tensors_[i].name) + "'",
                   "unique tensor names", "a duplicate");
    }

    return Status::Ok();
  }

  // Tensor info #i: name (GGML_MAX_NAME, no NUL), 1..4 positive dimensions, ggml type, aligned offset.
  Status ReadTensorInfo(uint64_t i, GgufTensorInfo* ti) {
    ti->info_offset = pos_;
    STOWAGE_RETURN_IF_ERROR(ReadString(&ti->name, "name of tensor #" + std::to_string(i)));
    // ggml gguf_init_from_file: names must fit GGML_MAX_NAME (64) with their terminator.
    if (ti->name.size() >= kMaxTensorName)
      return Err(ti->info_offset, "name of tensor #" + std::to_string(i),
                 "at most " + std::to_string(kMaxTensorName - 1) + " bytes (GGML_MAX_NAME)",
                 std::to_string(ti->name.size()) + " bytes");
    // ggml keeps names as C strings: a NUL would cut the name short (another tensor's name).
    if (ti->name.find('\0') != std::string::npos)
      return Err(ti->info_offset, "name of tensor #" + std::to_string(i), "no NUL byte",
                 "'" + Esc(ti->name) + "'");
    const std::string what = "tensor '" + Esc(ti->name) + "'";
    const uint64_t nd_off = pos_;
    STOWAGE_RETURN_IF_ERROR(ReadU32(&ti->n_dims, what + " n_dims"));
    if (ti->n_dims < 1 || ti->n_dims > 4)
      return Err(nd_off, what + " n_dims", "1..4", std::to_string(ti->n_dims));
    for (uint32_t d = 0; d < ti->n_dims; ++d) {
      const uint64_t off = pos_;
      uint64_t v = 0;
      STOWAGE_RETURN_IF_ERROR(ReadU64(&v, what + " ne" + std::to_string(d)));
      if (v == 0 || v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        return Err(off, what + " ne" + std::to_string(d), "a positive dimension",
                   std::to_string(static_cast<int64_t>(v)));
      ti->ne[d] = static_cast<int64_t>(v);
    }
    const uint64_t type_off = pos_;
    uint32_t type = 0;
    STOWAGE_RETURN_IF_ERROR(ReadU32(&type, what + " type"));
    if (!IsValidGgmlType(type)) return Err(type_off, what + " type", "a ggml type id", std::to_string(type));
    ti->type = static_cast<GgmlType>(type);
    auto bytes = TensorBytesChecked(ti->type, ti->ne);
    if (!bytes.ok())
      return Err(nd_off, what + " shape", "a valid " + std::string(GgmlTypeName(ti->type)) + " shape",
                 bytes.status().message());
    ti->nbytes = *bytes;
    const uint64_t off_off = pos_;
    STOWAGE_RETURN_IF_ERROR(ReadU64(&ti->offset, what + " offset"));
    if (ti->offset % f_.alignment_ != 0)
      return Err(off_off, what + " offset", "a multiple of the alignment " + std::to_string(f_.alignment_),
                 std::to_string(ti->offset));
    return Status::Ok();
  }

  // The data section's aligned start; every tensor's data inside the file, without overlap, at the
  // offsets ggml's layout gives.
  Status CheckTensorData() {
    // Data section: aligned start.
    uint64_t data_off = pos_;
    const uint64_t rem = data_off % f_.alignment_;
    if (rem != 0) data_off += f_.alignment_ - rem;
    if (!f_.tensors_.empty() && data_off > file_n_)
      return Err(pos_, "data section", "padding up to byte " + std::to_string(data_off),
                 "end of file at " + std::to_string(file_n_));
    // A header alone must hold the padding too: the model identity hashes [0, data_offset).
    if (f_.header_only() && std::min<uint64_t>(data_off, file_n_) > n_)
      return Err(n_, "data section",
                 "the header through byte " + std::to_string(data_off) +
                     " (the padding before the data section, which the model identity hashes)",
                 "the end of the header bytes at " + std::to_string(n_));
    f_.data_offset_ = std::min<uint64_t>(data_off, file_n_);

    // Tensor data inside the file and not overlapping.
    const uint64_t data_size = file_n_ - f_.data_offset_;
    std::vector<size_t> order(f_.tensors_.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    for (const auto& t : f_.tensors_) {
      if (t.offset > data_size || t.nbytes > data_size - t.offset)
        return Err(t.info_offset, "tensor '" + Esc(t.name) + "' data",
                   "within the file (data section of " + std::to_string(data_size) + " bytes)",
                   "bytes " + std::to_string(t.offset) + ".." + std::to_string(t.offset + t.nbytes));
    }
    std::sort(order.begin(), order.end(),
              [&](size_t a, size_t b) { return f_.tensors_[a].offset < f_.tensors_[b].offset; });
    for (size_t k = 1; k < order.size(); ++k) {
      const auto& prev = f_.tensors_[order[k - 1]];
      const auto& cur = f_.tensors_[order[k]];
      if (prev.offset + prev.nbytes > cur.offset)
        return Err(cur.info_offset, "tensor '" + Esc(cur.name) + "' data",
                   "no overlap with tensor '" + Esc(prev.name) + "' (ends at data byte " +
                       std::to_string(prev.offset + prev.nbytes) + ")",
                   "start at data byte " + std::to_string(cur.offset));
    }
    // ggml gguf_init_from_file: tensor i starts where the padded tensors 0..i-1 end (no gaps, info
    // order). Sizes are bounded by the file here, so the sum cannot overflow.
    uint64_t expect = 0;
    for (const auto& t : f_.tensors_) {
      if (t.offset != expect)
        return Err(t.info_offset + 4 + 8 + t.name.size() + 8 * t.n_dims + 4,
                   "tensor '" + Esc(t.name) + "' offset",
                   std::to_string(expect) + " (ggml layout: the tensors before it, each padded to " +
                       std::to_string(f_.alignment_) + " bytes)",
                   std::to_string(t.offset));
      expect += (t.nbytes + f_.alignment_ - 1) / f_.alignment_ * f_.alignment_;
    }
    return Status::Ok();
  }

  static std::string Hex(uint32_t v) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "%08x", v);
    return buf;
  }
  // A name from the file, for a one-line message: control characters and backslashes escaped.
  static std::string Esc(std::string_view s) {
    std::string out;
    for (char ch : s) {
      const unsigned char c = static_cast<unsigned char>(ch);
      if (c < 32 || c == 127 || c == '\\') {
        char b[8];
        std::snprintf(b, sizeof b, "\\x%02x", c);
        out += b;
      } else
        out += ch;
    }
    return out;
  }
  static std::string Printable(const uint8_t* p, size_t n) {
    std::string s = "\"";
    for (size_t i = 0; i < n; ++i) {
      if (p[i] >= 32 && p[i] < 127)
        s += static_cast<char>(p[i]);
      else {
        char b[8];
        std::snprintf(b, sizeof b, "\\x%02x", p[i]);
        s += b;
      }
    }
    return s + "\"";
  }
  Status Err(uint64_t off, const std::string& field, const std::string& expected, const std::string& found) {
    return DataLoss(f_.path_ + ": offset " + std::to_string(off) + ": " + field + ": expected " + expected +
                    ", found " + found);
  }
  // "(<why>)", or for a header alone "(<why>: the header bytes end at N of a F-byte file; give more
  // of the file)": a count or length past the bytes present is most likely a header cut short.
  std::string Limit(const char* why) const {
    if (!f_.header_only()) return "(" + std::string(why) + ")";
    return "(" + std::string(why) + ": the header bytes end at " + std::to_string(n_) + " of a " +
           std::to_string(file_n_) + "-byte file; give more of the file)";
  }
  Status Need(uint64_t k, const std::string& field) {
    if (k > n_ - pos_)
      return Err(pos_, field, std::to_string(k) + " more bytes",
                 f_.header_only() ? "the end of the header bytes (" + std::to_string(n_) + " of a " +
                                        std::to_string(file_n_) +
                                        "-byte file: the header continues past them; give more of the file)"
                                  : "end of file (file is " + std::to_string(n_) + " bytes)");
    return Status::Ok();
  }
  Status ReadU32(uint32_t* v, const std::string& field) {
    STOWAGE_RETURN_IF_ERROR(Need(4, field));
    *v = LoadLE<uint32_t>(p_ + pos_);
    pos_ += 4;
    return Status::Ok();
  }
  Status ReadU64(uint64_t* v, const std::string& field) {
    STOWAGE_RETURN_IF_ERROR(Need(8, field));
    *v = LoadLE<uint64_t>(p_ + pos_);
    pos_ += 8;
    return Status::Ok();
  }
  Status ReadStringView(std::string_view* s, const std::string& field) {
    uint64_t len = 0;
    const uint64_t off = pos_;
    STOWAGE_RETURN_IF_ERROR(ReadU64(&len, field + " length"));
    if (len > n_ - pos_)
      return Err(off, field + " length",
                 "at most " + std::to_string(n_ - pos_) + " " + Limit("bytes left in file"),
                 std::to_string(len));
    *s = std::string_view(reinterpret_cast<const char*>(p_ + pos_), len);
    pos_ += len;
    return Status::Ok();
  }
  Status ReadString(std::string* s, const std::string& field) {
    std::string_view v;
    STOWAGE_RETURN_IF_ERROR(ReadStringView(&v, field));
    *s = std::string(v);
    return Status::Ok();
  }
  Status ReadValue(GgufValueType t, GgufValue* v, const std::string& key, uint32_t depth) {
    v->type = t;
    const std::string field = "value of key '" + key + "'";
    if (t == GgufValueType::STRING) return ReadStringView(&v->str, field);
    if (t == GgufValueType::ARRAY) {
      if (depth >= kMaxNestingDepth)
        return Err(pos_, field, "array nesting depth <= " + std::to_string(kMaxNestingDepth),
                   "deeper nesting");
      uint32_t et = 0;
      const uint64_t et_off = pos_;
      STOWAGE_RETURN_IF_ERROR(ReadU32(&et, field + " element type"));
      if (et >= kGgufValueTypeCount)
        return Err(et_off, field + " element type", "a value type 0..12", std::to_string(et));
      v->elem_type = static_cast<GgufValueType>(et);
      const uint64_t cnt_off = pos_;
      STOWAGE_RETURN_IF_ERROR(ReadU64(&v->count, field + " element count"));
      const size_t es = ScalarSize(v->elem_type);
      // Strings need >= 8 bytes each, arrays >= 12, scalars es.
      const uint64_t min_elem = es ? es : (v->elem_type == GgufValueType::STRING ? 8 : 12);
      if (v->count > (n_ - pos_) / min_elem)
        return Err(cnt_off, field + " element count",
                   "at most " + std::to_string((n_ - pos_) / min_elem) + " " + Limit("bounded by file size"),
                   std::to_string(v->count));
      if (es) {
        v->raw = p_ + pos_;
        pos_ += v->count * es;
      } else if (v->elem_type == GgufValueType::STRING) {
        v->strings.resize(v->count);
        for (uint64_t i = 0; i < v->count; ++i)
          STOWAGE_RETURN_IF_ERROR(ReadStringView(&v->strings[i], field + "[" + std::to_string(i) + "]"));
      } else {
        v->nested.resize(v->count);
        // Nested arrays carry their own element type and count (GGUF spec gguf_metadata_value_t).
        for (uint64_t i = 0; i < v->count; ++i)
          STOWAGE_RETURN_IF_ERROR(ReadValue(GgufValueType::ARRAY, &v->nested[i], key, depth + 1));
      }
      return Status::Ok();
    }
    const size_t es = ScalarSize(t);
    STOWAGE_RETURN_IF_ERROR(Need(es, field));
    const uint8_t* p = p_ + pos_;
    v->raw = p;
    switch (t) {
      case GgufValueType::UINT8:
        v->u = *p;
        v->i = *p;
        break;
      case GgufValueType::INT8:
        v->i = static_cast<int8_t>(*p);
        break;
      case GgufValueType::UINT16:
        v->u = LoadLE<uint16_t>(p);
        v->i = static_cast<int64_t>(v->u);
        break;
      case GgufValueType::INT16:
        v->i = LoadLE<int16_t>(p);
        break;
      case GgufValueType::UINT32:
        v->u = LoadLE<uint32_t>(p);
        v->i = static_cast<int64_t>(v->u);
        break;
      case GgufValueType::INT32:
        v->i = LoadLE<int32_t>(p);
        break;
      case GgufValueType::FLOAT32:
        v->f = LoadLE<float>(p);
        break;
      case GgufValueType::BOOL:
        if (*p > 1) return Err(pos_, field, "a bool (0 or 1)", std::to_string(*p));
        v->u = *p;
        break;
      case GgufValueType::UINT64:
        v->u = LoadLE<uint64_t>(p);
        v->i = static_cast<int64_t>(v->u);
        break;
      case GgufValueType::INT64:
        v->i = LoadLE<int64_t>(p);
        break;
      case GgufValueType::FLOAT64:
        v->f = LoadLE<double>(p);
        break;
      default:
        break;
    }
    pos_ += es;
    return Status::Ok();
  }

  GgufFile& f_;
  const uint8_t* p_;
  uint64_t n_;       // bytes present: every read stays inside them
  uint64_t file_n_;  // the file's size: the data section and tensor extents are checked against it
  uint64_t pos_ = 0;
};

GgufFile::~GgufFile() {
  if (mapping_ != nullptr) munmap(mapping_, size_);
  if (fd_ >= 0) ::close(fd_);
}

namespace {
int64_t ModificationTimeNs(const struct stat& st) {
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
}

// Why mmap of `size` bytes failed with `err`, for the one-line error: ENOMEM is most often the
// address space limit (ulimit -v, RLIMIT_AS), which a mapping of a large model reaches first.
std::string MapFailure(const std::string& path, size_t size, int err) {
  std::string why = std::strerror(err);
  struct rlimit lim;
  if (err == ENOMEM && getrlimit(RLIMIT_AS, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY)
    why += " (the address space of this process is limited to " + std::to_string(lim.rlim_cur >> 20) +
           " MiB: ulimit -v)";
  else if (err == ENOMEM)
    why += " (no room in the address space, or too many mappings: vm.max_map_count)";
  return path + ": cannot map its " + std::to_string(size) + " bytes (" + std::to_string(size >> 20) +
         " MiB): " + why;
}
}  // namespace

Status GgufFile::CheckUnchanged() const {
  if (fd_ < 0) return Status::Ok();
  struct stat st;
  if (fstat(fd_, &st) != 0) return IoError(path_ + ": cannot stat the open file: " + std::strerror(errno));
  if (static_cast<uint64_t>(st.st_size) < size_)
    return DataLoss(path_ + ": changed or truncated while in use: " + std::to_string(size_) +
                    " bytes were mapped, the file now has " + std::to_string(st.st_size) + " bytes");
  if (ModificationTimeNs(st) != mtime_ns_)
    return DataLoss(path_ +
                    ": changed while in use: modified since it was opened (its modification time changed)");
  return Status::Ok();
}

Result<std::unique_ptr<GgufFile>> GgufFile::Parse(const uint8_t* data, size_t size, std::string name) {
  std::unique_ptr<GgufFile> f(new GgufFile());
  f->path_ = std::move(name);
  f->data_ = data;
  f->size_ = size;
  f->file_size_ = size;
  GgufParser parser(*f);
  STOWAGE_RETURN_IF_ERROR(parser.Run());
  return f;
}

Result<std::unique_ptr<GgufFile>> GgufFile::Open(const std::string& path) {
  return OpenMapped(path, 0, false);
}

Result<std::unique_ptr<GgufFile>> GgufFile::OpenHeader(const std::string& path, uint64_t file_size) {
  return OpenMapped(path, file_size, true);
}

Result<std::unique_ptr<GgufFile>> GgufFile::OpenMapped(const std::string& path, uint64_t file_size,
                                                       bool header_only) {
  if (path.empty()) return InvalidArgument("GGUF file path is empty; expected the path of a .gguf model");
  // O_NONBLOCK: opening a FIFO nobody writes to returns at once (it is refused below) instead of
  // blocking; it changes nothing for a regular file.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return IoError(path + ": cannot open: " + std::strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return IoError(
        path + (S_ISDIR(st.st_mode) ? ": is a folder" : ": not a regular file (a device, FIFO or socket)") +
        "; expected a GGUF file");
  }
  const size_t size = static_cast<size_t>(st.st_size);
  if (header_only && file_size < size) {
    ::close(fd);
    return InvalidArgument(path + ": --file-size " + std::to_string(file_size) +
                           " is smaller than the header file (" + std::to_string(size) + " bytes)");
  }
  void* map = nullptr;
  if (size > 0) {
    map = mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) {
      const int e = errno;
      ::close(fd);
      return IoError(MapFailure(path, size, e));
    }
  }
  std::unique_ptr<GgufFile> f(new GgufFile());
  f->path_ = path;
  f->fd_ = fd;  // kept open for CheckUnchanged; closed by the destructor
  f->mtime_ns_ = ModificationTimeNs(st);
  f->mapping_ = map;
  f->data_ = static_cast<const uint8_t*>(map);
  f->size_ = size;
  f->file_size_ = header_only ? file_size : size;
  if (size == 0) return DataLoss(path + ": offset 0: magic: expected \"GGUF\", found an empty file");
  GgufParser parser(*f);
  STOWAGE_RETURN_IF_ERROR(parser.Run());
  return f;
}

const GgufValue* GgufFile::Find(std::string_view key) const {
  auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kvs_[it->second].value;
}

const GgufTensorInfo* GgufFile::FindTensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

#define STOWAGE_GGUF_FIND(v, key) \
  const GgufValue* v = Find(key); \
  if (v == nullptr) return NotFound(path_ + ": missing key '" + std::string(key) + "'")

Status GgufFile::KeyError(std::string_view key, std::string_view expected, std::string_view found) const {
  auto it = kv_index_.find(key);
  const std::string at =
      it == kv_index_.end() ? "" : "offset " + std::to_string(kvs_[it->second].offset) + ": ";
  return InvalidArgument(path_ + ": " + at + "key '" + std::string(key) + "': expected " +
                         std::string(expected) + ", found " + std::string(found));
}

Status GgufFile::TensorError(std::string_view name, std::string_view expected, std::string_view found) const {
  const GgufTensorInfo* t = FindTensor(name);
  const std::string at = t == nullptr ? "" : "offset " + std::to_string(t->info_offset) + ": ";
  return InvalidArgument(path_ + ": " + at + "tensor '" + std::string(name) + "': expected " +
                         std::string(expected) + ", found " + std::string(found));
}

static Status WrongType(const GgufFile& f, std::string_view key, const char* expected, const GgufValue& v) {
  std::string found = GgufValueTypeName(v.type);
  if (v.is_array()) found += std::string(" of ") + GgufValueTypeName(v.elem_type);
  return f.KeyError(key, expected, found);
}

Result<int64_t> GgufFile::GetI64(std::string_view key) const {
  STOWAGE_GGUF_FIND(v, key);
  if (!IsGgufIntegerType(v->type)) return WrongType(*this, key, "an integer", *v);
  if (v->type == GgufValueType::UINT64 && v->u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    return KeyError(key, "a value that fits in i64", std::to_string(v->u));
  return v->i;
}

Result<uint64_t> GgufFile::GetU64(std::string_view key) const {
  STOWAGE_GGUF_FIND(v, key);
  if (!IsGgufIntegerType(v->type)) return WrongType(*this, key, "an integer", *v);
  if (IsGgufSignedType(v->type)) {
    if (v->i < 0) return KeyError(key, "a non-negative value", std::to_string(v->i));
    return static_cast<uint64_t>(v->i);
  }
  return v->u;
}

Result<uint32_t> GgufFile::GetU32(std::string_view key) const {
  STOWAGE_ASSIGN_OR_RETURN(uint64_t u, GetU64(key));
  if (u > std::numeric_limits<uint32_t>::max())
    return KeyError(key, "a value that fits in u32", std::to_string(u));
  return static_cast<uint32_t>(u);
}

Result<float> GgufFile::GetF32(std::string_view key) const {
  STOWAGE_GGUF_FIND(v, key);
  if (v->type == GgufValueType::FLOAT32) return static_cast<float>(v->f);
  if (v->type == GgufValueType::FLOAT64) {
    if (std::isfinite(v->f) && std::fabs(v->f) > double(std::numeric_limits<float>::max()))
      return KeyError(key, "a value that fits in f32", std::to_string(v->f));
    return static_cast<float>(v->f);
  }
  return WrongType(*this, key, "f32", *v);
}

Result<bool> GgufFile::GetBool(std::string_view key) const {
  STOWAGE_GGUF_FIND(v, key);
  if (v->type != GgufValueType::BOOL) return WrongType(*this, key, "bool", *v);
  return v->u != 0;
}

Result<std::string> GgufFile::GetString(std::string_view key) const {
  STOWAGE_GGUF_FIND(v, key);
  if (v->type != GgufValueType::STRING) return WrongType(*this, key, "str", *v);
  return std::string(v->str);
}

Result<std::vector<std::string_view>> GgufFile::GetStringArray(std::string_view key) const {
  STOWAGE_GGUF_FIND(v, key);
  if (!v->is_array() || v->elem_type != GgufValueType::STRING) return WrongType(*this, key, "arr of str", *v);
  return v->strings;
}

Result<std::vector<float>> GgufFile::GetF32Array(std::string_view key) const {
  STOWAGE_GGUF_FIND(v, key);
  if (!v->is_array() || (v->elem_type != GgufValueType::FLOAT32 && v->elem_type != GgufValueType::FLOAT64))
    return WrongType(*this, key, "arr of f32", *v);
  std::vector<float> out(v->count);
  for (uint64_t i = 0; i < v->count; ++i) {
    const double x = v->ArrayF64(i);
    if (std::isfinite(x) && std::fabs(x) > double(std::numeric_limits<float>::max()))
      return KeyError(key, "f32 elements", "element " + std::to_string(i) + " = " + std::to_string(x));
    out[i] = static_cast<float>(x);
  }
  return out;
}

Result<std::vector<int32_t>> GgufFile::GetI32Array(std::string_view key) const {
  STOWAGE_GGUF_FIND(v, key);
  if (!v->is_array() || !IsGgufIntegerType(v->elem_type)) return WrongType(*this, key, "arr of i32", *v);
  std::vector<int32_t> out(v->count);
  for (uint64_t i = 0; i < v->count; ++i) {
    const int64_t x = v->ArrayI64(i);
    // A UINT64 element read as a negative int64 is >= 2^63.
    const bool fits = x >= std::numeric_limits<int32_t>::min() && x <= std::numeric_limits<int32_t>::max() &&
                      !(v->elem_type == GgufValueType::UINT64 && x < 0);
    if (!fits)
      return KeyError(
          key, "i32 elements",
          "element " + std::to_string(i) + " = " +
              (v->elem_type == GgufValueType::UINT64 ? std::to_string(uint64_t(x)) : std::to_string(x)));
    out[i] = static_cast<int32_t>(x);
  }
  return out;
}

Result<uint32_t> GgufFile::GetU32Or(std::string_view key, uint32_t def) const {
  return Find(key) ? GetU32(key) : Result<uint32_t>(def);
}
Result<float> GgufFile::GetF32Or(std::string_view key, float def) const {
  return Find(key) ? GetF32(key) : Result<float>(def);
}
Result<bool> GgufFile::GetBoolOr(std::string_view key, bool def) const {
  return Find(key) ? GetBool(key) : Result<bool>(def);
}
Result<std::string> GgufFile::GetStringOr(std::string_view key, std::string def) const {
  return Find(key) ? GetString(key) : Result<std::string>(std::move(def));
}

}  // namespace stowage
