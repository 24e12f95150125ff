// gguf-synth's library: numeric building blocks, every architecture's names/shapes/keys, seeds,
// header-only presets at real sizes, and its errors.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "stowage/runtime/gguf.h"
#include "stowage/runtime/gguf_writer.h"
#include "synth.h"
#include "test_paths.h"

namespace stowage {
namespace {

float HalfToFloat(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1Fu, mant = h & 0x3FFu;
  float f;
  if (exp == 0) {
    f = std::ldexp(static_cast<float>(mant), -24);
  } else if (exp == 31) {
    f = mant ? NAN : INFINITY;
  } else {
    f = std::ldexp(static_cast<float>(mant | 0x400u), static_cast<int>(exp) - 25);
  }
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  bits |= sign;
  std::memcpy(&f, &bits, 4);
  return f;
}

TEST(GgufSynth, Fp16EveryHalfRoundTrips) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const uint16_t bits = static_cast<uint16_t>(h);
    if (((bits >> 10) & 0x1F) == 0x1F && (bits & 0x3FF)) continue;  // NaN payloads
    ASSERT_EQ(synth::Fp32ToFp16(HalfToFloat(bits)), bits) << std::hex << h;
  }
}

TEST(GgufSynth, Fp16Rounding) {
  EXPECT_EQ(synth::Fp32ToFp16(0.1f), 0x2E66);
  EXPECT_EQ(synth::Fp32ToFp16(65520.0f), 0x7C00);  // rounds up to inf
  EXPECT_EQ(synth::Fp32ToFp16(65519.0f), 0x7BFF);
  EXPECT_EQ(synth::Fp32ToFp16(std::ldexp(1.0f, -25)), 0x0000);  // tie -> even (0)
  EXPECT_EQ(synth::Fp32ToFp16(std::ldexp(3.0f, -25)), 0x0002);  // tie -> even (2)
  EXPECT_EQ(synth::Fp32ToFp16(std::ldexp(1.0f, -30)), 0x0000);
  EXPECT_EQ(synth::Fp32ToFp16(1.0f + std::ldexp(1.0f, -11)), 0x3C00);  // tie -> even
  EXPECT_EQ(synth::Fp32ToFp16(1.0f + std::ldexp(3.0f, -11)), 0x3C02);
  EXPECT_EQ(synth::Fp32ToFp16(-2.0f), 0xC000);
  EXPECT_EQ(synth::Fp32ToFp16(NAN) & 0x7C00, 0x7C00);
  EXPECT_NE(synth::Fp32ToFp16(NAN) & 0x3FF, 0);
  EXPECT_EQ(synth::Fp32ToBf16(1.0f), 0x3F80);
  EXPECT_EQ(synth::Fp32ToBf16(-3.0f), 0xC040);
  EXPECT_EQ(synth::Fp32ToBf16(1.0f + std::ldexp(1.0f, -8)), 0x3F80);  // tie -> even
  EXPECT_EQ(synth::Fp32ToBf16(1.0f + std::ldexp(3.0f, -8)), 0x3F82);
}

TEST(GgufSynth, ReferenceQuantizers) {
  float x[64];
  for (int i = 0; i < 64; ++i) x[i] = std::sin(0.37f * i) * (i < 32 ? 1.0f : 0.01f);
  uint8_t q8[68];
  synth::QuantizeQ8_0(x, q8, 64);
  uint8_t q4[36];
  synth::QuantizeQ4_0(x, q4, 64);
  for (int b = 0; b < 2; ++b) {
    uint16_t dh;
    std::memcpy(&dh, q8 + 34 * b, 2);
    const float d8 = HalfToFloat(dh);
    std::memcpy(&dh, q4 + 18 * b, 2);
    const float d4 = HalfToFloat(dh);
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[32 * b + j]));
    EXPECT_NEAR(d8, amax / 127, amax / 127 * 1e-3);
    EXPECT_NEAR(std::fabs(d4), amax / 8, amax / 8 * 1e-3);
    for (int j = 0; j < 32; ++j) {
      const float v = x[32 * b + j];
      const float y8 = d8 * static_cast<int8_t>(q8[34 * b + 2 + j]);
      EXPECT_LE(std::fabs(y8 - v), d8 * 0.5f + amax * 1e-3f) << j;
      const uint8_t byte = q4[18 * b + 2 + (j % 16)];
      const int nib = j < 16 ? (byte & 0x0F) : (byte >> 4);
      const float y4 = d4 * (nib - 8);
      // Q4_0's range is -8..7 steps: the value opposite the extreme is off by up to one step.
      EXPECT_LE(std::fabs(y4 - v), std::fabs(d4) + amax * 1e-3f) << j;
    }
  }
}

TEST(GgufSynth, Llama3RopeFactors) {
  // Llama 3.1: head dim 128, base 500000, factor 8, low 1, high 4, original context 8192.
  std::vector<float> f = synth::Llama3RopeFactors(128, 500000.0f, 8.0f, 1.0f, 4.0f, 8192);
  ASSERT_EQ(f.size(), 64u);
  EXPECT_EQ(f.front(), 1.0f);
  EXPECT_EQ(f.back(), 8.0f);
  for (size_t i = 1; i < f.size(); ++i) EXPECT_GE(f[i], f[i - 1]);
  int smooth = 0;
  for (float v : f) smooth += (v > 1.0f && v < 8.0f);
  EXPECT_GT(smooth, 0);  // the band between the two wavelengths is interpolated
}

struct Built {
  std::vector<uint8_t> bytes;
  std::unique_ptr<GgufFile> file;
};

Built Build(const synth::ModelSpec& s) {
  Built b;
  GgufWriter w;
  Status st = synth::BuildModel(s, &w);
  EXPECT_TRUE(st.ok()) << st.ToString();
  auto buf = w.WriteToBuffer();
  EXPECT_TRUE(buf.ok()) << buf.status().ToString();
  if (!buf.ok()) return b;
  b.bytes = std::move(*buf);
  auto f = GgufFile::Parse(b.bytes.data(), b.bytes.size(), "synth");
  EXPECT_TRUE(f.ok()) << f.status().ToString();
  if (f.ok()) b.file = std::move(*f);
  return b;
}

std::vector<int64_t> Shape(const GgufFile& f, const std::string& name) {
  const GgufTensorInfo* t = f.FindTensor(name);
  if (t == nullptr) return {};
  return std::vector<int64_t>(t->ne, t->ne + t->n_dims);
}

using V = std::vector<int64_t>;

TEST(GgufSynth, LlamaTiedUntiedRopeFreqs) {
  synth::ModelSpec s;
  s.n_layer = 3;
  Built untied = Build(s);
  ASSERT_TRUE(untied.file);
  const GgufFile& f = *untied.file;
  EXPECT_EQ(*f.GetString("general.architecture"), "llama");
  EXPECT_EQ(*f.GetU32("llama.block_count"), 3u);
  EXPECT_EQ(*f.GetU32("llama.attention.head_count_kv"), 2u);
  EXPECT_EQ(*f.GetU32("llama.rope.dimension_count"), 16u);
  EXPECT_EQ(f.tensors().size(), 3u + 3u * 9u);
  EXPECT_EQ(Shape(f, "token_embd.weight"), (V{64, 512}));
  EXPECT_EQ(Shape(f, "output.weight"), (V{64, 512}));
  EXPECT_EQ(Shape(f, "blk.2.attn_q.weight"), (V{64, 64}));
  EXPECT_EQ(Shape(f, "blk.2.attn_k.weight"), (V{64, 32}));
  EXPECT_EQ(Shape(f, "blk.2.attn_output.weight"), (V{64, 64}));
  EXPECT_EQ(Shape(f, "blk.2.ffn_down.weight"), (V{128, 64}));
  EXPECT_EQ(Shape(f, "blk.2.ffn_up.weight"), (V{64, 128}));
  EXPECT_EQ(f.GetStringArray("tokenizer.ggml.tokens")->size(), 512u);
  EXPECT_EQ(f.GetStringArray("tokenizer.ggml.tokens")->at(259),
            "\xE2\x96\x81"
            "a");

  s.tied_output = true;
  s.rope_freqs = true;
  Built tied = Build(s);
  ASSERT_TRUE(tied.file);
  EXPECT_EQ(tied.file->FindTensor("output.weight"), nullptr);
  EXPECT_EQ(Shape(*tied.file, "rope_freqs.weight"), (V{8}));
}

TEST(GgufSynth, EveryArchitecture) {
  struct Want {
    std::string arch, tensor;
    V shape;
    std::string gguf_arch;
  };
  const std::vector<Want> wants = {
      {"qwen2", "blk.1.attn_k.bias", {32}, "qwen2"},
      {"phi3", "blk.0.attn_qkv.weight", {64, 128}, "phi3"},
      {"phi3", "blk.0.ffn_up.weight", {64, 256}, "phi3"},
      {"gemma", "blk.0.ffn_gate.weight", {64, 128}, "gemma"},
      {"mamba", "blk.1.ssm_x.weight", {128, 4 + 32}, "mamba"},
      {"mamba", "blk.1.ssm_a", {16, 128}, "mamba"},
      {"mamba", "blk.0.ssm_conv1d.weight", {4, 128}, "mamba"},
      {"qwen2moe", "blk.0.ffn_gate_exps.weight", {64, 64, 4}, "qwen2moe"},
      {"qwen2moe", "blk.0.ffn_gate_inp_shexp.weight", {64}, "qwen2moe"},
      {"qwen2moe", "blk.0.ffn_down_shexp.weight", {128, 64}, "qwen2moe"},
      {"mixtral", "blk.1.ffn_down_exps.weight", {128, 64, 8}, "llama"},
      {"qwen3moe", "blk.1.ffn_down_exps.weight", {64, 64, 4}, "qwen3moe"},
      {"qwen3moe", "blk.0.attn_q_norm.weight", {16}, "qwen3moe"},
      {"mixtral", "blk.1.ffn_gate_inp.weight", {64, 8}, "llama"},
  };
  for (const Want& w : wants) {
    SCOPED_TRACE(w.arch + " " + w.tensor);
    synth::ModelSpec s;
    s.arch = w.arch;
    s.weight_type = GgmlType::Q8_0;
    Built b = Build(s);
    ASSERT_TRUE(b.file);
    EXPECT_EQ(*b.file->GetString("general.architecture"), w.gguf_arch);
    EXPECT_EQ(Shape(*b.file, w.tensor), w.shape);
    // Routers, norms, biases and SSM A/D/conv stay F32; weights take the requested type.
    for (const auto& t : b.file->tensors()) {
      const bool f32 = t.n_dims == 1 || t.name.find("ssm_a") != std::string::npos ||
                       t.name.find("ssm_conv1d") != std::string::npos ||
                       t.name.find("ffn_gate_inp.") != std::string::npos;
      const GgmlType want = f32 ? GgmlType::F32 : (t.ne[0] % 32 == 0 ? GgmlType::Q8_0 : GgmlType::F16);
      EXPECT_EQ(t.type, want) << t.name;
    }
  }
  synth::ModelSpec gemma;
  gemma.arch = "gemma";
  Built g = Build(gemma);
  ASSERT_TRUE(g.file);
  EXPECT_EQ(g.file->FindTensor("output.weight"), nullptr);  // gemma ties its output
  EXPECT_EQ(*g.file->GetU32("gemma.attention.key_length"), 16u);
  synth::ModelSpec moe;
  moe.arch = "qwen2moe";
  Built m = Build(moe);
  EXPECT_EQ(*m.file->GetU32("qwen2moe.expert_count"), 4u);
  EXPECT_EQ(*m.file->GetU32("qwen2moe.expert_used_count"), 2u);
  EXPECT_EQ(*m.file->GetU32("qwen2moe.expert_feed_forward_length"), 64u);
  moe.arch = "qwen3moe";  // no shared expert: no shared width key or tensor
  Built q3 = Build(moe);
  ASSERT_TRUE(q3.file);
  EXPECT_EQ(*q3.file->GetU32("qwen3moe.expert_count"), 4u);
  EXPECT_EQ(*q3.file->GetU32("qwen3moe.expert_feed_forward_length"), 64u);
  EXPECT_EQ(q3.file->Find("qwen3moe.expert_shared_feed_forward_length"), nullptr);
  EXPECT_EQ(q3.file->FindTensor("blk.0.ffn_up_shexp.weight"), nullptr);
}

// MXFP4 is llama-quantize's MXFP4_MOE (general.file_type 38): the expert stacks MXFP4, every other
// matrix Q8_0 (token_embd and output too), so a dense model gets none; with pure every matrix is
// MXFP4. Each MXFP4 element decodes (E2M1 level times 2^(e - 127), decoded here from the format's
// definition) within the format's error of the F32 model's value: with the block's scale
// s = 2^(floor(log2 amax) - 2), half a level step (at most s) where |x| <= 6 s, and 2 s above, where
// 6 s is the top level. golden_gpt_oss_test and golden_mxfp4_test compare the bytes with llama-quantize's.
TEST(GgufSynth, Mxfp4AsLlamaQuantize) {
  static const float kE2M1[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, -0.0f, -0.5f, -1, -1.5f, -2, -3, -4, -6};
  for (const char* arch : {"gpt-oss", "qwen3moe", "llama"})
    for (bool pure : {false, true}) {
      SCOPED_TRACE(std::string(arch) + (pure ? " pure" : ""));
      synth::ModelSpec s;
      s.arch = arch;
      Built f32 = Build(s);
      s.weight_type = GgmlType::MXFP4;
      s.pure = pure;
      Built mx = Build(s);
      ASSERT_TRUE(f32.file && mx.file);
      EXPECT_EQ(*mx.file->GetU32("general.file_type"), 38u);
      int n_mxfp4 = 0, n_q8 = 0;
      for (const auto& t : mx.file->tensors()) {
        const GgufTensorInfo* src = f32.file->FindTensor(t.name);
        ASSERT_NE(src, nullptr) << t.name;
        if (src->type != GgmlType::F32 || t.type == GgmlType::F32) {  // a norm, bias or router stays F32
          EXPECT_EQ(t.type, src->type) << t.name;
          continue;
        }
        const bool expert = t.n_dims > 2 && t.ne[2] > 1;
        ASSERT_EQ(t.type, pure || expert ? GgmlType::MXFP4 : GgmlType::Q8_0) << t.name;
        if (t.type == GgmlType::Q8_0) {
          ++n_q8;
          continue;
        }
        ++n_mxfp4;
        const auto* x = reinterpret_cast<const float*>(f32.file->TensorData(*src));
        const uint8_t* q = mx.file->TensorData(t);
        for (int64_t b = 0; b < t.nelements() / 32; ++b, x += 32, q += 17) {
          float amax = 0.0f;
          for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
          const float scale = std::ldexp(1.0f, int(std::floor(std::log2(amax))) - 2);
          for (int j = 0; j < 32; ++j) {
            const int code = j < 16 ? q[1 + j] & 0xF : q[1 + j - 16] >> 4;
            const float v = kE2M1[code] * std::ldexp(1.0f, int(q[0]) - 127);
            const float bound = std::fabs(x[j]) <= 6 * scale ? scale : 2 * scale;
            ASSERT_LE(std::fabs(v - x[j]), bound) << t.name << " block " << b << " element " << j;
          }
        }
      }
      const bool moe = std::string(arch) != "llama";
      EXPECT_EQ(n_mxfp4 > 0, moe || pure);
      EXPECT_EQ(n_q8 > 0, !pure);
    }
}

// gemma2 / gemma3 files carry the keys their converters write: the window, gemma2's two soft-caps
// (50 / 30 by default), gemma3's rope.freq_base_swa and a final cap only when given; the pattern
// key only when asked for; gemma2's output is token_embd, gemma3's post/q/k norms are there.
TEST(GgufSynth, GemmaKeys) {
  synth::ModelSpec s;
  s.arch = "gemma2";
  s.n_swa = 8;
  Built g2 = Build(s);
  ASSERT_TRUE(g2.file);
  const GgufFile& f2 = *g2.file;
  EXPECT_EQ(*f2.GetU32("gemma2.attention.sliding_window"), 8u);
  EXPECT_EQ(*f2.GetF32("gemma2.attn_logit_softcapping"), 50.f);
  EXPECT_EQ(*f2.GetF32("gemma2.final_logit_softcapping"), 30.f);
  EXPECT_EQ(*f2.GetU32("gemma2.attention.key_length"), 16u);
  EXPECT_EQ(f2.Find("gemma2.attention.sliding_window_pattern"), nullptr);
  EXPECT_EQ(f2.Find("gemma2.rope.freq_base_swa"), nullptr);
  EXPECT_EQ(f2.FindTensor("output.weight"), nullptr);
  EXPECT_EQ(Shape(f2, "blk.1.post_attention_norm.weight"), (V{64}));
  EXPECT_EQ(Shape(f2, "blk.1.post_ffw_norm.weight"), (V{64}));

  s.arch = "gemma3";
  s.swa_period = 2;
  Built g3 = Build(s);
  ASSERT_TRUE(g3.file);
  const GgufFile& f3 = *g3.file;
  EXPECT_EQ(*f3.GetU32("gemma3.attention.sliding_window"), 8u);
  EXPECT_EQ(*f3.GetU32("gemma3.attention.sliding_window_pattern"), 2u);
  EXPECT_EQ(*f3.GetF32("gemma3.rope.freq_base_swa"), 10000.f);
  EXPECT_EQ(f3.Find("gemma3.final_logit_softcapping"), nullptr);
  EXPECT_EQ(f3.Find("gemma3.attn_logit_softcapping"), nullptr);
  EXPECT_EQ(Shape(f3, "blk.0.attn_q_norm.weight"), (V{16}));
  EXPECT_EQ(Shape(f3, "output.weight"), (V{64, 512}));  // the library writes it unless tied
  s.final_softcap = 2.f;
  EXPECT_EQ(*Build(s).file->GetF32("gemma3.final_logit_softcapping"), 2.f);

  // what plan-model refuses: a period past the layers (2), a window above the context (2048)
  s.swa_period = 3;
  EXPECT_EQ(
      synth::Resolve(s).status().message(),
      "gguf-synth: the sliding window pattern's period 3 exceeds n_layer 2 (no global layer would be left)");
  s.swa_period = 2;
  s.n_swa = 2049;
  EXPECT_EQ(synth::Resolve(s).status().message(),
            "gguf-synth: gemma3's sliding window 2049 exceeds n_ctx 2048 (give a window of at most n_ctx)");
  s.n_swa = 8;

  s.arch = "llama";
  EXPECT_EQ(synth::Resolve(s).status().message(),
            "gguf-synth: a sliding window pattern is gemma2's, gemma3's and gpt-oss's, not llama's");
  s.arch = "gemma2";
  s.swa_period = 0;
  s.final_softcap = 0.f;
  EXPECT_EQ(
      synth::Resolve(s).status().message(),
      "gguf-synth: soft-caps must be finite and positive (gemma3's final one may be 0), found 50.000000 and "
      "0.000000");
}

TEST(GgufSynth, SeedsAndPerTensorStreams) {
  synth::ModelSpec s;
  s.weight_type = GgmlType::F16;
  Built a = Build(s), b = Build(s);
  EXPECT_TRUE(a.bytes == b.bytes);
  s.seed = 2;
  Built c = Build(s);
  ASSERT_EQ(a.bytes.size(), c.bytes.size());
  EXPECT_FALSE(a.bytes == c.bytes);
  // A tensor's bytes do not depend on the rest of the model.
  synth::ModelSpec deeper;
  deeper.weight_type = GgmlType::F16;
  deeper.n_layer = 4;
  Built d = Build(deeper);
  const GgufTensorInfo* t0 = a.file->FindTensor("blk.1.ffn_up.weight");
  const GgufTensorInfo* t1 = d.file->FindTensor("blk.1.ffn_up.weight");
  ASSERT_TRUE(t0 && t1);
  EXPECT_EQ(std::memcmp(a.file->TensorData(*t0), d.file->TensorData(*t1), t0->nbytes), 0);
  // Values: weights within +-1/sqrt(ne0), norms near 1.
  const auto* h = reinterpret_cast<const uint16_t*>(a.file->TensorData(*t0));
  float amax = 0;
  for (int64_t i = 0; i < t0->nelements(); ++i) amax = std::max(amax, std::fabs(HalfToFloat(h[i])));
  EXPECT_LE(amax, 0.126f);
  EXPECT_GT(amax, 0.1f);
  const auto* norm =
      reinterpret_cast<const float*>(a.file->TensorData(*a.file->FindTensor("output_norm.weight")));
  EXPECT_NEAR(norm[0], 1.0f, 0.05f);
}

TEST(GgufSynth, HeaderOnlyPresetsAtRealSize) {
  const char* t = std::getenv("TMPDIR");
  const std::string path =
      std::string(t ? t : "/tmp") + "/stowage-synth-" + std::to_string(getpid()) + ".gguf";
  struct P {
    std::string name;
    size_t n_tensors;
    uint64_t min_bytes;
  };
  for (const P& p : {P{"llama3-405b", 4 + 126 * 9, uint64_t{750} << 30},
                     P{"deepseek-v3-like", 3 + 3 * 13 + 58 * 18, uint64_t{400} * 1000 * 1000 * 1000},
                     P{"mamba-2.8b", 2 + 64 * 10, uint64_t{5} << 30}}) {
    SCOPED_TRACE(p.name);
    auto s = synth::Preset(p.name);
    ASSERT_TRUE(s.ok());
    s->header_only = true;
    ASSERT_TRUE(synth::WriteModel(*s, path).ok());
    struct stat st;
    ASSERT_EQ(stat(path.c_str(), &st), 0);
    EXPECT_GE(static_cast<uint64_t>(st.st_size), p.min_bytes);
    EXPECT_LT(static_cast<uint64_t>(st.st_blocks) * 512, uint64_t{16} << 20);  // only the header is on disk
    auto f = GgufFile::Open(path);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    EXPECT_EQ((*f)->tensors().size(), p.n_tensors);
    unlink(path.c_str());
  }
  auto q = synth::Preset("llama3-8b");
  ASSERT_TRUE(q.ok());
  q->weight_type = GgmlType::Q4_K;
  q->header_only = true;
  GgufWriter w;
  ASSERT_TRUE(synth::BuildModel(*q, &w).ok());
  EXPECT_EQ(w.n_tensors(), 3u + 32u * 9u);
}

TEST(GgufSynth, Errors) {
  synth::ModelSpec s;
  s.arch = "gpt5";
  EXPECT_EQ(
      synth::Resolve(s).status().message(),
      "gguf-synth: unknown architecture 'gpt5' (supported: llama, qwen2, phi3, gemma, mamba, qwen2moe, "
      "mixtral, qwen3, mistral3, smollm3, granite, gemma2, gemma3, qwen3moe, deepseek2, gpt-oss, glm4moe)");
  s = synth::ModelSpec();
  s.n_head = 5;
  EXPECT_EQ(synth::Resolve(s).status().message(), "gguf-synth: n_embd 64 is not a multiple of n_head 5");
  s = synth::ModelSpec();
  s.n_head_kv = 3;
  EXPECT_EQ(synth::Resolve(s).status().message(), "gguf-synth: n_head 4 is not a multiple of n_head_kv 3");
  s = synth::ModelSpec();
  s.weight_type = GgmlType::Q4_K;
  EXPECT_EQ(synth::Resolve(s).status().message(),
            "gguf-synth: weight type q4_K has no generator (f32, f16, bf16, q8_0, q4_0); use --header-only "
            "for other types");
  s = synth::ModelSpec();
  s.header_only = true;
  s.mix = synth::QuantMix::kQ4_K_M;
  s.weight_type = GgmlType::F16;
  EXPECT_EQ(synth::Resolve(s).status().message(),
            "gguf-synth: the q4_K_M mixture needs weight type q4_K, found f16");
  ASSERT_TRUE(synth::SetWeightType("Q4_K_M", &s).ok());
  EXPECT_EQ(s.weight_type, GgmlType::Q4_K);
  s.header_only = false;
  EXPECT_EQ(synth::Resolve(s).status().message(),
            "gguf-synth: weight type q4_K_M has no generator (f32, f16, bf16, q8_0, q4_0); use --header-only "
            "for other types");
  ASSERT_TRUE(synth::SetWeightType("q4_K", &s).ok());
  EXPECT_EQ(s.mix, synth::QuantMix::kNone);
  EXPECT_EQ(synth::SetWeightType("q4_K_L", &s).message(), "unknown ggml type 'q4_K_L'");
  s = synth::ModelSpec();
  s.arch = "qwen2moe";
  s.n_expert = 2;
  s.n_expert_used = 3;
  EXPECT_EQ(synth::Resolve(s).status().message(), "gguf-synth: n_expert_used 3 exceeds n_expert 2");
  s = synth::ModelSpec();
  s.n_expert = 4;
  EXPECT_EQ(synth::Resolve(s).status().message(),
            "gguf-synth: experts need a mixture-of-experts architecture (mixtral, qwen2moe or qwen3moe), not "
            "llama");
  EXPECT_EQ(synth::Preset("llama4").status().message(),
            "gguf-synth: unknown preset 'llama4' (known: llama3-8b, llama3-70b, llama3-405b, mixtral-8x7b, "
            "deepseek-v3-like, mamba-2.8b)");
}

TEST(GgufSynth, VocabFromStories) {
  const std::string stories = test::ModelPath("stories260K.gguf");
  STOWAGE_REQUIRE_FILE(stories);
  synth::ModelSpec s;
  s.vocab_from = stories;
  s.n_vocab = 7;  // ignored: the copied vocab decides
  Built b = Build(s);
  ASSERT_TRUE(b.file);
  auto src = GgufFile::Open(stories);
  ASSERT_TRUE(src.ok());
  EXPECT_EQ(*b.file->GetStringArray("tokenizer.ggml.tokens"),
            *(*src)->GetStringArray("tokenizer.ggml.tokens"));
  EXPECT_EQ(*b.file->GetF32Array("tokenizer.ggml.scores"), *(*src)->GetF32Array("tokenizer.ggml.scores"));
  EXPECT_EQ(Shape(*b.file, "token_embd.weight"), (V{64, 512}));
  EXPECT_EQ(*b.file->GetU32("llama.vocab_size"), 512u);
}

}  // namespace
}  // namespace stowage
