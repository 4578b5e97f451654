// fs/src/hf_gguf.cpp — see wcodecfs/hf_gguf.h. The converter behaviour this
// follows (and what it refuses) is written down in docs/gguf-view.md.
#include "wcodecfs/hf_gguf.h"

#if WCODECFS_HAVE_SENTENCEPIECE
#include <sentencepiece_processor.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "hf_gguf_bpe_i.h"
#include "hf_json_i.h"
#include "wcodec/packed_ternary.h"

namespace wcodecfs {
namespace {

using Json = nlohmann::ordered_json;

constexpr uint64_t kMaxDim = uint64_t{1} << 31;  // u32 metadata values and row indexes

// SentencePiece token types as llama.cpp stores them (tokenizer.ggml.token_type).
enum TokType : int32_t { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };

// A positive integer field (or `def` when absent or null and def > 0).
Status get_count(const Json& cfg, const char* key, uint64_t def, const std::string& what, uint64_t* out) {
  auto it = cfg.find(key);
  if (it == cfg.end() || it->is_null()) {
    if (def == 0) return Status::Corruption(what + ": \"" + key + "\" is missing");
    *out = def;
    return Status::OK();
  }
  if (!it->is_number_integer() || it->is_boolean())
    return Status::Corruption(what + ": \"" + key + "\" is " + excerpt(*it) + " (expected a positive integer)");
  if (it->is_number_unsigned()) {
    *out = it->get<uint64_t>();
  } else {
    const int64_t v = it->get<int64_t>();
    if (v <= 0) return Status::Corruption(what + ": \"" + key + "\" is " + std::to_string(v) + " (expected > 0)");
    *out = static_cast<uint64_t>(v);
  }
  if (*out == 0 || *out >= kMaxDim)
    return Status::Corruption(what + ": \"" + key + "\" is " + std::to_string(*out) + " (expected 1.." +
                              std::to_string(kMaxDim - 1) + ")");
  return Status::OK();
}

Status get_real(const Json& obj, const char* key, double def, const std::string& what, double* out) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) {
    *out = def;
    return Status::OK();
  }
  if (!it->is_number() || it->is_boolean())
    return Status::Corruption(what + ": \"" + key + "\" is " + excerpt(*it) + " (expected a number)");
  *out = it->get<double>();
  if (!std::isfinite(*out) || *out <= 0)
    return Status::Corruption(what + ": \"" + key + "\" is " + excerpt(*it) + " (expected a positive number)");
  return Status::OK();
}

const std::set<std::string>& supported_architectures() {
  static const std::set<std::string> s = {"LlamaForCausalLM", "MistralForCausalLM"};
  return s;
}

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
bool ends_with(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && s.substr(s.size() - p.size()) == p;
}

// The converter's does_token_look_special.
[[maybe_unused]] bool looks_special(const std::string& t) { return hf_token_looks_special(t); }

[[maybe_unused]] std::string replace_all(std::string_view s, std::string_view from, std::string_view to) {
  std::string out;
  for (size_t at = 0;;) {
    const size_t hit = s.find(from, at);
    out.append(s.substr(at, hit == std::string_view::npos ? std::string_view::npos : hit - at));
    if (hit == std::string_view::npos) return out;
    out.append(to);
    at = hit + from.size();
  }
}

// The llama hyperparameters the view writes.
struct Hparams {
  uint64_t vocab = 0, hidden = 0, ff = 0, layers = 0, heads = 0, kv_heads = 0, ctx = 0, head_dim = 0;
  double rms_eps = 0, rope_theta = 0;
};

Status read_hparams(const Json& cfg, const std::string& what, Hparams* h) {
  // Keys that make the converter write other metadata or other tensors.
  for (const char* k : {"text_config", "quantization_config", "num_local_experts", "num_experts", "n_routed_experts",
                        "layer_norm_eps", "layer_norm_epsilon", "norm_epsilon", "draft_vocab_size",
                        "transformer_layer_config", "vocab_size_per_layer_input", "n_layers", "n_layer",
                        "num_layers", "n_ctx", "n_embd", "n_head", "n_heads", "n_kv_heads", "mrope_section"}) {
    auto it = cfg.find(k);
    if (it != cfg.end() && !it->is_null())
      return Status(Code::kNotSupported, what + ": \"" + k + "\" (" + excerpt(*it) + ") is not supported by the GGUF view");
  }
  if (auto it = cfg.find("is_causal"); it != cfg.end() && it->is_boolean() && !it->get<bool>())
    return Status(Code::kNotSupported, what + ": \"is_causal\" is false (not supported by the GGUF view)");
  WCFS_RETURN_IF_ERROR(get_count(cfg, "vocab_size", 0, what, &h->vocab));
  WCFS_RETURN_IF_ERROR(get_count(cfg, "hidden_size", 0, what, &h->hidden));
  WCFS_RETURN_IF_ERROR(get_count(cfg, "intermediate_size", 0, what, &h->ff));
  WCFS_RETURN_IF_ERROR(get_count(cfg, "num_hidden_layers", 0, what, &h->layers));
  WCFS_RETURN_IF_ERROR(get_count(cfg, "num_attention_heads", 0, what, &h->heads));
  // The defaults are transformers' LlamaConfig's (the converter reads the
  // configuration through it).
  WCFS_RETURN_IF_ERROR(get_count(cfg, "num_key_value_heads", h->heads, what, &h->kv_heads));
  WCFS_RETURN_IF_ERROR(get_count(cfg, "max_position_embeddings", 2048, what, &h->ctx));
  if (h->hidden % h->heads != 0 && cfg.find("head_dim") == cfg.end())
    return Status::Corruption(what + ": \"hidden_size\" " + std::to_string(h->hidden) +
                              " is not a multiple of \"num_attention_heads\" " + std::to_string(h->heads));
  WCFS_RETURN_IF_ERROR(get_count(cfg, "head_dim", h->hidden / std::max<uint64_t>(1, h->heads), what, &h->head_dim));
  if (h->heads % h->kv_heads != 0)
    return Status::Corruption(what + ": \"num_attention_heads\" " + std::to_string(h->heads) +
                              " is not a multiple of \"num_key_value_heads\" " + std::to_string(h->kv_heads));
  if (h->vocab == 32016)
    return Status(Code::kNotSupported, what + ": \"vocab_size\" 32016 (the converter's CodeLlama special case is not "
                                               "supported by the GGUF view)");
  WCFS_RETURN_IF_ERROR(get_real(cfg, "rms_norm_eps", 1e-6, what, &h->rms_eps));
  // Rope: no scaling; theta from rope_parameters (transformers 5) or the top level.
  const Json* rope = nullptr;
  for (const char* k : {"rope_parameters", "rope_scaling"}) {
    auto it = cfg.find(k);
    if (it == cfg.end() || it->is_null()) continue;
    if (!it->is_object()) return Status::Corruption(what + ": \"" + k + "\" is " + excerpt(*it) + " (expected an object)");
    for (const char* tk : {"rope_type", "type"}) {
      auto t = it->find(tk);
      if (t != it->end() && !(t->is_string() && t->get<std::string>() == "default"))
        return Status(Code::kNotSupported,
                      what + ": \"" + k + "\".\"" + tk + "\" is " + excerpt(*t) + " (only unscaled rope is supported)");
    }
    for (auto kv = it->begin(); kv != it->end(); ++kv)
      if (kv.key() != "rope_type" && kv.key() != "type" && kv.key() != "rope_theta")
        return Status(Code::kNotSupported, what + ": \"" + k + "\".\"" + kv.key() + "\" is not supported");
    if (!rope) rope = &*it;
  }
  double top_theta = 0;
  WCFS_RETURN_IF_ERROR(get_real(cfg, "rope_theta", 10000.0, what, &top_theta));
  h->rope_theta = top_theta;
  if (rope && rope->contains("rope_theta") && cfg.find("rope_theta") == cfg.end())
    WCFS_RETURN_IF_ERROR(get_real(*rope, "rope_theta", 10000.0, what, &h->rope_theta));
  return Status::OK();
}

// ------------------------------------------------------------- tokenizer

struct Vocab {
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> types;
};

Status spm_vocab(const HfDirFiles& f, uint64_t vocab_size, Vocab* v) {
  const std::string what = f.where + "tokenizer.model";
#if !WCODECFS_HAVE_SENTENCEPIECE
  (void)vocab_size;
  (void)v;
  return Status(Code::kNotSupported, what + ": this build has no SentencePiece library (libsentencepiece-dev), so it "
                                             "cannot read the tokenizer");
#else
  sentencepiece::SentencePieceProcessor sp;
  const auto st = sp.LoadFromSerializedProto(f.tokenizer_model);
  if (!st.ok()) return Status::Corruption(what + ": not a SentencePiece model (" + st.ToString() + ")");
  const int n = sp.GetPieceSize();
  if (n <= 0) return Status::Corruption(what + ": the model has no pieces");
  v->tokens.resize(vocab_size);
  v->scores.assign(vocab_size, -10000.0f);
  v->types.assign(vocab_size, kUnused);
  for (uint64_t i = 0; i < vocab_size; ++i) v->tokens[i] = "[PAD" + std::to_string(i) + "]";
  for (int id = 0; id < n && static_cast<uint64_t>(id) < vocab_size; ++id) {
    int32_t t = kNormal;
    if (sp.IsUnknown(id))
      t = kUnknown;
    else if (sp.IsControl(id))
      t = kControl;
    else if (sp.IsUnused(id))
      t = kUnused;
    else if (sp.IsByte(id))
      t = kByte;
    v->tokens[id] = sp.IdToPiece(id);
    v->scores[id] = sp.GetScore(id);
    v->types[id] = t;
  }
  if (f.added_tokens) {
    const std::string aw = f.where + "added_tokens.json";
    WCFS_ASSIGN_OR_RETURN(Json j, parse_json_object<Json>(*f.added_tokens, aw));
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (!it->is_number_integer() || it->is_boolean() || (it->is_number_integer() && !it->is_number_unsigned() &&
                                                          it->get<int64_t>() < 0))
        return Status::Corruption(aw + ": token \"" + it.key() + "\" has id " + excerpt(*it) +
                                  " (expected a non-negative integer)");
      const uint64_t id = it->get<uint64_t>();
      if (id >= vocab_size) continue;  // the converter ignores it too
      v->tokens[id] = it.key();
      v->scores[id] = -1000.0f;
      v->types[id] = kUserDefined;
    }
  }
  if (f.tokenizer_config) {
    const std::string tw = f.where + "tokenizer_config.json";
    WCFS_ASSIGN_OR_RETURN(Json j, parse_json_object<Json>(*f.tokenizer_config, tw));
    auto dec = j.find("added_tokens_decoder");
    if (dec != j.end() && !dec->is_null()) {
      if (!dec->is_object()) return Status::Corruption(tw + ": \"added_tokens_decoder\" is not an object");
      for (auto it = dec->begin(); it != dec->end(); ++it) {
        const std::string& key = it.key();
        uint64_t id = 0;
        bool ok = !key.empty() && key.size() <= 10;
        for (char c : key) ok = ok && c >= '0' && c <= '9';
        if (ok) id = std::stoull(key);
        if (!ok) return Status::Corruption(tw + ": \"added_tokens_decoder\" key \"" + key + "\" is not a token id");
        auto content = it->is_object() ? it->find("content") : it->end();
        if (!it->is_object() || content == it->end() || !content->is_string())
          return Status::Corruption(tw + ": \"added_tokens_decoder\".\"" + key + "\" has no string \"content\"");
        if (id >= vocab_size) continue;
        std::string token = content->get<std::string>();
        auto special = it->find("special");
        const bool is_special = special != it->end() && !special->is_null() &&
                                !(special->is_boolean() && !special->get<bool>()) &&
                                !(special->is_number() && special->get<double>() == 0) &&
                                !(special->is_string() && special->get<std::string>().empty());
        if (is_special || looks_special(token)) {
          v->types[id] = kControl;
        } else {
          token = replace_all(token, "\xe2\x96\x81", " ");
          v->types[id] = kUserDefined;
        }
        v->scores[id] = -1000.0f;
        v->tokens[id] = token;
      }
    }
  }
  return Status::OK();
#endif
}

const char* const kSpecialTypes[] = {"bos", "eos", "unk", "sep", "pad", "cls", "mask"};

const char* special_id_key(const std::string& typ) {
  if (typ == "bos") return "tokenizer.ggml.bos_token_id";
  if (typ == "eos") return "tokenizer.ggml.eos_token_id";
  if (typ == "unk") return "tokenizer.ggml.unknown_token_id";
  if (typ == "sep") return "tokenizer.ggml.seperator_token_id";
  if (typ == "pad") return "tokenizer.ggml.padding_token_id";
  if (typ == "mask") return "tokenizer.ggml.mask_token_id";
  if (typ == "eot") return "tokenizer.ggml.eot_token_id";
  if (typ == "eom") return "tokenizer.ggml.eom_token_id";
  return nullptr;  // cls: the converter has no key for it
}

const char* add_key(const std::string& typ) {
  if (typ == "bos") return "tokenizer.ggml.add_bos_token";
  if (typ == "eos") return "tokenizer.ggml.add_eos_token";
  if (typ == "sep") return "tokenizer.ggml.add_sep_token";
  return nullptr;
}

// Python's truthiness of a JSON value (the converter tests fields with `if x`).
bool truthy(const Json& v) {
  if (v.is_null()) return false;
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_number()) return v.get<double>() != 0;
  if (v.is_string()) return !v.get_ref<const std::string&>().empty();
  return !v.empty();
}

// An insertion-ordered map (the converter's dicts keep insertion order,
// and it writes keys in that order).
template <typename V>
struct Ordered {
  std::vector<std::pair<std::string, V>> items;
  V* find(const std::string& k) {
    for (auto& p : items)
      if (p.first == k) return &p.second;
    return nullptr;
  }
  void set(const std::string& k, V v) {
    if (V* p = find(k)) *p = std::move(v);
    else items.emplace_back(k, std::move(v));
  }
  void set_default(const std::string& k, V v) {
    if (!find(k)) items.emplace_back(k, std::move(v));
  }
};

// `processor.get(key, [])`-style access that the converter makes on every
// element of a TemplateProcessing list: an element that is not an object
// makes it fail (AttributeError), so the view refuses it.
Status special_token_id(const Json& elem, const char* wrapper, const std::string& what, Json* out) {
  if (!elem.is_object()) return Status::Corruption(what + " is " + excerpt(elem) + " (expected an object)");
  auto w = elem.find(wrapper);
  *out = Json();
  if (w == elem.end()) return Status::OK();
  if (!w->is_object()) return Status::Corruption(what + ".\"" + wrapper + "\" is " + excerpt(*w) + " (expected an object)");
  if (auto id = w->find("id"); id != w->end()) *out = *id;
  return Status::OK();
}

// The converter's handling of tokenizer.json's post_processor (SpecialVocab
// ._try_load_from_tokenizer_json): add_bos/eos/sep flags from ByteLevel,
// RobertaProcessing and simple TemplateProcessing rules, and the special
// tokens it implies (written into `tc`, as the converter does with its copy
// of tokenizer_config.json).
Status post_processor_rules(const Json& pp, const std::string& w, Json* tc, Json* sbos, Json* scls, Json* seos,
                            Json* ssep, std::vector<std::string>* types, Ordered<bool>* adds) {
  if (!pp.is_object()) return Status::Corruption(w + ": \"post_processor\" is " + excerpt(pp) + " (expected an object)");
  std::vector<Json> procs;
  if (auto ps = pp.find("processors"); ps != pp.end()) {
    if (!ps->is_array()) return Status::Corruption(w + ": \"post_processor\".\"processors\" is not a list");
    procs.assign(ps->begin(), ps->end());
  } else {
    procs.push_back(pp);
  }
  const bool have_tc = truthy(*tc);
  auto in = [](const Json& v, std::initializer_list<const Json*> set) {
    for (const Json* s : set)
      if (v == *s) return true;
    return false;
  };
  for (size_t i = 0; i < procs.size(); ++i) {
    const Json& proc = procs[i];
    const std::string pw = w + ": \"post_processor\" processor " + std::to_string(i);
    if (!proc.is_object()) return Status::Corruption(pw + " is " + excerpt(proc) + " (expected an object)");
    const Json ptype = proc.value("type", Json());
    if (ptype == "ByteLevel") {
      adds->set_default("bos", false);
      adds->set_default("eos", false);
    } else if (ptype == "RobertaProcessing") {
      adds->set("bos", true);
      adds->set("eos", true);
      adds->set("sep", true);
      auto first_of = [&](const char* k, const Json& def, Json* out) -> Status {
        auto it = proc.find(k);
        if (it == proc.end()) {
          *out = def;
          return Status::OK();
        }
        if (!it->is_array() || it->empty()) return Status::Corruption(pw + ".\"" + k + "\" is " + excerpt(*it));
        *out = (*it)[0];
        return Status::OK();
      };
      if (!truthy(*scls) && have_tc) {
        WCFS_RETURN_IF_ERROR(first_of("cls", *sbos, scls));
        (*tc)["cls_token"] = *scls;
      }
      if (!truthy(*ssep) && have_tc) {
        WCFS_RETURN_IF_ERROR(first_of("sep", *seos, ssep));
        (*tc)["sep_token"] = *ssep;
      }
    } else if (ptype == "TemplateProcessing") {
      const Json single = proc.value("single", Json::array()), pair = proc.value("pair", Json::array());
      if (!single.is_array() || !pair.is_array())
        return Status::Corruption(pw + ": \"single\" / \"pair\" are not lists");
      Json first, last;
      if (single.size() > 1) {
        WCFS_RETURN_IF_ERROR(special_token_id(single[0], "SpecialToken", pw + ".\"single\"[0]", &first));
        if (truthy(first)) {
          if (!have_tc) {
            *sbos = first;
          } else if (!in(first, {sbos, scls})) {
            if (!truthy(*sbos)) (*tc)["bos_token"] = *sbos = first;
            if (!truthy(*scls)) (*tc)["cls_token"] = *scls = first;
          }
          adds->set("bos", in(first, {sbos, scls}));
        }
        WCFS_RETURN_IF_ERROR(special_token_id(single.back(), "SpecialToken", pw + ".\"single\"[-1]", &last));
        if (truthy(last)) {
          if (!have_tc) {
            *seos = last;
          } else if (last != *seos) {
            const bool has_eot = std::find(types->begin(), types->end(), "eot") != types->end();
            const bool has_eom = std::find(types->begin(), types->end(), "eom") != types->end();
            if (!has_eot) {
              types->push_back("eot");
              (*tc)["eot_token"] = *seos;
            } else if (!has_eom) {
              types->push_back("eom");
              (*tc)["eom_token"] = *seos;
            }
            (*tc)["eos_token"] = *seos = last;
          }
          adds->set("eos", last == *seos);
        }
      }
      if (!pair.empty()) {
        Json p0, pn;
        WCFS_RETURN_IF_ERROR(special_token_id(pair[0], "SpecialToken", pw + ".\"pair\"[0]", &p0));
        WCFS_RETURN_IF_ERROR(special_token_id(pair.back(), "SpecialToken", pw + ".\"pair\"[-1]", &pn));
        const size_t start = truthy(first) && p0 == first ? 1 : 0;
        const size_t stop = truthy(last) && pn == last ? pair.size() - 1 : pair.size();
        if (start < stop) {
          Json a, b;
          WCFS_RETURN_IF_ERROR(special_token_id(pair[start], "Sequence", pw + ".\"pair\"", &a));
          WCFS_RETURN_IF_ERROR(special_token_id(pair[stop - 1], "Sequence", pw + ".\"pair\"", &b));
          if (a == "A" && b == "B" && stop - start > 2) {
            bool add_sep = false;
            Json e0;
            WCFS_RETURN_IF_ERROR(special_token_id(pair[start + 1], "SpecialToken", pw + ".\"pair\"", &e0));
            if (truthy(e0) && in(e0, {ssep, seos}) && !truthy(last)) add_sep = true;
            if (stop - start - 2 == 2) {
              Json e1;
              WCFS_RETURN_IF_ERROR(special_token_id(pair[start + 2], "SpecialToken", pw + ".\"pair\"", &e1));
              if (truthy(e1) && in(e1, {ssep, seos})) add_sep = true;
            }
            adds->set("sep", add_sep);
            if (add_sep && !truthy(*ssep) && have_tc) (*tc)["sep_token"] = *seos;
          }
        }
      }
    }
  }
  return Status::OK();
}

// The converter's SpecialVocab: special token ids, add_*_token flags, the
// chat template and normalizer flags, as pairs in its order. `bpe`: the
// vocabulary came from tokenizer.json (SpecialVocab without n_vocab, with
// the post_processor's rules); otherwise ids at or past n_vocab are skipped
// and a post_processor is refused.
Status special_vocab(const HfDirFiles& f, const Json& config, uint64_t n_vocab, bool bpe,
                     std::vector<wcodec::GgufKv>* kv) {
  Ordered<uint32_t> ids;
  Ordered<bool> adds;
  std::vector<std::string> types(std::begin(kSpecialTypes), std::end(kSpecialTypes));
  std::optional<bool> lower, strip;
  auto set_id = [&](const std::string& typ, const Json& tid, const std::string& what) -> Status {
    if (!tid.is_number_integer() && !tid.is_boolean()) return Status::OK();  // the converter ignores non-ints
    int64_t v = tid.is_boolean() ? (tid.get<bool>() ? 1 : 0)
                                 : (tid.is_number_unsigned() ? static_cast<int64_t>(std::min<uint64_t>(
                                                                   tid.get<uint64_t>(), INT64_MAX))
                                                             : tid.get<int64_t>());
    if (v < 0) return Status::Corruption(what + ": special token " + typ + " has id " + std::to_string(v));
    if (bpe && static_cast<uint64_t>(v) > UINT32_MAX)
      return Status::Corruption(what + ": special token " + typ + " has id " + std::to_string(v) + " (not a u32)");
    if (!bpe && static_cast<uint64_t>(v) >= n_vocab) return Status::OK();  // skipped, as the converter does
    ids.set_default(typ, static_cast<uint32_t>(v));
    return Status::OK();
  };
  Json added = Json::array();
  Json tc;  // tokenizer_config.json, or null
  if (f.tokenizer_config) {
    WCFS_ASSIGN_OR_RETURN(tc, parse_json_object<Json>(*f.tokenizer_config, f.where + "tokenizer_config.json"));
  }
  if (f.tokenizer_json) {
    const std::string w = f.where + "tokenizer.json";
    // Parsed with sorted (std::map) objects: ordered_json's linear key
    // lookups make a 50k-token vocabulary quadratic. Only the sections
    // read here are kept, in the ordered form the rest uses.
    Json tj = Json::object();
    {
      const nlohmann::json full = nlohmann::json::parse(f.tokenizer_json->begin(), f.tokenizer_json->end(), nullptr,
                                                        /*allow_exceptions=*/false);
      if (full.is_discarded()) return Status::Corruption(w + ": not valid JSON");
      if (!full.is_object()) return Status::Corruption(w + ": the top level is not a JSON object");
      for (const char* k : {"post_processor", "normalizer", "added_tokens"})
        if (auto it = full.find(k); it != full.end()) tj[k] = Json(*it);
    }
    auto pp = tj.find("post_processor");
    const bool has_pp = pp != tj.end() && truthy(*pp);
    if (has_pp && !bpe)
      return Status(Code::kNotSupported, w + ": \"post_processor\" " + excerpt(*pp) +
                                             " (tokenizer.json post-processors of SentencePiece models are not "
                                             "supported by the GGUF view yet)");
    if (auto nz = tj.find("normalizer"); nz != tj.end() && !nz->is_null()) {
      std::vector<const Json*> todo = {&*nz};
      for (size_t i = 0; i < todo.size() && i < 64; ++i) {
        const Json& n = *todo[i];
        if (!n.is_object()) continue;
        const std::string type = n.value("type", std::string());
        if (type == "Lowercase") lower = true;
        if (type == "StripAccents") strip = true;
        if (type == "BertNormalizer") {
          if (auto l = n.find("lowercase"); l != n.end() && l->is_boolean()) lower = l->get<bool>();
          if (auto s = n.find("strip_accents"); s != n.end() && s->is_boolean()) strip = s->get<bool>();
        }
        if (type == "Sequence")
          if (auto ns = n.find("normalizers"); ns != n.end() && ns->is_array())
            for (const Json& x : *ns) todo.push_back(&x);
      }
    }
    if (auto at = tj.find("added_tokens"); at != tj.end() && at->is_array()) added = *at;
    if (bpe) {
      auto field = [&](const char* k) { return tc.is_object() && tc.contains(k) ? tc[k] : Json(); };
      Json sbos = field("bos_token"), scls = field("cls_token"), seos = field("eos_token"), ssep = field("sep_token");
      if (!truthy(sbos) && truthy(scls) && truthy(tc)) tc["bos_token"] = sbos = scls;
      if (!truthy(seos) && truthy(ssep) && truthy(tc)) tc["eos_token"] = seos = ssep;
      if (has_pp) WCFS_RETURN_IF_ERROR(post_processor_rules(*pp, w, &tc, &sbos, &scls, &seos, &ssep, &types, &adds));
    }
  }
  std::optional<std::string> chat;
  if (truthy(tc)) {
    const std::string w = f.where + "tokenizer_config.json";
    auto ct = tc.find("chat_template");
    if (ct != tc.end()) {
      if (ct->is_string()) chat = ct->get<std::string>();
      else if (ct->is_array())
        return Status(Code::kNotSupported, w + ": a list of chat templates is not supported by the GGUF view");
    } else if (f.chat_template) {
      chat = *f.chat_template;
    }
    for (const std::string& typ : types) {
      auto a = tc.find("add_" + typ + "_token");
      if (a != tc.end() && a->is_boolean()) adds.set_default(typ, a->get<bool>());
      auto e = tc.find(typ + "_token");
      if (e == tc.end()) continue;
      std::string content;
      if (e->is_string()) {
        content = e->get<std::string>();
      } else if (e->is_object() && e->contains("content") && (*e)["content"].is_string()) {
        content = (*e)["content"].get<std::string>();
      } else {
        continue;
      }
      for (const Json& t : added) {
        if (!t.is_object()) continue;
        auto c = t.find("content");
        if (c == t.end() || !c->is_string() || c->get<std::string>() != content) continue;
        auto id = t.find("id");
        if (id != t.end()) WCFS_RETURN_IF_ERROR(set_id(typ, *id, f.where + "tokenizer.json"));
        break;
      }
    }
  }
  for (const std::string& typ : types) {
    auto it = config.find(typ + "_token_id");
    if (it != config.end()) WCFS_RETURN_IF_ERROR(set_id(typ, *it, f.where + "config.json"));
  }
  for (const auto& [typ, id] : ids.items)
    if (const char* k = special_id_key(typ)) kv->push_back({k, wcodec::GgufValue::u32(id)});
  for (const auto& [typ, on] : adds.items)
    if (const char* k = add_key(typ)) kv->push_back({k, wcodec::GgufValue::boolean(on)});
  if (chat) kv->push_back({"tokenizer.chat_template", wcodec::GgufValue::str(*chat)});
  if (lower) kv->push_back({"tokenizer.ggml.normalizer.lowercase", wcodec::GgufValue::boolean(*lower)});
  if (strip) kv->push_back({"tokenizer.ggml.normalizer.strip_accents", wcodec::GgufValue::boolean(*strip)});
  return Status::OK();
}

// ---------------------------------------------------------------- tensors

// HF name -> GGUF name (without the layer number substituted), and whether
// the rows are permuted (0 none, 1 by the head count, 2 by the kv head count).
struct NameMap {
  std::string gguf;
  int permute = 0;
};

bool map_name(const std::string& hf, uint64_t layers, NameMap* out) {
  static const std::map<std::string, std::string> top = {{"model.embed_tokens.weight", "token_embd.weight"},
                                                         {"model.norm.weight", "output_norm.weight"},
                                                         {"lm_head.weight", "output.weight"}};
  if (auto it = top.find(hf); it != top.end()) {
    *out = {it->second, 0};
    return true;
  }
  constexpr std::string_view pre = "model.layers.";
  if (!starts_with(hf, pre)) return false;
  size_t p = pre.size(), q = p;
  while (q < hf.size() && hf[q] >= '0' && hf[q] <= '9') ++q;
  if (q == p || q - p > 6 || q >= hf.size() || hf[q] != '.' || (hf[p] == '0' && q - p > 1)) return false;
  const uint64_t bid = std::stoull(hf.substr(p, q - p));
  if (bid >= layers) return false;
  static const std::map<std::string, NameMap> per = {
      {"input_layernorm.weight", {"attn_norm.weight", 0}},
      {"post_attention_layernorm.weight", {"ffn_norm.weight", 0}},
      {"self_attn.q_proj.weight", {"attn_q.weight", 1}},
      {"self_attn.k_proj.weight", {"attn_k.weight", 2}},
      {"self_attn.v_proj.weight", {"attn_v.weight", 0}},
      {"self_attn.o_proj.weight", {"attn_output.weight", 0}},
      {"self_attn.q_proj.bias", {"attn_q.bias", 1}},
      {"self_attn.k_proj.bias", {"attn_k.bias", 2}},
      {"self_attn.v_proj.bias", {"attn_v.bias", 0}},
      {"self_attn.o_proj.bias", {"attn_output.bias", 0}},
      {"mlp.gate_proj.weight", {"ffn_gate.weight", 0}},
      {"mlp.up_proj.weight", {"ffn_up.weight", 0}},
      {"mlp.down_proj.weight", {"ffn_down.weight", 0}},
  };
  auto it = per.find(hf.substr(q + 1));
  if (it == per.end()) return false;
  *out = {"blk." + std::to_string(bid) + "." + it->second.gguf, it->second.permute};
  return true;
}

// Names the converter drops before mapping.
bool dropped(const std::string& n) {
  return ends_with(n, ".attention.masked_bias") || ends_with(n, ".attention.bias") || ends_with(n, ".rotary_emb.inv_freq");
}

// Weights per row of a llama matrix (the input dimension), 0 for none.
uint64_t ternary_cols(const std::string& hf, const Hparams& h) {
  if (ends_with(hf, "self_attn.o_proj.weight")) return h.heads * h.head_dim;
  if (ends_with(hf, "mlp.down_proj.weight")) return h.ff;
  for (const char* k : {"embed_tokens.weight", "lm_head.weight", "q_proj.weight", "k_proj.weight", "v_proj.weight",
                        "gate_proj.weight", "up_proj.weight"})
    if (ends_with(hf, k)) return h.hidden;
  return 0;
}

}  // namespace

float bf16_to_f32(uint16_t v) {
  const uint32_t bits = uint32_t{v} << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

float f16_to_f32(uint16_t h) {
  const uint32_t sign = uint32_t{h & 0x8000u} << 16;
  uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ffu, bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (man << 13);
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (man << 13);
  } else if (man == 0) {
    bits = sign;
  } else {
    int e = -1;
    do {
      ++e;
      man <<= 1;
    } while ((man & 0x400u) == 0);
    bits = sign | (static_cast<uint32_t>(112 - e) << 23) | ((man & 0x3ffu) << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

Status check_hf_config(std::string_view config_json, const std::string& what) {
  WCFS_ASSIGN_OR_RETURN(Json cfg, parse_json_object<Json>(config_json, what));
  auto a = cfg.find("architectures");
  if (a == cfg.end() || !a->is_array() || a->empty() || !(*a)[0].is_string())
    return Status(Code::kNotSupported, what + ": \"architectures\" is " + (a == cfg.end() ? "missing" : excerpt(*a)) +
                                           " (expected a list naming the model class)");
  const std::string arch = (*a)[0].get<std::string>();
  if (!supported_architectures().count(arch))
    return Status(Code::kNotSupported, what + ": architecture " + arch +
                                           " has no GGUF view (supported: LlamaForCausalLM, MistralForCausalLM)");
  return Status::OK();
}

Result<std::vector<std::string>> parse_hf_index(std::string_view json, const std::string& what) {
  WCFS_ASSIGN_OR_RETURN(Json j, parse_json_object<Json>(json, what));
  auto wm = j.find("weight_map");
  if (wm == j.end() || !wm->is_object() || wm->empty())
    return Status::Corruption(what + ": \"weight_map\" is missing, empty or not an object");
  std::set<std::string> parts;
  for (auto it = wm->begin(); it != wm->end(); ++it) {
    if (!it->is_string())
      return Status::Corruption(what + ": \"weight_map\".\"" + it.key() + "\" is " + excerpt(*it) +
                                " (expected a file name)");
    const std::string s = it->get<std::string>();
    if (s.empty() || s.find('/') != std::string::npos || s == "." || s == ".." || s.find('\0') != std::string::npos ||
        !ends_with(s, ".safetensors") || s.size() == std::string_view(".safetensors").size() || s.size() > 255)
      return Status::Corruption(what + ": \"weight_map\".\"" + it.key() + "\" names \"" + s +
                                "\" (expected a file name X.safetensors in this directory)");
    parts.insert(s);
  }
  return std::vector<std::string>(parts.begin(), parts.end());
}

Result<std::vector<std::string>> hf_index_tensor_names(std::string_view json, const std::string& what) {
  WCFS_ASSIGN_OR_RETURN(Json j, parse_json_object<Json>(json, what));
  auto wm = j.find("weight_map");
  if (wm == j.end() || !wm->is_object()) return Status::Corruption(what + ": \"weight_map\" is missing");
  std::vector<std::string> names;
  for (auto it = wm->begin(); it != wm->end(); ++it) names.push_back(it.key());
  return names;
}

Result<HfGgufPlan> plan_hf_gguf(const HfDirFiles& f, const std::vector<HfShard>& shards) {
  const std::string cw = f.where + "config.json";
  WCFS_RETURN_IF_ERROR(check_hf_config(f.config, cw));
  WCFS_ASSIGN_OR_RETURN(Json cfg, parse_json_object<Json>(f.config, cw));
  Hparams h;
  WCFS_RETURN_IF_ERROR(read_hparams(cfg, cw, &h));
  if (shards.empty()) return Status::Invalid(f.where + ": no weight files");

  // Tensors in the converter's order: shards in order, names sorted in each.
  struct Src {
    const wcodec::TensorInfo* t;
    size_t shard;
  };
  std::vector<Src> order;
  std::set<std::string> seen;
  for (size_t s = 0; s < shards.size(); ++s) {
    std::vector<const wcodec::TensorInfo*> ts;
    for (const auto& t : shards[s].header.tensors) ts.push_back(&t);
    // (A packed ternary NAME_packed sorts where NAME would.)
    auto key = [](const wcodec::TensorInfo* t) {
      return t->dtype == wcodec::DType::kU8 && ends_with(t->name, "_packed") ? t->name.substr(0, t->name.size() - 7)
                                                                             : t->name;
    };
    std::stable_sort(ts.begin(), ts.end(), [&](const auto* a, const auto* b) { return key(a) < key(b); });
    for (const auto* t : ts) {
      if (!seen.insert(t->name).second)
        return Status::Corruption(shards[s].what + ": tensor \"" + t->name + "\" is also in an earlier weight file");
      order.push_back({t, s});
    }
  }

  // Per-row int8 weights: NAME (I8, 2-D) with NAME_scale (F16, [rows]).
  std::map<std::string, Src> by_name;
  for (const Src& s : order) by_name.emplace(s.t->name, s);
  std::map<std::string, Src> scale_of;  // int8 weight name -> its scale
  std::set<std::string> scales;
  for (const Src& s : order) {
    if (s.t->dtype != wcodec::DType::kI8) continue;
    auto sc = by_name.find(s.t->name + "_scale");
    if (s.t->shape.size() != 2 || sc == by_name.end() || sc->second.t->dtype != wcodec::DType::kF16 ||
        sc->second.t->shape != std::vector<uint64_t>{s.t->shape[0]})
      return Status(Code::kNotSupported, shards[s.shard].what + ": tensor \"" + s.t->name +
                                             "\" is I8 without a per-row F16 " + s.t->name +
                                             "_scale (the quantized layouts the view maps are in docs/gguf-view.md)");
    scale_of.emplace(s.t->name, sc->second);
    scales.insert(sc->first);
  }
  // Packed ternary weights: NAME_packed (U8, 2-D) with NAME_scale (F16, [rows]).
  for (const Src& s : order) {
    if (s.t->dtype != wcodec::DType::kU8 || !ends_with(s.t->name, "_packed")) continue;
    const std::string base = s.t->name.substr(0, s.t->name.size() - 7);
    auto sc = by_name.find(base + "_scale");
    if (s.t->shape.size() != 2 || sc == by_name.end() || sc->second.t->dtype != wcodec::DType::kF16 ||
        sc->second.t->shape != std::vector<uint64_t>{s.t->shape[0]})
      return Status(Code::kNotSupported, shards[s.shard].what + ": tensor \"" + s.t->name +
                                             "\" is U8 without a per-row F16 " + base +
                                             "_scale (the quantized layouts the view maps are in docs/gguf-view.md)");
    if (by_name.count(base))
      return Status::Corruption(shards[s.shard].what + ": both " + base + " and " + s.t->name + " are present");
    scale_of.emplace(s.t->name, sc->second);
    scales.insert(sc->first);
  }

  HfGgufPlan plan;
  // Output type: the dtype of the 2-D weights, which must agree.
  std::optional<wcodec::DType> wdt;
  for (const Src& s : order) {
    if (s.t->shape.size() < 2 || dropped(s.t->name) || scale_of.count(s.t->name)) continue;
    if (wdt && *wdt != s.t->dtype)
      return Status(Code::kNotSupported, shards[s.shard].what + ": tensor \"" + s.t->name + "\" is " +
                                             wcodec::dtype_name(s.t->dtype) + ", earlier weights are " +
                                             wcodec::dtype_name(*wdt) + " (mixed weight dtypes are not supported)");
    wdt = s.t->dtype;
  }
  if (!wdt && scale_of.empty()) return Status::Corruption(f.where + ": the weights hold no 2-D tensor");
  if (!wdt) wdt = wcodec::DType::kF32;
  uint32_t file_type = 0;
  switch (*wdt) {
    case wcodec::DType::kF32: plan.outtype = wcodec::kGgmlTypeF32; file_type = 0; break;
    case wcodec::DType::kF16: plan.outtype = wcodec::kGgmlTypeF16; file_type = 1; break;
    case wcodec::DType::kBF16: plan.outtype = wcodec::kGgmlTypeBF16; file_type = 32; break;
    default:
      return Status(Code::kNotSupported, f.where + ": weights of dtype " + std::string(wcodec::dtype_name(*wdt)) +
                                             " (the GGUF view presents F32, F16 and BF16 weights)");
  }

  std::set<std::string> out_names;
  bool has_q8 = false, has_tq2 = false;
  for (const Src& s : order) {
    const wcodec::TensorInfo& t = *s.t;
    const std::string& what = shards[s.shard].what;
    if (dropped(t.name) || scales.count(t.name)) continue;
    const auto int8 = scale_of.find(t.name);
    const bool ternary = int8 != scale_of.end() && t.dtype == wcodec::DType::kU8;
    const std::string hf_name = ternary ? t.name.substr(0, t.name.size() - 7) : t.name;
    NameMap nm;
    if (!map_name(hf_name, h.layers, &nm))
      return Status(Code::kNotSupported, what + ": tensor \"" + t.name + "\" has no llama GGUF name");
    if (!out_names.insert(nm.gguf).second)
      return Status::Corruption(what + ": two tensors map to " + nm.gguf);
    if (t.dtype != wcodec::DType::kF32 && t.dtype != wcodec::DType::kF16 && t.dtype != wcodec::DType::kBF16 &&
        int8 == scale_of.end())
      return Status(Code::kNotSupported, what + ": tensor \"" + t.name + "\" has dtype " + wcodec::dtype_name(t.dtype) +
                                             " (the GGUF view presents F32, F16 and BF16 tensors)");
    if (t.shape.size() > wcodec::kGgmlMaxDims || t.shape.empty())
      return Status(Code::kNotSupported, what + ": tensor \"" + t.name + "\" has " + std::to_string(t.shape.size()) +
                                             " dimensions (1..4 supported)");
    HfTensorSource src;
    src.hf_name = hf_name;
    src.shard = s.shard;
    src.src_begin = t.begin;
    src.src_bytes = t.nbytes();
    src.rows = t.shape[0];
    wcodec::GgufTensor gt;
    gt.name = nm.gguf;
    gt.n_dims = static_cast<uint32_t>(t.shape.size());
    std::vector<uint64_t> shape = t.shape;
    if (ternary) {
      // The row length is the model's (ceil(cols/4) bytes cannot tell it).
      const uint64_t cols = ternary_cols(hf_name, h);
      if (cols == 0 || (cols + 3) / 4 != shape[1])
        return Status::Corruption(what + ": tensor \"" + t.name + "\" has " + std::to_string(shape[1]) +
                                  " bytes per row, a row of " + hf_name + " has " + std::to_string(cols) + " weights");
      shape[1] = cols;
      src.cols = cols;
    }
    for (uint32_t d = 0; d < gt.n_dims; ++d) {
      if (shape[d] >= (uint64_t{1} << 62))
        return Status::Corruption(what + ": tensor \"" + t.name + "\" dimension " + std::to_string(d) + " is " +
                                  std::to_string(shape[d]));
      gt.ne[d] = static_cast<int64_t>(shape[gt.n_dims - 1 - d]);
    }
    const bool f32_kept = gt.n_dims <= 1 || ends_with(nm.gguf, "_norm.weight") || !ends_with(nm.gguf, ".weight");
    uint64_t want = src.src_bytes;
    if (ternary) {
      // TQ2_0 where the rows are whole blocks, F32 values otherwise.
      const bool tq2 = src.cols % 256 == 0 && !f32_kept;
      gt.type = tq2 ? wcodec::kGgmlTypeTQ2_0 : wcodec::kGgmlTypeF32;
      src.convert = tq2 ? HfConvert::kTernaryToTq2_0 : HfConvert::kTernaryToF32;
      src.scale_shard = int8->second.shard;
      src.scale_begin = int8->second.t->begin;
      want = tq2 ? shape[0] * (src.cols / 256) * 66 : shape[0] * src.cols * 4;
      has_tq2 = has_tq2 || tq2;
    } else if (int8 != scale_of.end()) {
      // Q8_0 where the rows are whole blocks, F32 values otherwise.
      const bool q8 = t.shape[1] % 32 == 0 && !f32_kept;
      gt.type = q8 ? wcodec::kGgmlTypeQ8_0 : wcodec::kGgmlTypeF32;
      src.convert = q8 ? HfConvert::kI8ToQ8_0 : HfConvert::kI8ToF32;
      src.scale_shard = int8->second.shard;
      src.scale_begin = int8->second.t->begin;
      want = q8 ? t.shape[0] * (t.shape[1] / 32) * 34 : src.src_bytes * 4;
      has_q8 = has_q8 || q8;
    } else if (f32_kept) {
      gt.type = wcodec::kGgmlTypeF32;
      src.convert = t.dtype == wcodec::DType::kBF16  ? HfConvert::kBf16ToF32
                    : t.dtype == wcodec::DType::kF16 ? HfConvert::kF16ToF32
                                                     : HfConvert::kCopy;
    } else {
      gt.type = plan.outtype;
      if (t.dtype != *wdt)
        return Status::Internal(what + ": tensor \"" + t.name + "\" dtype differs from the weights'");
    }
    WCFS_RETURN_IF_ERROR(from_codec(wcodec::ggml_tensor_nbytes(gt.type, gt.ne, gt.n_dims, what + ": " + gt.name,
                                                               &src.out_bytes)));
    if (src.convert == HfConvert::kBf16ToF32 || src.convert == HfConvert::kF16ToF32) want = src.src_bytes * 2;
    if (src.out_bytes != want)
      return Status::Corruption(what + ": tensor \"" + t.name + "\" holds " + std::to_string(src.src_bytes) +
                                " bytes, its GGUF form " + std::to_string(src.out_bytes));
    if (nm.permute) {
      const uint64_t nh = nm.permute == 2 && h.heads != h.kv_heads ? h.kv_heads : h.heads;
      if (src.rows == 0 || src.rows % (nh * 2) != 0 || src.rows >= kMaxDim)
        return Status::Corruption(what + ": tensor \"" + t.name + "\" has " + std::to_string(src.rows) +
                                  " rows, not a multiple of 2 x " + std::to_string(nh) + " heads");
      const uint64_t hd = src.rows / nh, half = hd / 2;
      src.row_order.resize(src.rows);
      for (uint64_t hh = 0; hh < nh; ++hh)
        for (uint64_t i = 0; i < half; ++i)
          for (uint64_t j = 0; j < 2; ++j)
            src.row_order[hh * hd + i * 2 + j] = static_cast<uint32_t>(hh * hd + j * half + i);
    }
    plan.gguf.tensors.push_back(std::move(gt));
    plan.tensors.push_back(std::move(src));
  }
  if (!out_names.count("token_embd.weight"))
    return Status::Corruption(f.where + ": the weights have no model.embed_tokens.weight");
  // llama.cpp requires token_embd's rows to be the vocabulary size (this
  // also bounds the vocabulary arrays by the weights' real size).
  for (size_t i = 0; i < plan.tensors.size(); ++i)
    if (plan.gguf.tensors[i].name == "token_embd.weight" && plan.tensors[i].rows != h.vocab)
      return Status::Corruption(cw + ": \"vocab_size\" is " + std::to_string(h.vocab) +
                                ", model.embed_tokens.weight has " + std::to_string(plan.tensors[i].rows) + " rows");

  // Metadata, in the converter's order.
  auto& kv = plan.gguf.kv;
  using V = wcodec::GgufValue;
  kv.push_back({"general.architecture", V::str("llama")});
  kv.push_back({"general.type", V::str("model")});
  kv.push_back({"general.name", V::str(f.dir_name)});
  kv.push_back({"llama.block_count", V::u32(static_cast<uint32_t>(h.layers))});
  kv.push_back({"llama.context_length", V::u32(static_cast<uint32_t>(h.ctx))});
  kv.push_back({"llama.embedding_length", V::u32(static_cast<uint32_t>(h.hidden))});
  kv.push_back({"llama.feed_forward_length", V::u32(static_cast<uint32_t>(h.ff))});
  kv.push_back({"llama.attention.head_count", V::u32(static_cast<uint32_t>(h.heads))});
  kv.push_back({"llama.attention.head_count_kv", V::u32(static_cast<uint32_t>(h.kv_heads))});
  kv.push_back({"llama.rope.freq_base", V::f32(static_cast<float>(h.rope_theta))});
  kv.push_back({"llama.attention.layer_norm_rms_epsilon", V::f32(static_cast<float>(h.rms_eps))});
  kv.push_back({"llama.attention.key_length", V::u32(static_cast<uint32_t>(h.head_dim))});
  kv.push_back({"llama.attention.value_length", V::u32(static_cast<uint32_t>(h.head_dim))});
  // llama.cpp's file types: 7 mostly Q8_0, 37 mostly TQ2_0.
  kv.push_back({"general.file_type", V::u32(has_q8 ? 7 : has_tq2 ? 37 : file_type)});
  kv.push_back({"llama.vocab_size", V::u32(static_cast<uint32_t>(h.vocab))});
  kv.push_back({"llama.rope.dimension_count", V::u32(static_cast<uint32_t>(h.head_dim))});
  kv.push_back({"general.quantization_version", V::u32(2)});

  // Tokenizer (LlamaModel.set_vocab with a SentencePiece model).
  if (f.tokenizer_config) {
    const std::string tw = f.where + "tokenizer_config.json";
    WCFS_ASSIGN_OR_RETURN(Json tc, parse_json_object<Json>(*f.tokenizer_config, tw));
    if (auto a = tc.find("add_prefix_space"); a != tc.end() && !a->is_null()) {
      if (!a->is_boolean())
        return Status::Corruption(tw + ": \"add_prefix_space\" is " + excerpt(*a) + " (expected a bool)");
      kv.push_back({"tokenizer.ggml.add_space_prefix", V::boolean(a->get<bool>())});
    }
    if (tc.value("tokenizer_class", std::string()) == "HybridDNATokenizer")
      return Status(Code::kNotSupported, tw + ": tokenizer class HybridDNATokenizer is not supported by the GGUF view");
  }
  if (!f.tokenizer_model.empty()) {
    Vocab voc;
    WCFS_RETURN_IF_ERROR(spm_vocab(f, h.vocab, &voc));
    kv.push_back({"tokenizer.ggml.model", V::str("llama")});
    kv.push_back({"tokenizer.ggml.pre", V::str("default")});
    kv.push_back({"tokenizer.ggml.tokens", V::str_array(voc.tokens)});
    kv.push_back({"tokenizer.ggml.scores", V::f32_array(voc.scores)});
    kv.push_back({"tokenizer.ggml.token_type", V::i32_array(voc.types)});
    WCFS_RETURN_IF_ERROR(special_vocab(f, cfg, h.vocab, /*bpe=*/false, &kv));
  } else {
    // No tokenizer.model: _set_vocab_gpt2 over tokenizer.json.
    if (!f.tokenizer_json)
      return Status(Code::kNotSupported, f.where + "tokenizer.model: missing, and no tokenizer.json either");
    BpeVocab voc;
    WCFS_RETURN_IF_ERROR(bpe_vocab(f, h.vocab, &voc));
    kv.push_back({"tokenizer.ggml.model", V::str("gpt2")});
    kv.push_back({"tokenizer.ggml.pre", V::str(voc.pre)});
    kv.push_back({"tokenizer.ggml.tokens", V::str_array(voc.tokens)});
    kv.push_back({"tokenizer.ggml.token_type", V::i32_array(voc.types)});
    if (!voc.merges.empty()) kv.push_back({"tokenizer.ggml.merges", V::str_array(voc.merges)});
    WCFS_RETURN_IF_ERROR(special_vocab(f, cfg, h.vocab, /*bpe=*/true, &kv));
  }
  // The converter's Granite special case (LlamaModel.set_vocab): a
  // vocabulary of 49152 sets add_bos_token false, in place when the key is
  // already written, else last.
  if (h.vocab == 49152) {
    auto it = std::find_if(kv.begin(), kv.end(), [](const wcodec::GgufKv& p) {
      return p.key == "tokenizer.ggml.add_bos_token";
    });
    if (it != kv.end()) it->value = V::boolean(false);
    else kv.push_back({"tokenizer.ggml.add_bos_token", V::boolean(false)});
  }

  auto header = wcodec::write_gguf_header(plan.gguf);
  if (!header.ok()) return Status(Code::kCorruption, f.where + ": " + header.status().message());
  plan.header = std::move(header).value();
  // Offsets as the writer lays them out (write_gguf_header recomputes them).
  uint64_t off = 0;
  for (auto& t : plan.gguf.tensors) {
    t.offset = off;
    WCFS_RETURN_IF_ERROR(from_codec(wcodec::ggml_tensor_nbytes(t.type, t.ne, t.n_dims, t.name, &t.nbytes)));
    off += (t.nbytes + plan.gguf.alignment - 1) / plan.gguf.alignment * plan.gguf.alignment;
  }
  plan.gguf.data_offset = plan.header.size();
  plan.gguf.data_size = off;
  return plan;
}

}  // namespace wcodecfs
