// Tokenizer::FromGguf: reading the vocabulary and its settings (llama.cpp llama_vocab::impl::load).
#include <algorithm>
#include <cctype>
#include <optional>

#include "stowage/runtime/gguf_vocab.h"
#include "tokenizer_impl.h"

namespace stowage {
namespace {

using tokenizer::PreTokenizer;

// A token id key. Absent -> nullopt; an id outside [0, n_vocab) -> nullopt too, with a warning in
// `warnings` (llama.cpp keeps the default id then: "bad special token ... using default id"; the
// default is `*slot`). Wrong type -> error.
Result<std::optional<int32_t>> ReadTokenId(const GgufFile& g, const std::string& key, size_t n_vocab,
                                           int32_t def, std::vector<std::string>& warnings) {
  const GgufValue* v = g.Find(key);
  if (v == nullptr) return std::optional<int32_t>();
  if (!IsGgufIntegerType(v->type)) return g.KeyError(key, "an integer token id", GgufValueTypeName(v->type));
  if (IsGgufSignedType(v->type) ? (v->i < 0 || static_cast<uint64_t>(v->i) >= n_vocab) : v->u >= n_vocab) {
    // -1 (u32 0xFFFFFFFF as converters write it) is LLAMA_TOKEN_NULL, "no such token": not worth a
    // warning (llama.cpp warns for it too, e.g. for stories260K's padding id).
    if (IsGgufSignedType(v->type) ? v->i == -1 : v->u == UINT32_MAX) return std::optional<int32_t>();
    const std::string found = IsGgufSignedType(v->type) ? std::to_string(v->i) : std::to_string(v->u);
    const std::string fallback =
        def == kTokenNull ? "no such token" : "the default id " + std::to_string(def);
    warnings.push_back(g.KeyError(key,
                                  "a token id below " + std::to_string(n_vocab) + " (the vocabulary's size)",
                                  found + "; using " + fallback + " (llama.cpp: bad special token)")
                           .message());
    return std::optional<int32_t>();
  }
  return std::optional<int32_t>(
      static_cast<int32_t>(IsGgufSignedType(v->type) ? v->i : static_cast<int64_t>(v->u)));
}

struct PreInfo {
  const char* names[20];
  PreTokenizer type;
  bool clean_spaces;
  bool ignore_merges;
  bool add_bos;
  bool add_sep;
  bool no_bos;  // the bos id is cleared (chatglm)
};

// tokenizer.ggml.pre -> regex list and flags (llama.cpp llama_vocab::impl::load).
const PreInfo kPreInfos[] = {
    {{"default"}, PreTokenizer::kDefault, true, false, false, false, false},
    {{"gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de", "a.x-4.0", "mellum",
      "modern-bert", "mpt", "olmo", "jais", "exaone4"},
     PreTokenizer::kGpt2,
     true,
     false,
     false,
     false,
     false},
    {{"trillion", "granite-docling"}, PreTokenizer::kGpt2, false, false, false, false, false},
    {{"jina-v1-en", "jina-v2-code", "roberta-bpe"}, PreTokenizer::kGpt2, true, false, false, true, false},
    {{"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2",
      "jina-v5-nano"},
     PreTokenizer::kLlama3,
     true,
     true,
     true,
     false,
     false},
    {{"dbrx", "smaug-bpe"}, PreTokenizer::kLlama3, true, false, false, false, false},
    {{"glm4", "chatglm-bpe"}, PreTokenizer::kLlama3, true, false, false, false, true},
    {{"qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "hunyuan", "solar-open", "grok-2", "bailingmoe",
      "bailingmoe2", "llada-moe"},
     PreTokenizer::kQwen2,
     false,
     false,
     false,
     false,
     false},
    {{"stablelm2", "megrez"}, PreTokenizer::kQwen2, true, false, false, false, false},
    {{"starcoder", "refact", "codeshell", "exaone", "minerva-7b", "mellum2"},
     PreTokenizer::kStarcoder,
     true,
     false,
     false,
     false,
     false},
    {{"command-r", "smollm"}, PreTokenizer::kStarcoder, false, false, false, false, false},
    {{"gpt-4o", "llama4", "kanana2", "talkie", "minimax-m2"},
     PreTokenizer::kGpt4o,
     false,
     false,
     false,
     false,
     false},
    {{"tekken"}, PreTokenizer::kTekken, false, true, true, false, false},
    {{"deepseek-v3", "hunyuan-dense", "joyai-llm", "hy_v4"},
     PreTokenizer::kDeepseek3,
     false,
     false,
     false,
     false,
     false},
    {{"deepseek-coder"}, PreTokenizer::kDeepseekCoder, false, false, false, false, false},
    {{"qwen35"}, PreTokenizer::kQwen35, false, false, false, false, false},
    {{"seed-coder"}, PreTokenizer::kSeedCoder, false, false, false, false, false},
    {{"ufakzeka"}, PreTokenizer::kUfakzeka, false, false, false, false, false},
    {{"laguna"}, PreTokenizer::kLaguna, false, false, false, false, false},
    {{"minicpm5"}, PreTokenizer::kMinicpm5, true, true, false, false, false},
    {{"bloom", "gpt3-finnish"}, PreTokenizer::kBloom, true, false, false, false, false},
    {{"poro-chat"}, PreTokenizer::kBloom, false, false, false, false, false},
    {{"viking"}, PreTokenizer::kViking, false, false, false, false, false},
    {{"falcon"}, PreTokenizer::kFalcon, true, false, false, false, false},
};

const PreInfo* FindPre(const std::string& pre) {
  for (const PreInfo& info : kPreInfos) {
    for (const char* name : info.names) {
      if (name != nullptr && pre == name) return &info;
    }
  }
  return nullptr;
}

// Token texts llama.cpp recognises by text (llama_vocab::impl::load, "auto-detect special tokens").
const char* const kEotTexts[] = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
                                 "<|end_of_text|>", "<EOT>", "_<EOT>", "[EOT]",
                                 // One literal split after a \x escape (DeepSeek's "<｜end▁of▁sentence｜>").
                                 "<\xEF\xBD\x9C"  // NOLINT(bugprone-suspicious-missing-comma)
                                 "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>",
                                 "<end_of_utterance>"};
const char* const kEomTexts[] = {"<|eom_id|>"};
const char* const kFimPadTexts[] = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"};
const char* const kFimRepTexts[] = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"};
const char* const kFimSepTexts[] = {"<|file_sep|>"};
const char* const kEogTexts[] = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>",
                                 "<|calls|>", "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>",
                                 "_<EOT>", "[EOT]", "[EOS]", "<|end_of_text|>", "<end_of_utterance>", "<eos>",
                                 "<turn|>", "<|tool_response>",
                                 // One literal split after a \x escape (DeepSeek's "<｜end▁of▁sentence｜>").
                                 "<\xEF\xBD\x9C"  // NOLINT(bugprone-suspicious-missing-comma)
                                 "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>",
                                 "[e~["};

template <size_t N>
bool IsOneOf(const std::string& s, const char* const (&list)[N]) {
  for (const char* t : list) {
    if (s == t) return true;
  }
  return false;
}

uint32_t AttrFromTokenType(int32_t type) {
  switch (type) {
    case 1:
      return kTokenAttrNormal;
    case 2:
      return kTokenAttrUnknown;
    case 3:
      return kTokenAttrControl;
    case 4:
      return kTokenAttrUserDefined;
    case 5:
      return kTokenAttrUnused;
    case 6:
      return kTokenAttrByte;
    default:
      return kTokenAttrUndefined;
  }
}

Status ReadTokens(const GgufFile& g, Tokenizer::Impl& v) {
  // The count and type checks the planner makes too (same messages).
  STOWAGE_RETURN_IF_ERROR(GgufVocabularySize(g).status());
  STOWAGE_ASSIGN_OR_RETURN(std::vector<std::string_view> texts, g.GetStringArray("tokenizer.ggml.tokens"));
  const size_t n = texts.size();
  std::vector<float> scores;
  if (const GgufValue* s = g.Find("tokenizer.ggml.scores")) {
    if (s->is_array() && s->elem_type == GgufValueType::INT32) {
      STOWAGE_ASSIGN_OR_RETURN(std::vector<int32_t> is, g.GetI32Array("tokenizer.ggml.scores"));
      scores.assign(is.begin(), is.end());
    } else {
      STOWAGE_ASSIGN_OR_RETURN(scores, g.GetF32Array("tokenizer.ggml.scores"));
    }
    if (scores.size() < n) {
      return g.KeyError("tokenizer.ggml.scores", "at least " + std::to_string(n) + " scores (one per token)",
                        std::to_string(scores.size()));
    }
  }
  std::vector<int32_t> types;
  if (g.Find("tokenizer.ggml.token_type") != nullptr) {
    STOWAGE_ASSIGN_OR_RETURN(types, g.GetI32Array("tokenizer.ggml.token_type"));
    if (types.size() < n) {
      return g.KeyError("tokenizer.ggml.token_type",
                        "at least " + std::to_string(n) + " entries (one per token)",
                        std::to_string(types.size()));
    }
  }
  // llama.cpp maps a type outside llama_token_type (0..6) to UNDEFINED, silently; said here once.
  auto unknown = [](int32_t t) { return t < 0 || t > 6; };
  const auto types_end = types.begin() + (types.empty() ? 0 : static_cast<std::ptrdiff_t>(n));
  if (auto bad = std::find_if(types.begin(), types_end, unknown); bad != types_end) {
    const auto more = std::count_if(bad + 1, types_end, unknown);
    v.warnings.push_back(g.KeyError("tokenizer.ggml.token_type", "token types 0..6 (llama_token_type)",
                                    std::to_string(*bad) + " for token " +
                                        std::to_string(bad - types.begin()) +
                                        (more > 0 ? " (and " + std::to_string(more) + " more)" : "") +
                                        "; read as undefined tokens, as llama.cpp does")
                             .message());
  }
  v.tokens.resize(n);
  v.token_to_id.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    Tokenizer::Impl::Token& t = v.tokens[i];
    // llama.cpp renames empty tokens so that every token has a distinct, non-empty text.
    t.text = texts[i].empty() ? "[EMPTY_" + std::to_string(i) + "]" : std::string(texts[i]);
    auto [it, inserted] = v.token_to_id.emplace(std::string_view(t.text), static_cast<int32_t>(i));
    if (!inserted) {  // llama.cpp asserts token_to_id.size() == id_to_token.size()
      return g.KeyError("tokenizer.ggml.tokens", "distinct token texts",
                        "duplicate token '" + t.text + "' at ids " + std::to_string(it->second) + " and " +
                            std::to_string(i));
    }
    t.score = scores.empty() ? 0.0f : scores[i];
    t.attr = types.empty() ? kTokenAttrNormal : AttrFromTokenType(types[i]);
    v.max_token_len = std::max(v.max_token_len, t.text.size());
  }
  return Status::Ok();
}

Status ReadMerges(const GgufFile& g, Tokenizer::Impl& v) {
  STOWAGE_ASSIGN_OR_RETURN(std::vector<std::string_view> merges, g.GetStringArray("tokenizer.ggml.merges"));
  v.bpe_ranks.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    // "left right", split at the first space after the first byte (llama.cpp); a merge without
    // one can never apply.
    const size_t sp = merges[i].find(' ', 1);
    if (sp == std::string_view::npos) continue;
    v.bpe_ranks.emplace(std::string(merges[i]), static_cast<int32_t>(i));
  }
  return Status::Ok();
}

// EOT/EOM/FIM ids by text when no key named them, end-of-generation set, "unused" control tokens
// (llama.cpp llama_vocab::impl::load). Tokens found this way become control tokens.
void DetectSpecialTokens(Tokenizer::Impl& v) {
  const int32_t n = static_cast<int32_t>(v.tokens.size());
  auto make_control = [&](int32_t id) { v.tokens[id].attr |= kTokenAttrControl; };
  // llama.cpp takes the first match in its hash map's order; the first text of the list that is
  // in the vocabulary is deterministic and gives the ids llama.cpp reports for the common models
  // (Qwen2: <|im_end|> before <|endoftext|>; phi-3: <|end|>).
  auto detect = [&](int32_t& slot, const auto& list) {
    for (const char* text : list) {
      if (slot != kTokenNull) return;
      const int32_t id = v.Find(text);
      if (id == kTokenNull) continue;
      slot = id;
      make_control(id);
    }
  };
  detect(v.eot, kEotTexts);
  detect(v.eom, kEomTexts);
  detect(v.fim_pad, kFimPadTexts);
  detect(v.fim_rep, kFimRepTexts);
  detect(v.fim_sep, kFimSepTexts);
  for (int32_t id = 0; id < n; ++id) {
    Tokenizer::Impl::Token& t = v.tokens[id];
    if ((t.attr & kTokenAttrControl) && t.text.find("unused") != std::string::npos)
      t.attr |= kTokenAttrUnused;
    if (IsOneOf(t.text, kEogTexts)) {
      v.eog.insert(id);
      make_control(id);
    }
  }
  for (int32_t id : {v.fim_pad, v.fim_rep, v.fim_sep, v.eos, v.eot, v.eom}) {
    if (id != kTokenNull) v.eog.insert(id);
  }
}

// Per-model token attributes that GGUF does not store (llama.cpp, end of load()): phi-3's special
// tokens eat the whitespace to their right; the <mask> of jina-v2 (by pre-tokenizer), nomic-bert-moe
// and jina-bert-v3 (by architecture) and ModernBERT's [MASK] (by general.name) the whitespace to
// their left.
Status ApplyModelAttributes(const GgufFile& g, Tokenizer::Impl& v) {
  STOWAGE_ASSIGN_OR_RETURN(std::string name, g.GetStringOr("general.name", ""));
  std::transform(name.begin(), name.end(), name.begin(),
                 [](char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); });
  const std::string& pre = v.pre;
  auto set = [&](const char* text, uint32_t attr, bool on) {
    const int32_t id = v.Find(text);
    if (id == kTokenNull) return;
    v.tokens[id].attr = on ? (v.tokens[id].attr | attr) : (v.tokens[id].attr & ~attr);
  };
  STOWAGE_ASSIGN_OR_RETURN(std::string arch, g.GetStringOr("general.architecture", ""));
  if (pre.find("jina-v2-de") != std::string::npos || pre.find("jina-v2-es") != std::string::npos ||
      pre.find("jina-v2-code") != std::string::npos || arch.find("nomic-bert-moe") != std::string::npos ||
      arch.find("jina-bert-v3") != std::string::npos) {
    set("<mask>", kTokenAttrLstrip, true);
  } else if (name.find("phi-3") != std::string::npos || name.find("phi3") != std::string::npos) {
    for (int32_t id : v.special_tokens) v.tokens[id].attr |= kTokenAttrRstrip;
    set("</s>", kTokenAttrRstrip, true);
    for (const char* t : {"<unk>", "<s>", "<|endoftext|>"}) set(t, kTokenAttrRstrip, false);
  } else if (name.find("modern-bert") != std::string::npos) {
    set("[MASK]", kTokenAttrLstrip, true);
  }
  return Status::Ok();
}

Status ReadFlag(const GgufFile& g, const char* key, bool& flag) {
  STOWAGE_ASSIGN_OR_RETURN(flag, g.GetBoolOr(key, flag));
  return Status::Ok();
}

}  // namespace

Result<Tokenizer> Tokenizer::FromGguf(const GgufFile& g) {
  auto v = std::make_shared<Impl>();
  STOWAGE_ASSIGN_OR_RETURN(std::string model, g.GetString("tokenizer.ggml.model"));
  STOWAGE_ASSIGN_OR_RETURN(std::string pre, g.GetStringOr("tokenizer.ggml.pre", ""));

  // Defaults per vocabulary type (llama.cpp).
  if (model == "llama") {
    v->type = VocabType::kSpm;
    v->bos = 1;
    v->eos = 2;
    v->unk = 0;
    v->add_space_prefix = true;
    v->add_bos = true;
  } else if (model == "bert") {
    v->type = VocabType::kWpm;
    v->bos = 101;
    v->unk = 100;
    v->sep = 102;
    v->pad = 0;
    v->mask = 103;
    v->clean_spaces = true;
    v->add_bos = true;
    v->add_sep = true;
  } else if (model == "gpt2") {
    v->type = VocabType::kBpe;
    v->bos = 11;
    v->eos = 11;
    v->clean_spaces = true;
    v->pre = pre.empty() ? "default" : pre;
    const PreInfo* info = FindPre(v->pre);
    if (info == nullptr) {
      return Status(StatusCode::kUnimplemented,
                    g.KeyError("tokenizer.ggml.pre", "a pre-tokenizer Stowage implements",
                               "unknown pre-tokenizer '" + pre + "'")
                        .message());
    }
    v->pre_type = info->type;
    v->clean_spaces = info->clean_spaces;
    v->ignore_merges = info->ignore_merges;
    v->add_bos = info->add_bos;
    v->add_sep = info->add_sep;
    if (info->no_bos) v->bos = kTokenNull;
  } else {
    return Status(StatusCode::kUnimplemented, g.KeyError("tokenizer.ggml.model", "llama, gpt2 or bert",
                                                         "unsupported tokenizer '" + model + "'")
                                                  .message());
  }
  STOWAGE_RETURN_IF_ERROR(ReadFlag(g, "tokenizer.ggml.add_space_prefix", v->add_space_prefix));
  STOWAGE_RETURN_IF_ERROR(ReadTokens(g, *v));
  if (v->type == VocabType::kBpe) STOWAGE_RETURN_IF_ERROR(ReadMerges(g, *v));

  const size_t n_vocab = v->tokens.size();
  int32_t fim_pre = kTokenNull, fim_suf = kTokenNull, fim_mid = kTokenNull;
  const std::pair<const char*, int32_t*> id_keys[] = {
      {"tokenizer.ggml.bos_token_id", &v->bos},
      {"tokenizer.ggml.eos_token_id", &v->eos},
      {"tokenizer.ggml.eot_token_id", &v->eot},
      {"tokenizer.ggml.eom_token_id", &v->eom},
      {"tokenizer.ggml.unknown_token_id", &v->unk},
      {"tokenizer.ggml.seperator_token_id", &v->sep},
      {"tokenizer.ggml.padding_token_id", &v->pad},
      {"tokenizer.ggml.mask_token_id", &v->mask},
      {"tokenizer.ggml.fim_pad_token_id", &v->fim_pad},
      {"tokenizer.ggml.fim_rep_token_id", &v->fim_rep},
      {"tokenizer.ggml.fim_sep_token_id", &v->fim_sep},
      // Read for their checks and warnings only (llama.cpp reads them; the deprecated names last).
      {"tokenizer.ggml.fim_pre_token_id", &fim_pre},
      {"tokenizer.ggml.fim_suf_token_id", &fim_suf},
      {"tokenizer.ggml.fim_mid_token_id", &fim_mid},
      {"tokenizer.ggml.prefix_token_id", &fim_pre},
      {"tokenizer.ggml.suffix_token_id", &fim_suf},
      {"tokenizer.ggml.middle_token_id", &fim_mid},
  };
  for (const auto& [key, slot] : id_keys) {
    if (*slot != kTokenNull && static_cast<size_t>(*slot) >= n_vocab) *slot = kTokenNull;
    STOWAGE_ASSIGN_OR_RETURN(std::optional<int32_t> id, ReadTokenId(g, key, n_vocab, *slot, v->warnings));
    if (id) *slot = *id;
  }
  STOWAGE_RETURN_IF_ERROR(ReadFlag(g, "tokenizer.ggml.add_bos_token", v->add_bos));
  STOWAGE_RETURN_IF_ERROR(ReadFlag(g, "tokenizer.ggml.add_eos_token", v->add_eos));
  STOWAGE_RETURN_IF_ERROR(ReadFlag(g, "tokenizer.ggml.add_sep_token", v->add_sep));
  // Only the flags the vocabulary type reads are checked (llama.cpp's tokenize: SPM and BPE add BOS
  // and EOS by add_bos / add_eos; WPM always adds [CLS] ... [SEP] and no path reads add_sep, so
  // llama.cpp loads such a vocabulary and ignores those flags).
  const bool uses_flags = v->type != VocabType::kWpm;
  const std::pair<bool, int32_t> checks[] = {{v->add_bos && uses_flags, v->bos},
                                             {v->add_eos && uses_flags, v->eos}};
  const char* const check_names[] = {"add_bos_token", "add_eos_token"};
  const char* const id_names[] = {"bos_token_id", "eos_token_id"};
  for (int i = 0; i < 2; ++i) {
    if (checks[i].first && checks[i].second == kTokenNull) {
      const std::string key = std::string("tokenizer.ggml.") + check_names[i];
      const std::string origin = g.Find(key) ? "" : " (the default for model '" + model + "')";
      return g.KeyError(key,
                        std::string("false while tokenizer.ggml.") + id_names[i] + " names no token of the " +
                            std::to_string(n_vocab) + "-token vocabulary",
                        "true" + origin);
    }
  }
  STOWAGE_RETURN_IF_ERROR(ReadFlag(g, "tokenizer.ggml.normalizer.lowercase", v->lowercase));
  v->strip_accents = v->lowercase;
  STOWAGE_RETURN_IF_ERROR(ReadFlag(g, "tokenizer.ggml.normalizer.strip_accents", v->strip_accents));

  DetectSpecialTokens(*v);

  for (int32_t id = 0; id < static_cast<int32_t>(n_vocab); ++id) {
    if (v->tokens[id].attr & (kTokenAttrControl | kTokenAttrUserDefined | kTokenAttrUnknown)) {
      v->special_tokens.push_back(id);
    }
  }
  std::stable_sort(v->special_tokens.begin(), v->special_tokens.end(),
                   [&](int32_t a, int32_t b) { return v->tokens[a].text.size() > v->tokens[b].text.size(); });
  STOWAGE_RETURN_IF_ERROR(ApplyModelAttributes(g, *v));

  // Newline token (llama.cpp): SPM the byte token of '\n', WPM the padding token, BPE the first
  // token of "\n".
  if (v->type == VocabType::kSpm) {
    v->nl = v->ByteToToken('\n');
    if (v->nl == kTokenNull) v->nl = v->pad;
  } else if (v->type == VocabType::kWpm) {
    v->nl = v->pad;
  } else {
    std::vector<int32_t> ids;
    v->TokenizeFragment("\n", false, ids);
    v->nl = ids.empty() ? v->pad : ids[0];
  }
  return Tokenizer(std::move(v));
}

Status Tokenizer::Validate(const GgufFile& g) { return FromGguf(g).status(); }

// Accessors.
int32_t Tokenizer::n_vocab() const { return static_cast<int32_t>(impl_->tokens.size()); }
VocabType Tokenizer::type() const { return impl_->type; }
const std::string& Tokenizer::pre() const { return impl_->pre; }
int32_t Tokenizer::bos() const { return impl_->bos; }
int32_t Tokenizer::eos() const { return impl_->eos; }
int32_t Tokenizer::eot() const { return impl_->eot; }
int32_t Tokenizer::unk() const { return impl_->unk; }
int32_t Tokenizer::sep() const { return impl_->sep; }
int32_t Tokenizer::pad() const { return impl_->pad; }
int32_t Tokenizer::nl() const { return impl_->nl; }
bool Tokenizer::add_bos() const { return impl_->add_bos; }
bool Tokenizer::add_eos() const { return impl_->add_eos; }
const std::vector<std::string>& Tokenizer::warnings() const { return impl_->warnings; }
bool Tokenizer::IsEog(int32_t token) const { return token != kTokenNull && impl_->eog.count(token) > 0; }
std::string_view Tokenizer::TokenText(int32_t token) const {
  return impl_->InRange(token) ? std::string_view(impl_->tokens[token].text) : std::string_view();
}
float Tokenizer::TokenScore(int32_t token) const {
  return impl_->InRange(token) ? impl_->tokens[token].score : 0.0f;
}
uint32_t Tokenizer::TokenAttrs(int32_t token) const {
  return impl_->InRange(token) ? impl_->tokens[token].attr : kTokenAttrUndefined;
}
int32_t Tokenizer::TextToToken(std::string_view text) const { return impl_->Find(text); }

}  // namespace stowage
