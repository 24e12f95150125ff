// GGUF container: reader (memory-mapped, validated) and the in-memory model of a file.
//
// Format: GGUF v2/v3 spec (ggml/docs/gguf.md), little-endian only. Layout: magic "GGUF", u32
// version, u64 n_tensors, u64 n_kv, n_kv key/value pairs, n_tensors tensor infos (name, u32
// n_dims, n_dims x i64 ne, u32 type, u64 offset relative to the data section), padding to
// `general.alignment` (default 32), then the data section.
//
// Validation follows what ggml's gguf_init_from_file checks, with overflow-safe arithmetic:
// counts and lengths bounded by the file size, n_dims in 1..4, dims positive, no byte-size
// overflow, ne0 divisible by the block size, tensor data inside the file and aligned, no
// overlapping tensors, ggml's contiguous layout (tensor i starts where the padded tensors before it
// in info order end), no duplicate keys or tensor names, tensor names shorter than 64 bytes
// (GGML_MAX_NAME), general.alignment a u32 power of two, array nesting at most 8 deep. Every failure is a
// kDataLoss Status whose message is one line: "<file>: offset <N>: <field>: expected <...>, found <...>".
//
// Thread-safety: a GgufFile is immutable after Open and may be read from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "stowage/runtime/ggml_types.h"
#include "stowage/runtime/status.h"

namespace stowage {

/// GGUF metadata value types (GGUF spec `gguf_metadata_value_type`).
enum class GgufValueType : uint32_t {
  UINT8 = 0,
  INT8 = 1,
  UINT16 = 2,
  INT16 = 3,
  UINT32 = 4,
  INT32 = 5,
  FLOAT32 = 6,
  BOOL = 7,
  STRING = 8,
  ARRAY = 9,
  UINT64 = 10,
  INT64 = 11,
  FLOAT64 = 12,
};
inline constexpr uint32_t kGgufValueTypeCount = 13;

/// Spec name of a value type ("u32", "str", "arr", ...), as gguf-dump prints it.
const char* GgufValueTypeName(GgufValueType type);

/// True for the eight integer value types, UINT8 ... INT64 (GGUF v3 spec, gguf_metadata_value_type).
bool IsGgufIntegerType(GgufValueType type);

/// True for the signed integer value types INT8, INT16, INT32, INT64 (GgufValue::i holds them;
/// the unsigned ones are in GgufValue::u).
bool IsGgufSignedType(GgufValueType type);

/// One metadata value. Scalars are widened into `u`/`i`/`f`; strings and string arrays are views
/// into the file mapping (valid while the GgufFile lives); numeric arrays keep their raw
/// little-endian bytes (`raw`, `count` elements of `elem_type`); nested arrays are in `nested`.
struct GgufValue {
  GgufValueType type = GgufValueType::UINT8;
  uint64_t u = 0;        ///< UINT8/16/32/64, BOOL
  int64_t i = 0;         ///< INT8/16/32/64 (also set for unsigned values that fit)
  double f = 0;          ///< FLOAT32/64
  std::string_view str;  ///< STRING
  // ARRAY:
  GgufValueType elem_type = GgufValueType::UINT8;
  uint64_t count = 0;
  /// Numeric arrays: count * elem size bytes; scalars: the value's own bytes (exact bits, e.g. NaN
  /// payloads). Points into the file mapping.
  const uint8_t* raw = nullptr;
  std::vector<std::string_view> strings;  ///< string arrays
  std::vector<GgufValue> nested;          ///< arrays of arrays

  bool is_array() const { return type == GgufValueType::ARRAY; }
  /// Element `idx` of a numeric array converted to double / int64 (no bounds check beyond assert).
  double ArrayF64(uint64_t idx) const;
  int64_t ArrayI64(uint64_t idx) const;
};

struct GgufKV {
  std::string key;
  GgufValue value;
  uint64_t offset = 0;  ///< byte offset of the key in the file
};

/// A tensor info record. Shapes are in ggml order: ne[0] is the innermost (contiguous) dimension;
/// unused dimensions are 1.
struct GgufTensorInfo {
  std::string name;
  uint32_t n_dims = 0;
  int64_t ne[4] = {1, 1, 1, 1};
  GgmlType type = GgmlType::F32;
  uint64_t offset = 0;       ///< relative to the start of the data section (bytes)
  uint64_t nbytes = 0;       ///< ggml_nbytes of the contiguous tensor
  uint64_t info_offset = 0;  ///< byte offset of this tensor info in the file

  int64_t nelements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
};

/// A parsed, validated GGUF file. Holds the memory mapping (or the caller's buffer) alive.
class GgufFile {
 public:
  /// Memory-maps and parses `path`; the file stays open (one descriptor, close-on-exec) so that
  /// CheckUnchanged can tell whether it shrank. Errors: kIoError (cannot open; cannot map, with
  /// the reason: "<file>: cannot map its N bytes (M MiB): Cannot allocate memory (the address space
  /// of this process is limited to L MiB: ulimit -v)"), kDataLoss (malformed), kUnimplemented (v1
  /// or big-endian files).
  static Result<std::unique_ptr<GgufFile>> Open(const std::string& path);

  /// A model that is not here, from its header alone: `path` holds the first bytes of a GGUF file
  /// (e.g. `head -c 20M model.gguf`, or what `gguf-dump --save-header` writes: the header through
  /// the padding before the data section) and `file_size` is the whole file's size in bytes. Every
  /// check of Open runs on the header bytes present; the data section's start and every tensor's
  /// extent are checked against `file_size` instead of the header file's size, and file_size()
  /// returns it, so the model identity (ComputeModelIdentity: file size, header hash) is the whole
  /// file's: a plan made from the header runs with the model. The tensor data is not there:
  /// header_only() is true and TensorData / bytes() past header_size() must not be read.
  /// Errors: those of Open; kInvalidArgument "<file>: --file-size N is smaller than the header file
  /// (M bytes)"; kDataLoss "<file>: offset N: <field>: expected K more bytes, found the end of the
  /// header bytes (N of a F-byte file: the header continues past them; give more of the file)" when
  /// the bytes end inside the header, and "<file>: offset N: data section: expected the header
  /// through byte D (the padding before the data section, which the model identity hashes), found
  /// the end of the header bytes at N" when they end in its padding.
  static Result<std::unique_ptr<GgufFile>> OpenHeader(const std::string& path, uint64_t file_size);

  /// Parses `size` bytes at `data` (not copied: must outlive the GgufFile). `name` is used in
  /// messages in place of a path. Used by the fuzzer and tests.
  static Result<std::unique_ptr<GgufFile>> Parse(const uint8_t* data, size_t size, std::string name);

  ~GgufFile();
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  /// The file's size in bytes (OpenHeader: the size given for the whole file).
  uint64_t file_size() const { return file_size_; }
  /// Made by OpenHeader: only the header's bytes are present.
  bool header_only() const { return file_size_ != size_; }
  /// Whether the file behind the mapping is still what Open mapped, for the users of bytes() long
  /// after Open (a Session's weights read in place): a file truncated while mapped makes every read
  /// of a page past its new end fault with SIGBUS (llama.cpp's mmap dies so), and one rewritten in
  /// place changes the mapped bytes under the reader. One fstat of the open file. Errors:
  /// kDataLoss "<file>: changed or truncated while in use: N bytes were mapped, the file now has M
  /// bytes" (it shrank), "<file>: changed while in use: modified since it was opened (its
  /// modification time changed)". Always Ok for a GgufFile made by Parse.
  Status CheckUnchanged() const;
  uint32_t alignment() const { return alignment_; }
  /// Absolute byte offset of the data section.
  uint64_t data_offset() const { return data_offset_; }
  /// Bytes of the header: magic through the padding before the data section (= data_offset()).
  /// The model identity hash of a plan covers [0, header_size()).
  uint64_t header_size() const { return data_offset_; }
  /// Absolute byte offset of the first tensor info (= end of the key/value section).
  uint64_t tensor_info_offset() const { return tensor_info_offset_; }
  /// The whole file's bytes (mapping).
  const uint8_t* bytes() const { return data_; }

  const std::vector<GgufKV>& kvs() const { return kvs_; }
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }

  /// Lookup; nullptr when absent.
  const GgufValue* Find(std::string_view key) const;
  const GgufTensorInfo* FindTensor(std::string_view name) const;
  /// Pointer to a tensor's data in the mapping.
  const uint8_t* TensorData(const GgufTensorInfo& t) const { return data_ + data_offset_ + t.offset; }

  /// A kInvalidArgument Status about the value of key `key`, one line in the reader's format:
  /// "<file>: offset <N>: key '<key>': expected <expected>, found <found>", N being the byte offset
  /// of the key in the file (the offset part is left out for a key the file does not have). For
  /// the readers of the model's metadata (hyper-parameters, vocabulary) to name what they refuse.
  Status KeyError(std::string_view key, std::string_view expected, std::string_view found) const;
  /// The same for tensor `name`: "<file>: offset <N>: tensor '<name>': expected <expected>, found
  /// <found>", N being the byte offset of its tensor info (left out for a tensor the file lacks).
  Status TensorError(std::string_view name, std::string_view expected, std::string_view found) const;

  // Typed accessors. Integer getters accept any integer type whose value fits (llama.cpp
  // accepts u32/i32 interchangeably for hparams). Errors: kNotFound "<file>: missing key 'k'",
  // kInvalidArgument "<file>: offset <N>: key 'k': expected <type>, found <type>" (KeyError).
  Result<uint64_t> GetU64(std::string_view key) const;
  Result<uint32_t> GetU32(std::string_view key) const;
  Result<int64_t> GetI64(std::string_view key) const;
  Result<float> GetF32(std::string_view key) const;
  Result<bool> GetBool(std::string_view key) const;
  Result<std::string> GetString(std::string_view key) const;
  /// Array accessors: the whole array converted. Errors as above, plus element type mismatch, and
  /// kInvalidArgument "<file>: offset <N>: key 'k': expected i32 elements, found element i = V" (resp. f32: a
  /// finite FLOAT64 beyond FLT_MAX; GetF32 checks its scalar the same way) -- never a wrapped value.
  Result<std::vector<std::string_view>> GetStringArray(std::string_view key) const;
  Result<std::vector<float>> GetF32Array(std::string_view key) const;
  Result<std::vector<int32_t>> GetI32Array(std::string_view key) const;

  // Defaulted variants: return `def` when the key is absent (but still report a wrong type).
  Result<uint32_t> GetU32Or(std::string_view key, uint32_t def) const;
  Result<float> GetF32Or(std::string_view key, float def) const;
  Result<bool> GetBoolOr(std::string_view key, bool def) const;
  Result<std::string> GetStringOr(std::string_view key, std::string def) const;

 private:
  GgufFile() = default;
  friend class GgufParser;
  /// Open (header_only false: file_size is the mapped size) and OpenHeader.
  static Result<std::unique_ptr<GgufFile>> OpenMapped(const std::string& path, uint64_t file_size,
                                                      bool header_only);

  std::string path_;
  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;        // bytes present (mapped or given to Parse)
  uint64_t file_size_ = 0;   // the file's size: size_, or OpenHeader's file_size
  void* mapping_ = nullptr;  // munmap on destruction when non-null
  int fd_ = -1;              // the mapped file (Open), closed on destruction; -1 after Parse
  int64_t mtime_ns_ = 0;     // its modification time when opened (CheckUnchanged)
  uint32_t version_ = 0;
  uint32_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  uint64_t tensor_info_offset_ = 0;
  std::vector<GgufKV> kvs_;
  std::vector<GgufTensorInfo> tensors_;
  std::unordered_map<std::string_view, size_t> kv_index_;
  std::unordered_map<std::string_view, size_t> tensor_index_;
};

}  // namespace stowage
