// GGUF writer: every metadata type, tensor layout, atomic and sparse writes, and byte-identical
// round trips of every shared model.
#include "stowage/runtime/gguf_writer.h"

#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "stowage/runtime/gguf.h"
#include "test_paths.h"

namespace stowage {
namespace {

std::string TempDir() {
  const char* t = std::getenv("TMPDIR");
  std::string tmpl = std::string(t ? t : "/tmp") + "/stowage-gguf-writer-XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  const char* d = mkdtemp(buf.data());
  return d ? std::string(d) : std::string("/tmp");
}

std::vector<uint8_t> ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

std::vector<std::string> ListDir(const std::string& dir) {
  std::vector<std::string> out;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      std::string n = e->d_name;
      if (n != "." && n != "..") out.push_back(n);
    }
    closedir(d);
  }
  return out;
}

// A writer holding one key of every value type, nested arrays and three tensors.
GgufWriter AllTypesWriter(const std::vector<float>& a, const std::vector<uint8_t>& b) {
  GgufWriter w;
  EXPECT_TRUE(w.AddKV("general.architecture", GgufMetaValue::Str("llama")).ok());
  EXPECT_TRUE(w.AddKV("t.u8", GgufMetaValue::U8(200)).ok());
  EXPECT_TRUE(w.AddKV("t.i8", GgufMetaValue::I8(-100)).ok());
  EXPECT_TRUE(w.AddKV("t.u16", GgufMetaValue::U16(60000)).ok());
  EXPECT_TRUE(w.AddKV("t.i16", GgufMetaValue::I16(-30000)).ok());
  EXPECT_TRUE(w.AddKV("t.u32", GgufMetaValue::U32(4000000000u)).ok());
  EXPECT_TRUE(w.AddKV("t.i32", GgufMetaValue::I32(-2000000000)).ok());
  EXPECT_TRUE(w.AddKV("t.f32", GgufMetaValue::F32(0.25f)).ok());
  EXPECT_TRUE(w.AddKV("t.bool", GgufMetaValue::Bool(true)).ok());
  EXPECT_TRUE(w.AddKV("t.str", GgufMetaValue::Str(std::string("a\0b", 3))).ok());
  EXPECT_TRUE(w.AddKV("t.u64", GgufMetaValue::U64(~uint64_t{0})).ok());
  EXPECT_TRUE(w.AddKV("t.i64", GgufMetaValue::I64(-(int64_t{1} << 60))).ok());
  EXPECT_TRUE(w.AddKV("t.f64", GgufMetaValue::F64(-1.5)).ok());
  EXPECT_TRUE(w.AddKV("t.arr_f32", GgufMetaValue::ArrayF32({1.0f, -2.0f, 3.5f})).ok());
  EXPECT_TRUE(w.AddKV("t.arr_i32", GgufMetaValue::ArrayI32({-1, 2, 3})).ok());
  EXPECT_TRUE(w.AddKV("t.arr_bool", GgufMetaValue::ArrayBool({true, false})).ok());
  EXPECT_TRUE(w.AddKV("t.arr_str", GgufMetaValue::ArrayStr(std::vector<std::string>{"x", "", "hello"})).ok());
  EXPECT_TRUE(w.AddKV("t.arr_empty", GgufMetaValue::ArrayI64({})).ok());
  EXPECT_TRUE(w.AddKV("t.nested", GgufMetaValue::ArrayOfArrays(
                                      {GgufMetaValue::ArrayI32({1, 2}),
                                       GgufMetaValue::ArrayStr(std::vector<std::string>{"p", "q", "r"}),
                                       GgufMetaValue::ArrayOfArrays({GgufMetaValue::ArrayU8({7})})}))
                  .ok());
  EXPECT_TRUE(w.AddTensorData("a", GgmlType::F32, {3, 2}, a.data(), a.size() * 4).ok());
  EXPECT_TRUE(w.AddTensorData("b", GgmlType::Q8_0, {32}, b.data(), b.size()).ok());
  EXPECT_TRUE(w.AddTensor("hole", GgmlType::F16, {16, 4, 2}).ok());
  return w;
}

TEST(GgufWriter, EveryValueTypeRoundTrips) {
  std::vector<float> a = {1, 2, 3, 4, 5, 6};
  std::vector<uint8_t> b(34);
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<uint8_t>(i * 7 + 1);
  GgufWriter w = AllTypesWriter(a, b);
  auto buf = w.WriteToBuffer();
  ASSERT_TRUE(buf.ok()) << buf.status().ToString();
  EXPECT_EQ(buf->size(), w.FileSize());
  auto f = GgufFile::Parse(buf->data(), buf->size(), "mem.gguf");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  const GgufFile& g = **f;
  EXPECT_EQ(g.version(), 3u);
  EXPECT_EQ(g.kvs().size(), 19u);
  EXPECT_EQ(g.Find("t.u8")->u, 200u);
  EXPECT_EQ(g.Find("t.i8")->i, -100);
  EXPECT_EQ(g.Find("t.u16")->u, 60000u);
  EXPECT_EQ(g.Find("t.i16")->i, -30000);
  EXPECT_EQ(*g.GetU32("t.u32"), 4000000000u);
  EXPECT_EQ(g.Find("t.i32")->i, -2000000000);
  EXPECT_EQ(*g.GetF32("t.f32"), 0.25f);
  EXPECT_TRUE(*g.GetBool("t.bool"));
  EXPECT_EQ(*g.GetString("t.str"), std::string("a\0b", 3));
  EXPECT_EQ(*g.GetU64("t.u64"), ~uint64_t{0});
  EXPECT_EQ(*g.GetI64("t.i64"), -(int64_t{1} << 60));
  EXPECT_EQ(g.Find("t.f64")->f, -1.5);
  EXPECT_EQ(*g.GetF32Array("t.arr_f32"), (std::vector<float>{1.0f, -2.0f, 3.5f}));
  EXPECT_EQ(*g.GetI32Array("t.arr_i32"), (std::vector<int32_t>{-1, 2, 3}));
  EXPECT_EQ(g.Find("t.arr_bool")->count, 2u);
  EXPECT_EQ(g.Find("t.arr_bool")->ArrayI64(0), 1);
  auto strs = g.GetStringArray("t.arr_str");
  ASSERT_TRUE(strs.ok());
  EXPECT_EQ(*strs, (std::vector<std::string_view>{"x", "", "hello"}));
  EXPECT_EQ(g.Find("t.arr_empty")->count, 0u);
  const GgufValue* n = g.Find("t.nested");
  ASSERT_EQ(n->elem_type, GgufValueType::ARRAY);
  ASSERT_EQ(n->nested.size(), 3u);
  EXPECT_EQ(n->nested[0].elem_type, GgufValueType::INT32);
  EXPECT_EQ(n->nested[0].ArrayI64(1), 2);
  EXPECT_EQ(n->nested[1].strings.size(), 3u);
  EXPECT_EQ(n->nested[1].strings[2], "r");
  ASSERT_EQ(n->nested[2].nested.size(), 1u);
  EXPECT_EQ(n->nested[2].nested[0].ArrayI64(0), 7);

  // Tensors: ggml's layout, offsets padded to the alignment, data as given, holes as zeros.
  ASSERT_EQ(g.tensors().size(), 3u);
  EXPECT_EQ(g.tensors()[0].offset, 0u);
  EXPECT_EQ(g.tensors()[1].offset, 32u);
  EXPECT_EQ(g.tensors()[2].offset, 96u);
  EXPECT_EQ(g.data_offset() % 32, 0u);
  EXPECT_EQ(g.data_offset(), w.HeaderSize());
  EXPECT_EQ(std::memcmp(g.TensorData(g.tensors()[0]), a.data(), 24), 0);
  EXPECT_EQ(std::memcmp(g.TensorData(g.tensors()[1]), b.data(), 34), 0);
  EXPECT_EQ(g.file_size(), g.data_offset() + 96 + 256);
  for (uint64_t i = 0; i < 256; ++i) ASSERT_EQ(g.TensorData(g.tensors()[2])[i], 0) << i;

  // Writing what was read reproduces the bytes.
  GgufWriter w2;
  ASSERT_TRUE(w2.CopyFrom(g).ok());
  auto buf2 = w2.WriteToBuffer();
  ASSERT_TRUE(buf2.ok());
  EXPECT_TRUE(*buf2 == *buf);
}

// Scalars keep their exact bits through read + write (a signalling NaN would be quieted by a
// float -> double -> float trip).
TEST(GgufWriter, ScalarBitsSurviveRoundTrip) {
  GgufWriter w;
  float snan;
  const uint32_t bits = 0x7F800001u;
  std::memcpy(&snan, &bits, 4);
  ASSERT_TRUE(w.AddKV("x.snan", GgufMetaValue::F32(snan)).ok());
  ASSERT_TRUE(w.AddKV("x.neg_zero", GgufMetaValue::F64(-0.0)).ok());
  auto buf = w.WriteToBuffer();
  ASSERT_TRUE(buf.ok());
  auto f = GgufFile::Parse(buf->data(), buf->size(), "mem");
  ASSERT_TRUE(f.ok());
  GgufWriter w2;
  ASSERT_TRUE(w2.CopyFrom(**f).ok());
  auto buf2 = w2.WriteToBuffer();
  ASSERT_TRUE(buf2.ok());
  EXPECT_TRUE(*buf2 == *buf);
}

TEST(GgufWriter, AlignmentKeyMovesOffsets) {
  GgufWriter w;
  std::vector<float> x(3, 1.0f);
  ASSERT_TRUE(w.AddTensorData("x", GgmlType::F32, {3}, x.data(), 12).ok());
  ASSERT_TRUE(w.AddTensorData("y", GgmlType::F32, {3}, x.data(), 12).ok());
  ASSERT_TRUE(w.AddKV("general.alignment", GgufMetaValue::U32(64)).ok());
  EXPECT_EQ(w.alignment(), 64u);
  auto buf = w.WriteToBuffer();
  ASSERT_TRUE(buf.ok());
  auto f = GgufFile::Parse(buf->data(), buf->size(), "mem");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ((*f)->alignment(), 64u);
  EXPECT_EQ((*f)->data_offset() % 64, 0u);
  EXPECT_EQ((*f)->tensors()[1].offset, 64u);
}

TEST(GgufWriter, RejectsBadInput) {
  GgufWriter w;
  EXPECT_EQ(w.AddKV("general.alignment", GgufMetaValue::U32(48)).message(),
            "gguf writer: general.alignment: expected a non-zero power of two, found 48");
  EXPECT_EQ(w.AddKV("general.alignment", GgufMetaValue::U64(32)).message(),
            "gguf writer: general.alignment: expected type u32, found u64");
  ASSERT_TRUE(w.AddKV("k", GgufMetaValue::U8(1)).ok());
  EXPECT_EQ(w.AddKV("k", GgufMetaValue::U8(2)).code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(w.AddKV("n", GgufMetaValue::ArrayOfArrays({GgufMetaValue::U8(1)})).message(),
            "gguf writer: key 'n': arrays of arrays must hold arrays only");
  EXPECT_EQ(w.AddTensor("q", GgmlType::Q4_0, {16}).message(),
            "gguf writer: tensor 'q': ne0 = 16 is not a multiple of the q4_0 block size 32");
  EXPECT_EQ(w.AddTensor("z", GgmlType::F32, {4, 0}).message(),
            "gguf writer: tensor 'z': ne1 must be positive, found 0");
  EXPECT_EQ(w.AddTensor("d", GgmlType::F32, {1, 1, 1, 1, 1}).message(),
            "gguf writer: tensor 'd': n_dims must be 1..4, found 5");
  EXPECT_EQ(w.AddTensor(std::string(64, 'n'), GgmlType::F32, {1}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(w.AddTensor("big", GgmlType::F32, {int64_t{1} << 62, 4}).message(),
            "gguf writer: tensor 'big': element count overflows int64");
  ASSERT_TRUE(w.AddTensor("t", GgmlType::F32, {4}).ok());
  EXPECT_EQ(w.AddTensor("t", GgmlType::F32, {4}).code(), StatusCode::kAlreadyExists);
  std::vector<float> small(2);
  ASSERT_TRUE(w.AddTensorData("short", GgmlType::F32, {4}, small.data(), 8).ok());
  EXPECT_EQ(w.WriteToBuffer().status().message(),
            "gguf writer: tensor 'short': 8 bytes of data given, the shape needs 16");
  EXPECT_EQ(GgufWriter(1).WriteToBuffer().status().message(), "gguf writer: version must be 2 or 3, found 1");
}

TEST(GgufWriter, AtomicWriteLeavesNoPartialFile) {
  const std::string dir = TempDir();
  const std::string path = dir + "/model.gguf";
  {
    GgufWriter ok;
    ASSERT_TRUE(ok.AddKV("general.architecture", GgufMetaValue::Str("llama")).ok());
    ASSERT_TRUE(ok.WriteFile(path).ok());
  }
  const std::vector<uint8_t> before = ReadAll(path);
  GgufWriter failing;
  ASSERT_TRUE(failing.AddKV("general.architecture", GgufMetaValue::Str("qwen2")).ok());
  ASSERT_TRUE(
      failing
          .AddTensor("t", GgmlType::F32, {8}, [](uint8_t*, uint64_t) { return DataLoss("generator failed"); })
          .ok());
  Status st = failing.WriteFile(path);
  EXPECT_EQ(st.message(), "generator failed");
  EXPECT_TRUE(ReadAll(path) == before);                             // destination untouched
  EXPECT_EQ(ListDir(dir), std::vector<std::string>{"model.gguf"});  // no temporary left behind
  Status bad_dir = failing.WriteFile(dir + "/no/such/dir/x.gguf");
  EXPECT_EQ(bad_dir.code(), StatusCode::kIoError);
  EXPECT_NE(bad_dir.message().find("cannot create a file in the folder"), std::string::npos)
      << bad_dir.message();
  unlink(path.c_str());
  rmdir(dir.c_str());
}

TEST(GgufWriter, SparseHoleCostsNoDisk) {
  const std::string dir = TempDir();
  const std::string path = dir + "/big.gguf";
  GgufWriter w;
  ASSERT_TRUE(w.AddKV("general.architecture", GgufMetaValue::Str("llama")).ok());
  // 8 GiB of F16 that are never written.
  ASSERT_TRUE(w.AddTensor("token_embd.weight", GgmlType::F16, {65536, 65536}).ok());
  ASSERT_TRUE(w.WriteFile(path).ok());
  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(static_cast<uint64_t>(st.st_size), w.FileSize());
  EXPECT_EQ(static_cast<uint64_t>(st.st_size), w.HeaderSize() + (uint64_t{8} << 30));
  EXPECT_LT(static_cast<uint64_t>(st.st_blocks) * 512, uint64_t{1} << 20) << "the data region is not sparse";
  auto f = GgufFile::Open(path);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ((*f)->tensors()[0].nbytes, uint64_t{8} << 30);
  unlink(path.c_str());
  rmdir(dir.c_str());
}

// A real model turned into a header-only stand-in: same header bytes and size, data a hole.
TEST(GgufWriter, HeaderOnlyCopyOfARealModel) {
  const std::string path = test::ModelPath("stories260K.gguf");
  STOWAGE_REQUIRE_FILE(path);
  auto f = GgufFile::Open(path);
  ASSERT_TRUE(f.ok());
  GgufWriter w;
  ASSERT_TRUE(w.CopyFrom(**f).ok());
  w.set_data_sparse(true);
  const std::string dir = TempDir();
  const std::string out = dir + "/stories-header.gguf";
  ASSERT_TRUE(w.WriteFile(out).ok());
  const std::vector<uint8_t> a = ReadAll(path), b = ReadAll(out);
  ASSERT_EQ(a.size(), b.size());
  EXPECT_TRUE(std::equal(a.begin(), a.begin() + 14176, b.begin()));
  EXPECT_TRUE(std::all_of(b.begin() + 14176, b.end(), [](uint8_t c) { return c == 0; }));
  struct stat st;
  ASSERT_EQ(stat(out.c_str(), &st), 0);
  EXPECT_LT(static_cast<uint64_t>(st.st_blocks) * 512, uint64_t{256} << 10);
  unlink(out.c_str());
  rmdir(dir.c_str());
}

// Every shared model: read, write back (through a file), bytes identical.
TEST(GgufWriter, SharedModelsRoundTripByteIdentical) {
  const std::string models = test::ModelsDir();
  STOWAGE_REQUIRE_FILE(models + "/stories260K.gguf");
  std::vector<std::string> files;
  for (const std::string& sub : {std::string(), std::string("/vocab")})
    for (const auto& n : ListDir(models + sub))
      if (n.size() > 5 && n.compare(n.size() - 5, 5, ".gguf") == 0) files.push_back(models + sub + "/" + n);
  ASSERT_GE(files.size(), 17u);
  const std::string dir = TempDir();
  for (const auto& path : files) {
    SCOPED_TRACE(path);
    auto f = GgufFile::Open(path);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    GgufWriter w((*f)->version());
    ASSERT_TRUE(w.CopyFrom(**f).ok());
    const std::string out = dir + "/copy.gguf";
    ASSERT_TRUE(w.WriteFile(out).ok());
    const std::vector<uint8_t> a = ReadAll(path), b = ReadAll(out);
    ASSERT_EQ(a.size(), b.size());
    EXPECT_TRUE(a == b) << "first difference at byte "
                        << (std::mismatch(a.begin(), a.end(), b.begin()).first - a.begin());
    unlink(out.c_str());
  }
  rmdir(dir.c_str());
}

}  // namespace
}  // namespace stowage
