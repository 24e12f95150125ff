#include <dirent.h>

#include <gtest/gtest.h>

#include "stowage/runtime/gguf.h"
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

TEST(GgufReader, TypedAccessorErrors) {
  const std::string path = test::ModelPath("stories260K.gguf");
  STOWAGE_REQUIRE_FILE(path);
  auto f = GgufFile::Open(path);
  ASSERT_TRUE(f.ok());
  const GgufFile& g = **f;
  EXPECT_EQ(g.GetU32("llama.nope").status().message(), path + ": missing key 'llama.nope'");
  EXPECT_EQ(g.GetString("llama.block_count").status().message(),
            path + ": key 'llama.block_count': expected str, found u32");
  EXPECT_EQ(g.GetF32Array("tokenizer.ggml.tokens").status().message(),
            path + ": key 'tokenizer.ggml.tokens': expected arr of f32, found arr of str");
  EXPECT_EQ(*g.GetU32Or("llama.nope", 7), 7u);
  EXPECT_FALSE(g.GetU32Or("general.architecture", 7).ok());
  EXPECT_EQ(g.tensor_info_offset() < g.data_offset(), true);
  EXPECT_EQ(g.FindTensor("token_embd.weight")->ne[1], 512);
  EXPECT_EQ(g.FindTensor("nope"), nullptr);
}

TEST(GgufReader, BadMagic) {
  const uint8_t bytes[] = {'G', 'G', 'U', 'X', 3, 0, 0, 0};
  auto f = GgufFile::Parse(bytes, sizeof bytes, "mem.gguf");
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().message(), "mem.gguf: offset 0: magic: expected \"GGUF\", found \"GGUX\"");
}

}  // namespace
}  // namespace stowage
