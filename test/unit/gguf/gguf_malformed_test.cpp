// Malformed GGUF corpus: each file is built byte by byte and must fail with its specific one-line
// message (file, byte offset, field, expected, found). Every file is parsed from memory and also
// written to a temporary folder and opened (mmap path), so the corpus exists as files too.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "stowage/runtime/gguf.h"
#include "stowage/runtime/gguf_writer.h"

namespace stowage {
namespace {

// Little-endian byte builder; at() is the offset the next write lands on.
struct Bytes {
  std::vector<uint8_t> b;
  uint64_t at() const { return b.size(); }
  Bytes& raw(const void* p, size_t n) {
    const auto* c = static_cast<const uint8_t*>(p);
    b.insert(b.end(), c, c + n);
    return *this;
  }
  Bytes& u8(uint8_t v) { return raw(&v, 1); }
  Bytes& u32(uint32_t v) { return raw(&v, 4); }
  Bytes& u64(uint64_t v) { return raw(&v, 8); }
  Bytes& str(const std::string& s) { return u64(s.size()).raw(s.data(), s.size()); }
  Bytes& zeros(size_t n) {
    b.resize(b.size() + n, 0);
    return *this;
  }
  Bytes& header(uint64_t n_tensors, uint64_t n_kv, uint32_t version = 3) {
    return raw("GGUF", 4).u32(version).u64(n_tensors).u64(n_kv);
  }
  // A key/value pair with a u32 value.
  Bytes& kv_u32(const std::string& k, uint32_t v) { return str(k).u32(4).u32(v); }
  // A tensor info.
  Bytes& tensor(const std::string& name, std::vector<int64_t> ne, uint32_t type, uint64_t offset) {
    str(name).u32(static_cast<uint32_t>(ne.size()));
    for (int64_t d : ne) u64(static_cast<uint64_t>(d));
    return u32(type).u64(offset);
  }
  Bytes& pad(size_t align) {
    b.resize((b.size() + align - 1) / align * align, 0);
    return *this;
  }
};

struct Case {
  std::string name;
  std::vector<uint8_t> bytes;
  std::string message;  // "F" stands for the file name
  StatusCode code = StatusCode::kDataLoss;
};

std::string Sub(const std::string& msg, const std::string& file) {
  std::string out;
  for (char c : msg) out += (c == '\x01') ? file : std::string(1, c);
  return out;
}

// Messages use \x01 for the file name (std::string concatenation keeps them readable below).
const std::string F = "\x01";

std::vector<Case> Corpus() {
  std::vector<Case> c;
  auto add = [&](std::string name, const Bytes& b, std::string msg, StatusCode code = StatusCode::kDataLoss) {
    c.push_back({std::move(name), b.b, std::move(msg), code});
  };

  // --- magic and version ---------------------------------------------------------------------
  add("empty", Bytes{}, F + ": offset 0: magic: expected 4 more bytes, found end of file (file is 0 bytes)");
  add("truncated-magic", Bytes{}.raw("GG", 2),
      F + ": offset 0: magic: expected 4 more bytes, found end of file (file is 2 bytes)");
  add("bad-magic", Bytes{}.raw("GGUX", 4).u32(3), F + ": offset 0: magic: expected \"GGUF\", found \"GGUX\"");
  add("binary-magic", Bytes{}.u32(0x46554747u ^ 0xff000000u),
      F + ": offset 0: magic: expected \"GGUF\", found \"GGU\\xb9\"");
  add("truncated-version", Bytes{}.raw("GGUF", 4).u8(3).u8(0),
      F + ": offset 4: version: expected 4 more bytes, found end of file (file is 6 bytes)");
  add("v1", Bytes{}.header(0, 0, 1), F + ": offset 4: version: GGUF v1 is not supported (expected 2 or 3)",
      StatusCode::kUnimplemented);
  add("big-endian-v3", Bytes{}.raw("GGUF", 4).u32(0x03000000u).u64(0).u64(0),
      F + ": offset 4: version: big-endian GGUF files are not supported (found 0x03000000)",
      StatusCode::kUnimplemented);
  add("v4", Bytes{}.header(0, 0, 4), F + ": offset 4: version: expected 2 or 3, found 4");
  add("v0", Bytes{}.header(0, 0, 0), F + ": offset 4: version: expected 2 or 3, found 0");

  // --- counts ----------------------------------------------------------------------------------
  add("truncated-n_tensors", Bytes{}.raw("GGUF", 4).u32(3).u32(0),
      F + ": offset 8: n_tensors: expected 8 more bytes, found end of file (file is 12 bytes)");
  add("truncated-n_kv", Bytes{}.raw("GGUF", 4).u32(3).u64(0).u32(0),
      F + ": offset 16: n_kv: expected 8 more bytes, found end of file (file is 20 bytes)");
  add("huge-n_kv", Bytes{}.header(0, uint64_t{1} << 62).zeros(24),
      F + ": offset 16: n_kv: expected at most 2 (bounded by file size), found 4611686018427387904");
  add("huge-n_tensors", Bytes{}.header(~uint64_t{0}, 0).zeros(64),
      F + ": offset 8: n_tensors: expected at most 2 (bounded by file size), found 18446744073709551615");

  // --- key/value section -----------------------------------------------------------------------
  {
    Bytes b;
    b.header(0, 2).str("general.name").u32(8).str(std::string(20, 'x'));
    const uint64_t at = b.at();
    b.u32(5);
    add("truncated-key-length", b,
        F + ": offset " + std::to_string(at) +
            ": key of kv #1 length: expected 8 more bytes, found end of file (file is " +
            std::to_string(b.at()) + " bytes)");
  }
  {
    Bytes b;
    b.header(0, 1).u64(1000).raw("key", 3).zeros(9);
    add("key-length-past-eof", b,
        F + ": offset 24: key of kv #0 length: expected at most 12 (bytes left in file), found 1000");
  }
  {
    Bytes b;
    b.header(0, 1).u64(~uint64_t{0}).zeros(8);
    add("key-length-max", b,
        F + ": offset 24: key of kv #0 length: expected at most 8 (bytes left in file), found "
            "18446744073709551615");
  }
  {
    Bytes b;
    b.header(0, 1).str("k");
    const uint64_t at = b.at();
    b.u32(13).zeros(4);
    add("bad-value-type", b,
        F + ": offset " + std::to_string(at) + ": type of key 'k': expected a value type 0..12, found 13");
  }
  {
    Bytes b;
    b.header(0, 1).str("k").u32(10);
    const uint64_t at = b.at();
    b.u32(7);
    add("truncated-u64-value", b,
        F + ": offset " + std::to_string(at) +
            ": value of key 'k': expected 8 more bytes, found end of file (file is " +
            std::to_string(b.at()) + " bytes)");
  }
  {
    Bytes b;
    b.header(0, 1).str("flag").u32(7);
    const uint64_t at = b.at();
    b.u8(2);
    add("bool-not-0-or-1", b,
        F + ": offset " + std::to_string(at) + ": value of key 'flag': expected a bool (0 or 1), found 2");
  }
  {
    Bytes b;
    b.header(0, 1).str("general.name").u32(8);
    const uint64_t at = b.at();
    b.u64(uint64_t{1} << 40).raw("abc", 3);
    add("string-length-past-eof", b,
        F + ": offset " + std::to_string(at) +
            ": value of key 'general.name' length: expected at most 3 (bytes left in file), found "
            "1099511627776");
  }
  {
    // Names from the file are escaped so that the message stays one line.
    Bytes b;
    b.header(0, 1).str("bad\nkey\\");
    const uint64_t at = b.at();
    b.u32(77).zeros(4);
    add("control-characters-in-key", b,
        F + ": offset " + std::to_string(at) +
            ": type of key 'bad\\x0akey\\x5c': expected a value type 0..12, found 77");
  }
  {
    Bytes b;
    b.header(0, 1).str("a").u32(9);
    const uint64_t at = b.at();
    b.u32(99).u64(1);
    add("bad-array-element-type", b,
        F + ": offset " + std::to_string(at) +
            ": value of key 'a' element type: expected a value type 0..12, found 99");
  }
  {
    Bytes b;
    b.header(0, 1).str("a").u32(9).u32(5);
    const uint64_t at = b.at();
    b.u64(uint64_t{1} << 61).zeros(16);
    add("huge-array-count", b,
        F + ": offset " + std::to_string(at) +
            ": value of key 'a' element count: expected at most 4 (bounded by file size), found "
            "2305843009213693952");
  }
  {
    Bytes b;
    b.header(0, 1).str("tokenizer.ggml.tokens").u32(9).u32(8).u64(3).str("ok").str("fine");
    const uint64_t at = b.at();
    b.u64(500).raw("short", 5).zeros(3);
    add("string-array-element-past-eof", b,
        F + ": offset " + std::to_string(at) +
            ": value of key 'tokenizer.ggml.tokens'[2] length: expected at most 8 (bytes left in file), "
            "found 500");
  }
  {
    Bytes b;
    b.header(0, 1).str("deep").u32(9);
    for (int d = 0; d < 8; ++d) b.u32(9).u64(1);
    const uint64_t at = b.at();
    b.u32(4).u64(1).u32(7);
    add("array-nesting-too-deep", b,
        F + ": offset " + std::to_string(at) +
            ": value of key 'deep': expected array nesting depth <= 8, found deeper nesting");
  }
  {
    Bytes b;
    b.header(0, 2).kv_u32("llama.block_count", 5);
    const uint64_t at = b.at();
    b.kv_u32("llama.block_count", 6);
    add("duplicate-key", b,
        F + ": offset " + std::to_string(at) +
            ": key 'llama.block_count': expected unique keys, found a duplicate");
  }
  {
    Bytes b;
    b.header(0, 1).str("general.alignment").u32(10).u64(32);
    add("alignment-wrong-type", b, F + ": offset 24: general.alignment: expected type u32, found u64");
  }
  add("alignment-not-power-of-two", Bytes{}.header(0, 1).kv_u32("general.alignment", 48),
      F + ": offset 24: general.alignment: expected a non-zero power of two, found 48");
  add("alignment-zero", Bytes{}.header(0, 1).kv_u32("general.alignment", 0),
      F + ": offset 24: general.alignment: expected a non-zero power of two, found 0");

  // --- tensor infos ----------------------------------------------------------------------------
  {
    Bytes b;
    b.header(1, 0);
    const uint64_t at = b.at();
    b.tensor(std::string(64, 'w'), {4}, 0, 0).pad(32).zeros(32);
    add("tensor-name-too-long", b,
        F + ": offset " + std::to_string(at) +
            ": name of tensor #0: expected at most 63 bytes (GGML_MAX_NAME), found 64 bytes");
  }
  {
    Bytes b;
    b.header(1, 0).str("t");
    const uint64_t at = b.at();
    b.u32(0).u32(0).u64(0).zeros(32);
    add("n_dims-zero", b,
        F + ": offset " + std::to_string(at) + ": tensor 't' n_dims: expected 1..4, found 0");
  }
  {
    Bytes b;
    b.header(1, 0).str("t");
    const uint64_t at = b.at();
    b.u32(5).zeros(64);
    add("n_dims-five", b,
        F + ": offset " + std::to_string(at) + ": tensor 't' n_dims: expected 1..4, found 5");
  }
  {
    Bytes b;
    b.header(1, 0).str("t").u32(2).u64(4);
    const uint64_t at = b.at();
    b.u64(0).u32(0).u64(0).zeros(32);
    add("dimension-zero", b,
        F + ": offset " + std::to_string(at) + ": tensor 't' ne1: expected a positive dimension, found 0");
  }
  {
    Bytes b;
    b.header(1, 0).str("t").u32(1);
    const uint64_t at = b.at();
    b.u64(static_cast<uint64_t>(-3)).u32(0).u64(0).zeros(32);
    add("dimension-negative", b,
        F + ": offset " + std::to_string(at) + ": tensor 't' ne0: expected a positive dimension, found -3");
  }
  {
    Bytes b;
    b.header(1, 0).str("t").u32(1).u64(32);
    const uint64_t at = b.at();
    b.u32(4).u64(0).zeros(32);
    add("removed-type-id", b,
        F + ": offset " + std::to_string(at) + ": tensor 't' type: expected a ggml type id, found 4");
  }
  {
    Bytes b;
    b.header(1, 0).str("t").u32(1).u64(32);
    const uint64_t at = b.at();
    b.u32(kGgmlTypeCount).u64(0).zeros(32);
    add("unknown-type-id", b,
        F + ": offset " + std::to_string(at) + ": tensor 't' type: expected a ggml type id, found " +
            std::to_string(kGgmlTypeCount));
  }
  {
    Bytes b;
    b.header(1, 0).str("t");
    const uint64_t at = b.at();
    b.u32(2).u64(16).u64(2).u32(8).u64(0).pad(32).zeros(64);
    add("ne0-not-multiple-of-block", b,
        F + ": offset " + std::to_string(at) +
            ": tensor 't' shape: expected a valid q8_0 shape, found ne0 = 16 is not a multiple of the q8_0 "
            "block size 32");
  }
  {
    Bytes b;
    b.header(1, 0).str("t");
    const uint64_t at = b.at();
    b.u32(2).u64(uint64_t{1} << 62).u64(4).u32(0).u64(0).zeros(32);
    add("element-count-overflow", b,
        F + ": offset " + std::to_string(at) +
            ": tensor 't' shape: expected a valid f32 shape, found element count overflows int64");
  }
  {
    Bytes b;
    b.header(1, 0).str("t");
    const uint64_t at = b.at();
    b.u32(1).u64(uint64_t{1} << 62).u32(0).u64(0).zeros(32);
    add("byte-size-overflow", b,
        F + ": offset " + std::to_string(at) +
            ": tensor 't' shape: expected a valid f32 shape, found byte size overflows");
  }
  {
    Bytes b;
    b.header(1, 0).str("t").u32(1).u64(8).u32(0);
    const uint64_t at = b.at();
    b.u64(4).pad(32).zeros(64);
    add("misaligned-offset", b,
        F + ": offset " + std::to_string(at) +
            ": tensor 't' offset: expected a multiple of the alignment 32, found 4");
  }
  {
    Bytes b;
    b.header(1, 1).kv_u32("general.alignment", 64).str("t").u32(1).u64(8).u32(0);
    const uint64_t at = b.at();
    b.u64(32).pad(64).zeros(128);
    add("misaligned-offset-custom-alignment", b,
        F + ": offset " + std::to_string(at) +
            ": tensor 't' offset: expected a multiple of the alignment 64, found 32");
  }
  {
    // Two infos (the count bound needs 32 bytes per info): the second ends inside its type field.
    Bytes b;
    b.header(2, 0).tensor(std::string(40, 'n'), {8}, 0, 0).str("t").u32(1).u64(8);
    const uint64_t at = b.at();
    b.u8(0).u8(0);
    add("truncated-tensor-info", b,
        F + ": offset " + std::to_string(at) +
            ": tensor 't' type: expected 4 more bytes, found end of file (file is " + std::to_string(b.at()) +
            " bytes)");
  }
  {
    Bytes b;
    b.header(1, 0);
    const uint64_t at = b.at();
    b.tensor("t", {8}, 0, 1024).pad(32).zeros(32);
    add("tensor-offset-past-eof", b,
        F + ": offset " + std::to_string(at) +
            ": tensor 't' data: expected within the file (data section of 32 bytes), found bytes 1024..1056");
  }
  {
    Bytes b;
    b.header(1, 0);
    const uint64_t at = b.at();
    b.tensor("token_embd.weight", {64, 512}, 0, 0).pad(32).zeros(1000);
    add("truncated-data-section", b,
        F + ": offset " + std::to_string(at) +
            ": tensor 'token_embd.weight' data: expected within the file (data section of 1000 bytes), found "
            "bytes 0..131072");
  }
  {
    Bytes b;
    b.header(1, 0).tensor("t", {8}, 0, 0);
    const uint64_t at = b.at();
    b.zeros(3);
    add("truncated-padding", b,
        F + ": offset " + std::to_string(at) +
            ": data section: expected padding up to byte 64, found end of file at " + std::to_string(b.at()));
    (void)0;
  }
  {
    Bytes b;
    b.header(2, 0).tensor("a", {16}, 0, 0);
    const uint64_t at = b.at();
    b.tensor("b", {8}, 0, 32).pad(32).zeros(96);
    add("overlapping-tensors", b,
        F + ": offset " + std::to_string(at) +
            ": tensor 'b' data: expected no overlap with tensor 'a' (ends at data byte 64), found start at "
            "data byte 32");
  }
  {
    Bytes b;
    b.header(2, 0).tensor("a", {8}, 0, 0).str("b").u32(1).u64(8).u32(0);
    const uint64_t at = b.at();
    b.u64(64).pad(32).zeros(96);
    add("gap-between-tensors", b,
        F + ": offset " + std::to_string(at) +
            ": tensor 'b' offset: expected 32 (ggml layout: the tensors before it, each padded to 32 bytes), "
            "found 64");
  }
  {
    Bytes b;
    b.header(2, 0).str("a").u32(1).u64(8).u32(0);
    const uint64_t at = b.at();
    b.u64(32).tensor("b", {8}, 0, 0).pad(32).zeros(64);
    add("tensors-out-of-order", b,
        F + ": offset " + std::to_string(at) +
            ": tensor 'a' offset: expected 0 (ggml layout: the tensors before it, each padded to 32 bytes), "
            "found 32");
  }
  {
    Bytes b;
    b.header(2, 0).tensor("w", {8}, 0, 0);
    const uint64_t at = b.at();
    b.tensor("w", {8}, 0, 32).pad(32).zeros(64);
    add("duplicate-tensor-name", b,
        F + ": offset " + std::to_string(at) +
            ": tensor 'w': expected unique tensor names, found a duplicate");
  }
  {
    // ggml keeps names as C strings: "w\0x" would read as "w".
    Bytes b;
    b.header(1, 0);
    const uint64_t at = b.at();
    b.tensor(std::string("w\0x", 3), {8}, 0, 0).pad(32).zeros(32);
    add("tensor-name-with-nul", b,
        F + ": offset " + std::to_string(at) + ": name of tensor #0: expected no NUL byte, found 'w\\x00x'");
  }
  return c;
}

std::string TempDir() {
  const char* t = std::getenv("TMPDIR");
  std::string tmpl = std::string(t ? t : "/tmp") + "/stowage-gguf-malformed-XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  const char* d = mkdtemp(buf.data());
  return d ? std::string(d) : std::string("/tmp");
}

TEST(GgufMalformed, CorpusHasAtLeastThirtyFiles) { EXPECT_GE(Corpus().size(), 30u); }

TEST(GgufMalformed, EachFileFailsWithItsMessage) {
  for (const Case& k : Corpus()) {
    SCOPED_TRACE(k.name);
    const std::string name = k.name + ".gguf";
    auto f = GgufFile::Parse(k.bytes.data(), k.bytes.size(), name);
    ASSERT_FALSE(f.ok());
    EXPECT_EQ(f.status().message(), Sub(k.message, name));
    EXPECT_EQ(f.status().code(), k.code);
    EXPECT_EQ(f.status().message().find('\n'), std::string::npos);
  }
}

TEST(GgufMalformed, CorpusAsFilesThroughOpen) {
  const std::string dir = TempDir();
  for (const Case& k : Corpus()) {
    SCOPED_TRACE(k.name);
    const std::string path = dir + "/" + k.name + ".gguf";
    FILE* fp = std::fopen(path.c_str(), "wb");
    ASSERT_NE(fp, nullptr);
    if (!k.bytes.empty()) ASSERT_EQ(std::fwrite(k.bytes.data(), 1, k.bytes.size(), fp), k.bytes.size());
    std::fclose(fp);
    auto f = GgufFile::Open(path);
    ASSERT_FALSE(f.ok());
    // An empty file cannot be mapped; Open names it as such.
    const std::string want = k.bytes.empty()
                                 ? path + ": offset 0: magic: expected \"GGUF\", found an empty file"
                                 : Sub(k.message, path);
    EXPECT_EQ(f.status().message(), want);
    unlink(path.c_str());
  }
  rmdir(dir.c_str());
}

TEST(GgufMalformed, MissingFileIsAnIoError) {
  auto f = GgufFile::Open("/nonexistent/model.gguf");
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), StatusCode::kIoError);
  EXPECT_EQ(f.status().message(), "/nonexistent/model.gguf: cannot open: No such file or directory");
}

// A valid file (every section present, last tensor without trailing padding) cut at every byte:
// each prefix fails with a one-line message naming the file, and none crashes.
TEST(GgufMalformed, TruncationAtEveryByte) {
  GgufWriter w;
  ASSERT_TRUE(w.AddKV("general.architecture", GgufMetaValue::Str("llama")).ok());
  ASSERT_TRUE(w.AddKV("general.alignment", GgufMetaValue::U32(32)).ok());
  ASSERT_TRUE(
      w.AddKV("tokenizer.ggml.tokens", GgufMetaValue::ArrayStr(std::vector<std::string>{"<unk>", "<s>", "a"}))
          .ok());
  ASSERT_TRUE(w.AddKV("tokenizer.ggml.scores", GgufMetaValue::ArrayF32({0.f, -1.f, -2.f})).ok());
  ASSERT_TRUE(w.AddKV("nested", GgufMetaValue::ArrayOfArrays({GgufMetaValue::ArrayI32({1})})).ok());
  ASSERT_TRUE(w.AddTensor("a", GgmlType::F32, {5}).ok());
  ASSERT_TRUE(w.AddTensor("b", GgmlType::Q8_0, {64, 2}).ok());  // 136 bytes
  ASSERT_TRUE(w.AddTensor("c", GgmlType::F32, {8}).ok());       // 32 bytes: ends the file unpadded
  auto buf = w.WriteToBuffer();
  ASSERT_TRUE(buf.ok());
  ASSERT_TRUE(GgufFile::Parse(buf->data(), buf->size(), "whole").ok());
  for (size_t n = 0; n < buf->size(); ++n) {
    auto f = GgufFile::Parse(buf->data(), n, "cut.gguf");
    ASSERT_FALSE(f.ok()) << "prefix of " << n << " bytes parsed";
    const std::string m = f.status().message();
    ASSERT_EQ(m.rfind("cut.gguf: offset ", 0), 0u) << m;
    ASSERT_EQ(m.find('\n'), std::string::npos) << m;
  }
}

// Single-byte corruption of a valid header: never a crash; errors stay one line.
TEST(GgufMalformed, ByteFlipsNeverCrash) {
  GgufWriter w;
  ASSERT_TRUE(w.AddKV("general.architecture", GgufMetaValue::Str("llama")).ok());
  ASSERT_TRUE(w.AddKV("llama.block_count", GgufMetaValue::U32(2)).ok());
  ASSERT_TRUE(
      w.AddKV("tokenizer.ggml.tokens", GgufMetaValue::ArrayStr(std::vector<std::string>{"x", "y"})).ok());
  ASSERT_TRUE(w.AddTensor("token_embd.weight", GgmlType::F16, {32, 2}).ok());
  ASSERT_TRUE(w.AddTensor("output_norm.weight", GgmlType::F32, {32}).ok());
  auto buf = w.WriteToBuffer();
  ASSERT_TRUE(buf.ok());
  const size_t header = w.HeaderSize();
  for (size_t i = 0; i < header; ++i) {
    for (uint8_t x : {0x01, 0x80, 0xff}) {
      std::vector<uint8_t> m = *buf;
      m[i] ^= x;
      auto f = GgufFile::Parse(m.data(), m.size(), "flip");
      if (!f.ok()) ASSERT_EQ(f.status().message().find('\n'), std::string::npos);
    }
  }
}

}  // namespace
}  // namespace stowage
