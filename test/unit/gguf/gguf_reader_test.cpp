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

TEST(GgufReader, BadMagic) {
  const uint8_t bytes[] = {'G', 'G', 'U', 'X', 3, 0, 0, 0};
  auto f = GgufFile::Parse(bytes, sizeof bytes, "mem.gguf");
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().message(), "mem.gguf: offset 0: magic: expected \"GGUF\", found \"GGUX\"");
}

}  // namespace
}  // namespace stowage
