// fs/src/hf_json_i.h — internal to the GGUF view's planner (hf_gguf.cpp,
// hf_gguf_bpe.cpp): a Hugging Face JSON file parsed as an object, and a
// JSON value as error messages show it.
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>

#include "wcodecfs/fs_status.h"

namespace wcodecfs {

// text as a JSON object of J (nlohmann::json or nlohmann::ordered_json), or
// Corruption naming `what`: not JSON, or not an object at the top level.
template <class J>
Result<J> parse_json_object(std::string_view text, const std::string& what) {
  J j = J::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Status::Corruption(what + ": not valid JSON");
  if (!j.is_object()) return Status::Corruption(what + ": the top level is not a JSON object");
  return j;
}

// v as compact JSON (invalid UTF-8 replaced), at most 80 characters.
template <class J>
std::string excerpt(const J& v) {
  std::string s = v.dump(-1, ' ', false, J::error_handler_t::replace);
  if (s.size() > 80) s = s.substr(0, 77) + "...";
  return s;
}

}  // namespace wcodecfs
