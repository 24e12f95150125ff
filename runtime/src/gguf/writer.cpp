// GGUF writer: see gguf_writer.h for the layout and the atomic/sparse write rules.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <memory>
#include <new>

#include "gguf_rules.h"
#include "stowage/runtime/atomic_file.h"
#include "stowage/runtime/gguf_writer.h"

namespace stowage {

namespace {
using gguf_rules::kMaxTensorName;
using gguf_rules::ScalarSize;

template <typename T>
void Put(std::vector<uint8_t>& out, T v) {
  const size_t at = out.size();
  out.resize(at + sizeof(T));
  std::memcpy(out.data() + at, &v, sizeof(T));  // like ggml, the writer targets little-endian hosts
}

void PutStr(std::vector<uint8_t>& out, std::string_view s) {
  Put<uint64_t>(out, s.size());
  const size_t at = out.size();
  out.resize(at + s.size());
  if (!s.empty()) std::memcpy(out.data() + at, s.data(), s.size());
}

uint64_t PadTo(uint64_t n, uint64_t align) { return (n + align - 1) / align * align; }

Status WriteAll(int fd, const uint8_t* p, uint64_t n, uint64_t off, const std::string& path) {
  while (n > 0) {
    const size_t chunk = static_cast<size_t>(std::min<uint64_t>(n, 1u << 30));
    const ssize_t w = ::pwrite(fd, p, chunk, static_cast<off_t>(off));
    if (w < 0) {
      if (errno == EINTR) continue;
      return IoError(path + ": cannot write at byte " + std::to_string(off) + ": " + std::strerror(errno));
    }
    p += w;
    n -= static_cast<uint64_t>(w);
    off += static_cast<uint64_t>(w);
  }
  return Status::Ok();
}
}  // namespace

// --- GgufMetaValue -------------------------------------------------------------------------------

#define STOWAGE_GGUF_SCALAR(Name, CType, Enum)    \
  GgufMetaValue GgufMetaValue::Name(CType v) {    \
    GgufMetaValue m;                              \
    m.type_ = m.elem_type_ = GgufValueType::Enum; \
    Put<CType>(m.bytes_, v);                      \
    return m;                                     \
  }
STOWAGE_GGUF_SCALAR(U8, uint8_t, UINT8)
STOWAGE_GGUF_SCALAR(I8, int8_t, INT8)
STOWAGE_GGUF_SCALAR(U16, uint16_t, UINT16)
STOWAGE_GGUF_SCALAR(I16, int16_t, INT16)
STOWAGE_GGUF_SCALAR(U32, uint32_t, UINT32)
STOWAGE_GGUF_SCALAR(I32, int32_t, INT32)
STOWAGE_GGUF_SCALAR(F32, float, FLOAT32)
STOWAGE_GGUF_SCALAR(U64, uint64_t, UINT64)
STOWAGE_GGUF_SCALAR(I64, int64_t, INT64)
STOWAGE_GGUF_SCALAR(F64, double, FLOAT64)
#undef STOWAGE_GGUF_SCALAR

GgufMetaValue GgufMetaValue::Bool(bool v) {
  GgufMetaValue m;
  m.type_ = m.elem_type_ = GgufValueType::BOOL;
  m.bytes_.push_back(v ? 1 : 0);
  return m;
}

GgufMetaValue GgufMetaValue::Str(std::string_view v) {
  GgufMetaValue m;
  m.type_ = m.elem_type_ = GgufValueType::STRING;
  PutStr(m.bytes_, v);
  return m;
}

GgufMetaValue GgufMetaValue::RawArray(GgufValueType elem, uint64_t count, const void* raw) {
  GgufMetaValue m;
  m.type_ = GgufValueType::ARRAY;
  m.elem_type_ = elem;
  const size_t es = ScalarSize(elem);
  m.ok_ = es != 0;
  Put<uint32_t>(m.bytes_, static_cast<uint32_t>(elem));
  Put<uint64_t>(m.bytes_, count);
  if (es != 0 && count > 0) {
    const auto* p = static_cast<const uint8_t*>(raw);
    m.bytes_.insert(m.bytes_.end(), p, p + count * es);
  }
  return m;
}

GgufMetaValue GgufMetaValue::ArrayU8(const std::vector<uint8_t>& v) {
  return RawArray(GgufValueType::UINT8, v.size(), v.data());
}
GgufMetaValue GgufMetaValue::ArrayI32(const std::vector<int32_t>& v) {
  return RawArray(GgufValueType::INT32, v.size(), v.data());
}
GgufMetaValue GgufMetaValue::ArrayU32(const std::vector<uint32_t>& v) {
  return RawArray(GgufValueType::UINT32, v.size(), v.data());
}
GgufMetaValue GgufMetaValue::ArrayI64(const std::vector<int64_t>& v) {
  return RawArray(GgufValueType::INT64, v.size(), v.data());
}
GgufMetaValue GgufMetaValue::ArrayF32(const std::vector<float>& v) {
  return RawArray(GgufValueType::FLOAT32, v.size(), v.data());
}
GgufMetaValue GgufMetaValue::ArrayBool(const std::vector<bool>& v) {
  std::vector<uint8_t> b(v.begin(), v.end());
  return RawArray(GgufValueType::BOOL, b.size(), b.data());
}

GgufMetaValue GgufMetaValue::ArrayStr(const std::vector<std::string_view>& v) {
  GgufMetaValue m;
  m.type_ = GgufValueType::ARRAY;
  m.elem_type_ = GgufValueType::STRING;
  Put<uint32_t>(m.bytes_, static_cast<uint32_t>(GgufValueType::STRING));
  Put<uint64_t>(m.bytes_, v.size());
  for (const auto& s : v) PutStr(m.bytes_, s);
  return m;
}

GgufMetaValue GgufMetaValue::ArrayStr(const std::vector<std::string>& v) {
  std::vector<std::string_view> views(v.begin(), v.end());
  return ArrayStr(views);
}

GgufMetaValue GgufMetaValue::ArrayOfArrays(const std::vector<GgufMetaValue>& v) {
  GgufMetaValue m;
  m.type_ = GgufValueType::ARRAY;
  m.elem_type_ = GgufValueType::ARRAY;
  Put<uint32_t>(m.bytes_, static_cast<uint32_t>(GgufValueType::ARRAY));
  Put<uint64_t>(m.bytes_, v.size());
  for (const auto& e : v) {
    m.ok_ = m.ok_ && e.ok_ && e.type_ == GgufValueType::ARRAY;
    m.bytes_.insert(m.bytes_.end(), e.bytes_.begin(), e.bytes_.end());
  }
  return m;
}

GgufMetaValue GgufMetaValue::FromValue(const GgufValue& v) {
  if (v.raw != nullptr && ScalarSize(v.type) != 0) {  // a scalar read from a file: its exact bytes
    GgufMetaValue m;
    m.type_ = m.elem_type_ = v.type;
    m.bytes_.assign(v.raw, v.raw + ScalarSize(v.type));
    return m;
  }
  switch (v.type) {
    case GgufValueType::UINT8:
      return U8(static_cast<uint8_t>(v.u));
    case GgufValueType::INT8:
      return I8(static_cast<int8_t>(v.i));
    case GgufValueType::UINT16:
      return U16(static_cast<uint16_t>(v.u));
    case GgufValueType::INT16:
      return I16(static_cast<int16_t>(v.i));
    case GgufValueType::UINT32:
      return U32(static_cast<uint32_t>(v.u));
    case GgufValueType::INT32:
      return I32(static_cast<int32_t>(v.i));
    case GgufValueType::FLOAT32:
      return F32(static_cast<float>(v.f));
    case GgufValueType::BOOL:
      return Bool(v.u != 0);
    case GgufValueType::STRING:
      return Str(v.str);
    case GgufValueType::UINT64:
      return U64(v.u);
    case GgufValueType::INT64:
      return I64(v.i);
    case GgufValueType::FLOAT64:
      return F64(v.f);
    case GgufValueType::ARRAY:
      if (v.elem_type == GgufValueType::STRING) return ArrayStr(v.strings);
      if (v.elem_type == GgufValueType::ARRAY) {
        std::vector<GgufMetaValue> elems;
        elems.reserve(v.nested.size());
        for (const auto& e : v.nested) elems.push_back(FromValue(e));
        return ArrayOfArrays(elems);
      }
      return RawArray(v.elem_type, v.count, v.raw);
  }
  return U8(0);
}

// --- GgufWriter ----------------------------------------------------------------------------------

Status GgufWriter::AddKV(std::string_view key, GgufMetaValue value) {
  if (!value.ok_)
    return InvalidArgument("gguf writer: key '" + std::string(key) +
                           "': arrays of arrays must hold arrays only");
  for (const auto& kv : kvs_)
    if (kv.key == key) return AlreadyExists("gguf writer: duplicate key '" + std::string(key) + "'");
  if (key == "general.alignment") {
    // ggml gguf_init_from_file: general.alignment is a u32, non-zero power of two.
    if (value.type() != GgufValueType::UINT32)
      return InvalidArgument(std::string("gguf writer: general.alignment: expected type u32, found ") +
                             GgufValueTypeName(value.type()));
    uint32_t a;
    std::memcpy(&a, value.encoded().data(), 4);
    if (a == 0 || (a & (a - 1)) != 0)
      return InvalidArgument("gguf writer: general.alignment: expected a non-zero power of two, found " +
                             std::to_string(a));
    alignment_ = a;
    uint64_t off = 0;
    for (auto& t : tensors_) {
      t.offset = off;
      off += PadTo(t.nbytes, alignment_);
    }
  }
  kvs_.push_back({std::string(key), std::move(value)});
  return Status::Ok();
}

Status GgufWriter::AddTensor(std::string_view name, GgmlType type, const std::vector<int64_t>& ne,
                             GgufTensorFill fill) {
  const std::string what = "gguf writer: tensor '" + std::string(name) + "'";
  if (name.size() >= kMaxTensorName)
    return InvalidArgument(what + ": name must be at most " + std::to_string(kMaxTensorName - 1) +
                           " bytes (GGML_MAX_NAME)");
  if (ne.empty() || ne.size() > 4)
    return InvalidArgument(what + ": n_dims must be 1..4, found " + std::to_string(ne.size()));
  if (!IsValidGgmlType(static_cast<uint32_t>(type)))
    return InvalidArgument(what + ": invalid ggml type id " + std::to_string(static_cast<uint32_t>(type)));
  int64_t ne4[4] = {1, 1, 1, 1};
  for (size_t d = 0; d < ne.size(); ++d) {
    if (ne[d] <= 0)
      return InvalidArgument(what + ": ne" + std::to_string(d) + " must be positive, found " +
                             std::to_string(ne[d]));
    ne4[d] = ne[d];
  }
  Result<size_t> bytes = TensorBytesChecked(type, ne4);
  if (!bytes.ok()) return InvalidArgument(what + ": " + bytes.status().message());
  for (const auto& t : tensors_)
    if (t.name == name)
      return AlreadyExists("gguf writer: duplicate tensor name '" + std::string(name) + "'");
  const uint64_t offset = DataSize();
  if (PadTo(*bytes, alignment_) > std::numeric_limits<uint64_t>::max() - offset)
    return InvalidArgument(what + ": data section size overflows");
  tensors_.push_back({std::string(name), type, ne, offset, static_cast<uint64_t>(*bytes), std::move(fill)});
  return Status::Ok();
}

Status GgufWriter::AddTensorData(std::string_view name, GgmlType type, const std::vector<int64_t>& ne,
                                 const void* data, uint64_t nbytes) {
  const auto* src = static_cast<const uint8_t*>(data);
  std::string n(name);
  return AddTensor(name, type, ne, [src, nbytes, n](uint8_t* dst, uint64_t want) -> Status {
    if (want != nbytes)
      return InvalidArgument("gguf writer: tensor '" + n + "': " + std::to_string(nbytes) +
                             " bytes of data given, the shape needs " + std::to_string(want));
    std::memcpy(dst, src, want);
    return Status::Ok();
  });
}

Status GgufWriter::CopyFrom(const GgufFile& src) {
  for (const auto& kv : src.kvs()) STOWAGE_RETURN_IF_ERROR(AddKV(kv.key, GgufMetaValue::FromValue(kv.value)));
  if (src.tensors().empty()) set_pad_without_tensors(src.data_offset() % src.alignment() == 0);
  for (const auto& t : src.tensors()) {
    STOWAGE_RETURN_IF_ERROR(AddTensorData(t.name, t.type, std::vector<int64_t>(t.ne, t.ne + t.n_dims),
                                          src.TensorData(t), t.nbytes));
  }
  return Status::Ok();
}

uint64_t GgufWriter::DataSize() const {
  if (tensors_.empty()) return 0;
  const Tensor& last = tensors_.back();
  return last.offset + PadTo(last.nbytes, alignment_);
}

std::vector<uint8_t> GgufWriter::SerializeHeader() const {
  std::vector<uint8_t> out;
  out.reserve(4096);
  for (char c : {'G', 'G', 'U', 'F'}) out.push_back(static_cast<uint8_t>(c));
  Put<uint32_t>(out, version_);
  Put<uint64_t>(out, tensors_.size());
  Put<uint64_t>(out, kvs_.size());
  for (const auto& kv : kvs_) {
    PutStr(out, kv.key);
    Put<uint32_t>(out, static_cast<uint32_t>(kv.value.type()));
    out.insert(out.end(), kv.value.encoded().begin(), kv.value.encoded().end());
  }
  for (const auto& t : tensors_) {
    PutStr(out, t.name);
    Put<uint32_t>(out, static_cast<uint32_t>(t.ne.size()));
    for (int64_t d : t.ne) Put<int64_t>(out, d);
    Put<uint32_t>(out, static_cast<uint32_t>(t.type));
    Put<uint64_t>(out, t.offset);
  }
  if (!tensors_.empty() || pad_without_tensors_) out.resize(PadTo(out.size(), alignment_), 0);
  return out;
}

uint64_t GgufWriter::HeaderSize() const { return SerializeHeader().size(); }

uint64_t GgufWriter::FileSize() const { return HeaderSize() + DataSize(); }

Result<std::vector<uint8_t>> GgufWriter::WriteToBuffer() const {
  if (version_ != 2 && version_ != 3)
    return InvalidArgument("gguf writer: version must be 2 or 3, found " + std::to_string(version_));
  std::vector<uint8_t> out = SerializeHeader();
  const uint64_t header = out.size();
  const uint64_t total = header + DataSize();
  if (total > (uint64_t{1} << 34))
    return ResourceExhausted("gguf writer: " + std::to_string(total) +
                             " bytes do not fit a memory buffer (use WriteFile)");
  out.resize(static_cast<size_t>(total), 0);
  for (const auto& t : tensors_) {
    if (t.fill && !data_sparse_) STOWAGE_RETURN_IF_ERROR(t.fill(out.data() + header + t.offset, t.nbytes));
  }
  return out;
}

Status GgufWriter::WriteFile(const std::string& path) const {
  if (version_ != 2 && version_ != 3)
    return InvalidArgument("gguf writer: version must be 2 or 3, found " + std::to_string(version_));
  STOWAGE_ASSIGN_OR_RETURN(AtomicFile file, AtomicFile::Create(path));
  const int fd = file.fd();
  const std::vector<uint8_t> header = SerializeHeader();
  const uint64_t total = header.size() + DataSize();
  if (file.in_place()) {
    // A pipe, a device or this process's standard output (possibly a log opened with >>): no
    // seeking, so the bytes go out in file order, padding and data-less tensors as zeros.
    std::vector<const Tensor*> order;
    for (const auto& t : tensors_) order.push_back(&t);
    std::sort(order.begin(), order.end(),
              [](const Tensor* a, const Tensor* b) { return a->offset < b->offset; });
    STOWAGE_RETURN_IF_ERROR(file.Write(header.data(), header.size()));
    uint64_t at = 0;  // bytes of the data section written
    std::vector<uint8_t> buf;
    auto zeros = [&](uint64_t n) -> Status {
      static const uint8_t kZero[4096] = {};
      for (; n > 0; n -= std::min<uint64_t>(n, sizeof kZero))
        STOWAGE_RETURN_IF_ERROR(file.Write(kZero, static_cast<size_t>(std::min<uint64_t>(n, sizeof kZero))));
      return Status::Ok();
    };
    for (const Tensor* t : order) {
      STOWAGE_RETURN_IF_ERROR(zeros(t->offset - at));
      if (t->fill && !data_sparse_) {
        buf.assign(static_cast<size_t>(t->nbytes), 0);
        STOWAGE_RETURN_IF_ERROR(t->fill(buf.data(), t->nbytes));
        STOWAGE_RETURN_IF_ERROR(file.Write(buf.data(), buf.size()));
      } else {
        STOWAGE_RETURN_IF_ERROR(zeros(t->nbytes));
      }
      at = t->offset + t->nbytes;
    }
    STOWAGE_RETURN_IF_ERROR(zeros(DataSize() - at));
    return file.Commit();
  }
  // The whole file first, as a hole: tensors without data and all padding stay sparse.
  if (::ftruncate(fd, static_cast<off_t>(total)) != 0)
    return IoError(path + ": cannot extend to " + std::to_string(total) + " bytes: " + std::strerror(errno));
  STOWAGE_RETURN_IF_ERROR(WriteAll(fd, header.data(), header.size(), 0, path));
  for (const auto& t : tensors_) {
    if (!t.fill || data_sparse_) continue;
    std::unique_ptr<uint8_t[]> buf(new (std::nothrow) uint8_t[t.nbytes ? t.nbytes : 1]);
    if (!buf)
      return ResourceExhausted(path + ": tensor '" + t.name + "': cannot allocate " +
                               std::to_string(t.nbytes) + " bytes");
    std::memset(buf.get(), 0, t.nbytes);
    STOWAGE_RETURN_IF_ERROR(t.fill(buf.get(), t.nbytes));
    STOWAGE_RETURN_IF_ERROR(WriteAll(fd, buf.get(), t.nbytes, header.size() + t.offset, path));
  }
  return file.Commit();
}

}  // namespace stowage
