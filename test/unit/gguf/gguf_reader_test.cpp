#include <dirent.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>

#include "stowage/runtime/gguf.h"
#include "stowage/runtime/gguf_writer.h"
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
