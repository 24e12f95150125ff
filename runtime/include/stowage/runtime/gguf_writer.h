// GGUF container: writer.
//
// Writes GGUF files that gguf.h's reader (and ggml's gguf_init_from_file) accept. The layout is the
// one ggml's gguf_write_to_buf produces, so a file read with GgufFile and written back with its
// metadata, tensor infos (in file order) and data is byte-identical to the original:
//
//   "GGUF" | u32 version | u64 n_tensors | u64 n_kv | n_kv x (key, u32 type, value)
//   | n_tensors x (name, u32 n_dims, n_dims x i64 ne, u32 type, u64 offset)
//   | zero padding to `general.alignment` (default 32)
//   | data section: each tensor's bytes at `offset`, each followed by zero padding to the alignment.
//
// Strings are a u64 byte length and the bytes (no terminator); every integer is little-endian.
// Tensor offsets are assigned in the order tensors are added (ggml's rule: offset of tensor i =
// sum of the padded sizes of tensors 0..i-1), so callers never compute them.
//
// Files are written atomically: to a temporary file in the destination's folder, which is renamed
// over the destination only when everything was written; on any error the temporary file is
// removed and the destination is untouched (never a partly written file).
//
// Sparse data: a tensor added without a data source is not written at all; the file is extended to
// its full size with ftruncate, so its bytes are a hole (reads return zeros) that costs no disk.
// That is how header-only stand-ins for 70B-671B models are made (see tools/gguf-synth).
//
// Thread-safety: a GgufWriter is a plain builder; use one from one thread at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "stowage/runtime/ggml_types.h"
#include "stowage/runtime/gguf.h"
#include "stowage/runtime/status.h"

namespace stowage {

/// An owned metadata value, already encoded in its on-disk form (the bytes that follow the u32
/// value type of a key/value pair). Build with the factory functions; copyable.
class GgufMetaValue {
 public:
  // Scalars (GGUF value types 0..7, 10..12).
  static GgufMetaValue U8(uint8_t v);
  static GgufMetaValue I8(int8_t v);
  static GgufMetaValue U16(uint16_t v);
  static GgufMetaValue I16(int16_t v);
  static GgufMetaValue U32(uint32_t v);
  static GgufMetaValue I32(int32_t v);
  static GgufMetaValue F32(float v);
  static GgufMetaValue Bool(bool v);
  static GgufMetaValue U64(uint64_t v);
  static GgufMetaValue I64(int64_t v);
  static GgufMetaValue F64(double v);
  /// A string: any bytes (GGUF strings are not required to be UTF-8 by ggml).
  static GgufMetaValue Str(std::string_view v);

  // Arrays of scalars: `elem` must be a scalar type and `raw` hold count * size(elem) bytes in
  // little-endian order. The typed helpers below are the usual entry points.
  static GgufMetaValue RawArray(GgufValueType elem, uint64_t count, const void* raw);
  static GgufMetaValue ArrayU8(const std::vector<uint8_t>& v);
  static GgufMetaValue ArrayI32(const std::vector<int32_t>& v);
  static GgufMetaValue ArrayU32(const std::vector<uint32_t>& v);
  static GgufMetaValue ArrayI64(const std::vector<int64_t>& v);
  static GgufMetaValue ArrayF32(const std::vector<float>& v);
  static GgufMetaValue ArrayBool(const std::vector<bool>& v);
  /// An array of strings (tokenizer.ggml.tokens, tokenizer.ggml.merges).
  static GgufMetaValue ArrayStr(const std::vector<std::string_view>& v);
  static GgufMetaValue ArrayStr(const std::vector<std::string>& v);
  /// An array of arrays (GGUF spec: element type ARRAY; each element carries its own element type
  /// and count). Every element of `v` must itself be an array (asserted by the writer: AddKV
  /// returns kInvalidArgument otherwise).
  static GgufMetaValue ArrayOfArrays(const std::vector<GgufMetaValue>& v);

  /// Re-encodes a value read by GgufFile (any type, nested arrays included), byte for byte.
  static GgufMetaValue FromValue(const GgufValue& v);

  GgufValueType type() const { return type_; }
  /// For arrays: the element type; otherwise equal to type().
  GgufValueType elem_type() const { return elem_type_; }
  /// The encoded bytes that follow the u32 value type on disk.
  const std::vector<uint8_t>& encoded() const { return bytes_; }

 private:
  GgufValueType type_ = GgufValueType::UINT8;
  GgufValueType elem_type_ = GgufValueType::UINT8;
  bool ok_ = true;  // false for an ArrayOfArrays with a non-array element
  std::vector<uint8_t> bytes_;
  friend class GgufWriter;
};

/// Fills `nbytes` bytes of a tensor's data at `dst` (the whole tensor, ggml layout). Called once per
/// tensor, in file order, while the file is written. Returns a Status so generators can fail.
using GgufTensorFill = std::function<Status(uint8_t* dst, uint64_t nbytes)>;

/// Builds a GGUF file in memory (header) and writes it with its tensor data.
class GgufWriter {
 public:
  /// `version` is the GGUF version written in the header: 3 (default) or 2 (same layout; only for
  /// byte-identical round trips of v2 files).
  explicit GgufWriter(uint32_t version = 3) : version_(version) {}

  /// Adds a key/value pair; keys are written in the order added. `general.alignment` sets the
  /// alignment used for the data section and tensor offsets (must be a u32 power of two, as in
  /// ggml; tensor offsets follow it whenever it is added). Errors: kAlreadyExists for a duplicate
  /// key, kInvalidArgument for a bad general.alignment or a malformed nested array.
  Status AddKV(std::string_view key, GgufMetaValue value);

  /// Adds a tensor info (shape in ggml order: ne[0] innermost; n_dims = ne.size(), 1..4).
  /// `fill` produces its bytes at write time; an empty `fill` leaves the data a sparse hole (zeros).
  /// Errors: kInvalidArgument for a name of 64 bytes or more (ggml's GGML_MAX_NAME), bad
  /// n_dims, a non-positive dimension, ne0 not a multiple of the type's block size, or a byte size
  /// that overflows; kAlreadyExists for a duplicate name.
  Status AddTensor(std::string_view name, GgmlType type, const std::vector<int64_t>& ne,
                   GgufTensorFill fill = nullptr);

  /// Convenience: a tensor whose bytes are copied from `data` (`nbytes` must equal the tensor's
  /// byte size; the pointer must stay valid until Write returns).
  Status AddTensorData(std::string_view name, GgmlType type, const std::vector<int64_t>& ne, const void* data,
                       uint64_t nbytes);

  /// Copies every key/value pair (in file order) and tensor (info and data, in file order) of `src`.
  /// Writing the result reproduces `src` byte for byte when its padding bytes are zeros and its
  /// last tensor is padded, as ggml and gguf-py write them (every file in ../shared/models).
  /// `src` must outlive Write. Errors: as AddKV/AddTensor.
  Status CopyFrom(const GgufFile& src);

  /// Whether a file without tensors ends with the zero padding up to the alignment. ggml's
  /// gguf_write_to_buf always pads (the default); gguf-py's GGUFWriter does not pad vocab-only
  /// files (llama.cpp's models/ggml-vocab-*.gguf). CopyFrom keeps the source's choice.
  void set_pad_without_tensors(bool pad) { pad_without_tensors_ = pad; }

  /// When true, no tensor data is produced at all: fills are not called, the whole data region is
  /// a sparse hole (WriteFile) or zeros (WriteToBuffer). Turns any model, e.g. CopyFrom of a real
  /// file, into a header-only stand-in with the same header bytes and file size. Default false.
  void set_data_sparse(bool sparse) { data_sparse_ = sparse; }

  /// The alignment in effect (general.alignment or 32).
  uint32_t alignment() const { return alignment_; }
  /// Bytes of the header including the padding before the data section (= data section offset).
  uint64_t HeaderSize() const;
  /// Total file size: header plus padded tensor data.
  uint64_t FileSize() const;
  size_t n_kv() const { return kvs_.size(); }
  size_t n_tensors() const { return tensors_.size(); }

  /// Serialises the header (magic through the padding before the data section).
  std::vector<uint8_t> SerializeHeader() const;

  /// Writes the whole file to memory. Tensors without a fill read as zeros. Meant for tests and
  /// small files; errors: a fill's Status, kResourceExhausted when the file would not fit in memory.
  Result<std::vector<uint8_t>> WriteToBuffer() const;

  /// Writes the file atomically to `path` (temporary file "<path>.tmp.XXXXXX" + rename). Tensors
  /// without a fill become sparse holes. Errors: kIoError naming the path and the OS error, or a
  /// fill's Status; in both cases `path` is left as it was.
  Status WriteFile(const std::string& path) const;

 private:
  struct Kv {
    std::string key;
    GgufMetaValue value;
  };
  struct Tensor {
    std::string name;
    GgmlType type;
    std::vector<int64_t> ne;
    uint64_t offset;  // relative to the data section
    uint64_t nbytes;
    GgufTensorFill fill;
  };
  uint64_t DataSize() const;

  uint32_t version_;
  uint32_t alignment_ = 32;
  bool pad_without_tensors_ = true;
  bool data_sparse_ = false;
  std::vector<Kv> kvs_;
  std::vector<Tensor> tensors_;
};

}  // namespace stowage
