#include <dirent.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>

#include "scratch_dir.h"
#include "stowage/runtime/gguf.h"
#include "stowage/runtime/gguf_writer.h"
#include "stowage/runtime/model_identity.h"
#include "test_paths.h"

namespace stowage {
namespace {

TEST(GgufReader, Stories260K) {
  const std::string path = test::ModelPath("stories260K.gguf");
  STOWAGE_REQUIRE_FILE(path);
  auto f = GgufFile::Open(path);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ((*f)->version(), 3u);
  EXPECT_EQ((*f)->kvs().size(), 19u);
  EXPECT_EQ((*f)->tensors().size(), 48u);
  EXPECT_EQ((*f)->alignment(), 32u);
  EXPECT_EQ((*f)->data_offset(), 14176u);
  EXPECT_EQ(*(*f)->GetString("general.architecture"), "llama");
  EXPECT_EQ(*(*f)->GetU32("llama.block_count"), 5u);
  auto tokens = (*f)->GetStringArray("tokenizer.ggml.tokens");
  ASSERT_TRUE(tokens.ok());
  EXPECT_EQ(tokens->size(), 512u);
  EXPECT_FALSE((*f)->GetString("llama.block_count").ok());
  EXPECT_EQ((*f)->GetU32("nope").status().code(), StatusCode::kNotFound);
}

// OpenHeader: the first bytes of a model and its size give the whole file's tensor infos and model
// identity; the data checks use the given size; bytes that end inside the header, or in its
// padding, are refused naming the offset.
TEST(GgufReader, OpenHeaderReadsAModelFromItsHeader) {
  const std::string path = test::ModelPath("stories260K.gguf");
  STOWAGE_REQUIRE_FILE(path);
  auto full = GgufFile::Open(path);
  ASSERT_TRUE(full.ok()) << full.status().ToString();
  const GgufFile& g = **full;
  const std::string bytes(reinterpret_cast<const char*>(g.bytes()), g.file_size());
  test::ScratchDir dir;
  ASSERT_FALSE(dir.path().empty());
  // The header through its padding (what gguf-dump --save-header writes), and the first 20000 bytes.
  for (uint64_t n : {g.data_offset(), uint64_t{20000}}) {
    SCOPED_TRACE(n);
    const std::string head = dir.Write("head.gguf", bytes.substr(0, n));
    auto h = GgufFile::OpenHeader(head, g.file_size());
    ASSERT_TRUE(h.ok()) << h.status().ToString();
    EXPECT_TRUE((*h)->header_only());
    EXPECT_EQ((*h)->file_size(), g.file_size());
    EXPECT_EQ((*h)->data_offset(), g.data_offset());
    EXPECT_EQ((*h)->tensors().size(), g.tensors().size());
    const ModelIdentity a = ComputeModelIdentity(g), b = ComputeModelIdentity(**h);
    EXPECT_EQ(a.file_size, b.file_size);
    EXPECT_EQ(a.header_size, b.header_size);
    EXPECT_EQ(a.header_xxh64, b.header_xxh64);
  }
  const std::string head = dir.Write("head.gguf", bytes.substr(0, g.data_offset()));
  // The file size given is the one checked: one byte short of the last tensor's data.
  auto small = GgufFile::OpenHeader(head, g.file_size() - 1);
  ASSERT_FALSE(small.ok());
  EXPECT_NE(small.status().message().find("data: expected within the file"), std::string::npos)
      << small.status().message();
  auto below = GgufFile::OpenHeader(head, 100);
  ASSERT_FALSE(below.ok());
  EXPECT_EQ(below.status().message(), head + ": --file-size 100 is smaller than the header file (" +
                                          std::to_string(g.data_offset()) + " bytes)");
  // Bytes ending inside the tensor infos: the offset of the field cut short.
  const GgufTensorInfo& last = g.tensors().back();
  const std::string cut = dir.Write("cut.gguf", bytes.substr(0, 14000));
  auto c = GgufFile::OpenHeader(cut, g.file_size());
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(c.status().message().find(cut + ": offset "), std::string::npos) << c.status().message();
  EXPECT_NE(c.status().message().find("the header bytes end at 14000 of a " + std::to_string(g.file_size()) +
                                      "-byte file; give more of the file)"),
            std::string::npos)
      << c.status().message();
  // Cut inside a fixed-size field: "expected K more bytes, found the end of the header bytes".
  const std::string cut2 = dir.Write("cut2.gguf", bytes.substr(0, last.info_offset + 4));
  auto c2 = GgufFile::OpenHeader(cut2, g.file_size());
  ASSERT_FALSE(c2.ok());
  EXPECT_NE(
      c2.status().message().find(": offset " + std::to_string(last.info_offset) + ": name of tensor #47"),
      std::string::npos)
      << c2.status().message();
  EXPECT_NE(c2.status().message().find("expected 8 more bytes, found the end of the header bytes (" +
                                       std::to_string(last.info_offset + 4) + " of a "),
            std::string::npos)
      << c2.status().message();
  // Bytes ending in the padding before the data section: the last tensor info (name length, name,
  // n_dims, ne, type, offset) ends before it.
  const uint64_t infos_end = last.info_offset + 8 + last.name.size() + 4 + 8 * last.n_dims + 4 + 8;
  ASSERT_LT(infos_end, g.data_offset()) << "stories260K.gguf has padding before its data section";
  const std::string pad = dir.Write("pad.gguf", bytes.substr(0, infos_end));
  auto pd = GgufFile::OpenHeader(pad, g.file_size());
  ASSERT_FALSE(pd.ok());
  EXPECT_EQ(pd.status().message(), pad + ": offset " + std::to_string(infos_end) +
                                       ": data section: expected the header through byte " +
                                       std::to_string(g.data_offset()) +
                                       " (the padding before the data section, which the model identity "
                                       "hashes), found the end of the header bytes at " +
                                       std::to_string(infos_end));
}

std::vector<std::string> GgufFilesIn(const std::string& dir) {
  std::vector<std::string> out;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      std::string n = e->d_name;
      if (n.size() > 5 && n.compare(n.size() - 5, 5, ".gguf") == 0) out.push_back(dir + "/" + n);
    }
    closedir(d);
  }
  return out;
}

// Every GGUF in the shared models folder (and its vocab/ folder) parses, and its tensors lie inside
// the file in ggml's canonical layout (offset i = sum of the padded sizes before it).
TEST(GgufReader, EverySharedModelParses) {
  STOWAGE_REQUIRE_FILE(test::ModelPath("stories260K.gguf"));
  std::vector<std::string> files = GgufFilesIn(test::ModelsDir());
  const size_t n_models = files.size();
  for (const auto& v : GgufFilesIn(test::ModelsDir() + "/vocab")) files.push_back(v);
  EXPECT_GE(n_models, 14u);
  EXPECT_GE(files.size() - n_models, 3u);
  for (const auto& path : files) {
    SCOPED_TRACE(path);
    auto f = GgufFile::Open(path);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    EXPECT_TRUE((*f)->Find("general.architecture") != nullptr);
    uint64_t expect = 0;
    for (const auto& t : (*f)->tensors()) {
      EXPECT_EQ(t.offset, expect) << t.name;
      expect += (t.nbytes + (*f)->alignment() - 1) / (*f)->alignment() * (*f)->alignment();
      EXPECT_LE((*f)->data_offset() + t.offset + t.nbytes, (*f)->file_size());
    }
  }
}

TEST(GgufReader, VocabOnlyFiles) {
  const std::string aquila = test::ModelPath("vocab/ggml-vocab-aquila.gguf");
  STOWAGE_REQUIRE_FILE(aquila);
  auto f = GgufFile::Open(aquila);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ((*f)->version(), 2u);
  EXPECT_TRUE((*f)->tensors().empty());
  auto tokens = (*f)->GetStringArray("tokenizer.ggml.tokens");
  ASSERT_TRUE(tokens.ok()) << tokens.status().ToString();
  EXPECT_GT(tokens->size(), 1000u);
  auto gpt2 = GgufFile::Open(test::ModelPath("vocab/ggml-vocab-gpt-2.gguf"));
  ASSERT_TRUE(gpt2.ok()) << gpt2.status().ToString();
  EXPECT_EQ((*gpt2)->version(), 3u);
  EXPECT_EQ(*(*gpt2)->GetString("tokenizer.ggml.model"), "gpt2");
  auto merges = (*gpt2)->GetStringArray("tokenizer.ggml.merges");
  ASSERT_TRUE(merges.ok());
  EXPECT_GT(merges->size(), 1000u);
}

// "offset <N>" of key `key` in `g`, as the reader's errors name it.
std::string KeyAt(const GgufFile& g, const std::string& key) {
  for (const GgufKV& kv : g.kvs())
    if (kv.key == key) return "offset " + std::to_string(kv.offset);
  return "(absent)";
}

TEST(GgufReader, TypedAccessorErrors) {
  const std::string path = test::ModelPath("stories260K.gguf");
  STOWAGE_REQUIRE_FILE(path);
  auto f = GgufFile::Open(path);
  ASSERT_TRUE(f.ok());
  const GgufFile& g = **f;
  EXPECT_EQ(g.GetU32("llama.nope").status().message(), path + ": missing key 'llama.nope'");
  EXPECT_EQ(
      g.GetString("llama.block_count").status().message(),
      path + ": " + KeyAt(g, "llama.block_count") + ": key 'llama.block_count': expected str, found u32");
  EXPECT_EQ(g.GetF32Array("tokenizer.ggml.tokens").status().message(),
            path + ": " + KeyAt(g, "tokenizer.ggml.tokens") +
                ": key 'tokenizer.ggml.tokens': expected arr of f32, found arr of str");
  // KeyError: the readers of model metadata use the same format; no offset for an absent key.
  EXPECT_EQ(
      g.KeyError("llama.block_count", "1 block", "8").message(),
      path + ": " + KeyAt(g, "llama.block_count") + ": key 'llama.block_count': expected 1 block, found 8");
  EXPECT_EQ(g.KeyError("llama.nope", "x", "y").message(), path + ": key 'llama.nope': expected x, found y");
  EXPECT_EQ(*g.GetU32Or("llama.nope", 7), 7u);
  EXPECT_FALSE(g.GetU32Or("general.architecture", 7).ok());
  EXPECT_EQ(g.tensor_info_offset() < g.data_offset(), true);
  EXPECT_EQ(g.FindTensor("token_embd.weight")->ne[1], 512);
  EXPECT_EQ(g.FindTensor("nope"), nullptr);
}

// Array and float getters never wrap: an element that does not fit in i32 (u32 >= 2^31, u64 of
// any size beyond, i64 beyond the i32 range) or a finite f64 beyond FLT_MAX is an error naming
// the key, the element and the value.
TEST(GgufReader, GettersRefuseValuesThatDoNotFit) {
  GgufWriter w;
  ASSERT_TRUE(w.AddKV("u32s", GgufMetaValue::ArrayU32({1, 4294967295u})).ok());
  ASSERT_TRUE(w.AddKV("i64s", GgufMetaValue::ArrayI64({-5, (int64_t{1} << 40) | 3})).ok());
  ASSERT_TRUE(
      w.AddKV("u64s", GgufMetaValue::RawArray(GgufValueType::UINT64, 1, "\xff\xff\xff\xff\xff\xff\xff\xff"))
          .ok());
  ASSERT_TRUE(w.AddKV("fine", GgufMetaValue::ArrayI64({-2147483648LL, 2147483647LL, 0})).ok());
  ASSERT_TRUE(w.AddKV("big", GgufMetaValue::F64(1e300)).ok());
  ASSERT_TRUE(w.AddKV("inf", GgufMetaValue::F64(INFINITY)).ok());
  const double big[2] = {1.5, -1e300};
  ASSERT_TRUE(w.AddKV("bigs", GgufMetaValue::RawArray(GgufValueType::FLOAT64, 2, big)).ok());
  auto bytes = w.WriteToBuffer();
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  auto f = GgufFile::Parse(bytes->data(), bytes->size(), "t.gguf");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  const GgufFile& g = **f;
  EXPECT_EQ(
      g.GetI32Array("u32s").status().message(),
      "t.gguf: " + KeyAt(g, "u32s") + ": key 'u32s': expected i32 elements, found element 1 = 4294967295");
  EXPECT_EQ(
      g.GetI32Array("i64s").status().message(),
      "t.gguf: " + KeyAt(g, "i64s") + ": key 'i64s': expected i32 elements, found element 1 = 1099511627779");
  EXPECT_EQ(g.GetI32Array("u64s").status().message(),
            "t.gguf: " + KeyAt(g, "u64s") +
                ": key 'u64s': expected i32 elements, found element 0 = 18446744073709551615");
  auto fine = g.GetI32Array("fine");
  ASSERT_TRUE(fine.ok());
  EXPECT_EQ(*fine, (std::vector<int32_t>{INT32_MIN, INT32_MAX, 0}));
  EXPECT_NE(g.GetF32("big").status().message().find(
                "t.gguf: " + KeyAt(g, "big") + ": key 'big': expected a value that fits in f32, found 1"),
            std::string::npos);
  ASSERT_TRUE(g.GetF32("inf").ok());  // infinities are f32 values
  EXPECT_TRUE(std::isinf(*g.GetF32("inf")));
  EXPECT_NE(g.GetF32Array("bigs").status().message().find("expected f32 elements, found element 1 = -1"),
            std::string::npos)
      << g.GetF32Array("bigs").status().message();
}

TEST(GgufReader, BadMagic) {
  const uint8_t bytes[] = {'G', 'G', 'U', 'X', 3, 0, 0, 0};
  auto f = GgufFile::Parse(bytes, sizeof bytes, "mem.gguf");
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().message(), "mem.gguf: offset 0: magic: expected \"GGUF\", found \"GGUX\"");
}

// GGUF v3 value types: the eight integer types, four of them signed; floats, bool, string and array
// are neither.
TEST(GgufValueTypes, IntegerAndSignedClasses) {
  using T = GgufValueType;
  for (T t : {T::UINT8, T::UINT16, T::UINT32, T::UINT64}) {
    EXPECT_TRUE(IsGgufIntegerType(t)) << GgufValueTypeName(t);
    EXPECT_FALSE(IsGgufSignedType(t)) << GgufValueTypeName(t);
  }
  for (T t : {T::INT8, T::INT16, T::INT32, T::INT64}) {
    EXPECT_TRUE(IsGgufIntegerType(t)) << GgufValueTypeName(t);
    EXPECT_TRUE(IsGgufSignedType(t)) << GgufValueTypeName(t);
  }
  for (T t : {T::FLOAT32, T::FLOAT64, T::BOOL, T::STRING, T::ARRAY}) {
    EXPECT_FALSE(IsGgufIntegerType(t)) << GgufValueTypeName(t);
    EXPECT_FALSE(IsGgufSignedType(t)) << GgufValueTypeName(t);
  }
}

}  // namespace
}  // namespace stowage
