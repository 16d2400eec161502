// Byte-level BPE decoding from a tokenizer.json (vocabulary, added tokens, byte decoder).
#include "serve_bench/bpe_decoder.hpp"

#include <array>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

namespace dsv4::eval::serve {

using json = nlohmann::json;

namespace {

// Printable Latin-1 bytes stand for themselves; the other 68 bytes for 256, 257, ... in order.
const std::array<char32_t, 256>& byte_chars() {
  static const std::array<char32_t, 256> t = [] {
    std::array<char32_t, 256> a{};
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool self = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
      a[size_t(b)] = self ? char32_t(b) : next++;
    }
    return a;
  }();
  return t;
}

const std::unordered_map<char32_t, uint8_t>& char_bytes() {
  static const std::unordered_map<char32_t, uint8_t> m = [] {
    std::unordered_map<char32_t, uint8_t> out;
    for (int b = 0; b < 256; ++b) out[byte_chars()[size_t(b)]] = uint8_t(b);
    return out;
  }();
  return m;
}

// The code points of valid UTF-8 text (tokenizer.json is JSON, so its strings are valid).
std::vector<char32_t> code_points(const std::string& s) {
  std::vector<char32_t> out;
  for (size_t i = 0; i < s.size();) {
    const auto b = static_cast<unsigned char>(s[i]);
    const int n = b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
    char32_t c = n == 1 ? b : n == 2 ? (b & 0x1F) : n == 3 ? (b & 0x0F) : (b & 0x07);
    for (int k = 1; k < n && i + size_t(k) < s.size(); ++k)
      c = (c << 6) | (static_cast<unsigned char>(s[i + size_t(k)]) & 0x3F);
    out.push_back(c);
    i += size_t(n);
  }
  return out;
}

// A token's bytes through the byte decoder; a token with a character outside it keeps its own.
void token_bytes(const std::string& token, std::string& out) {
  std::string bytes;
  for (char32_t c : code_points(token)) {
    auto it = char_bytes().find(c);
    if (it == char_bytes().end()) {
      out += token;
      return;
    }
    bytes.push_back(char(it->second));
  }
  out += bytes;
}

// Special tokens a post_processor adds to a single sequence (num_special_tokens_to_add(False)).
int64_t added_by(const json& pp, const std::string& where) {
  if (pp.is_null()) return 0;
  if (!pp.is_object() || !pp.contains("type") || !pp["type"].is_string())
    throw std::invalid_argument(where + ": post_processor has no string 'type'");
  const std::string type = pp["type"].get<std::string>();
  if (type == "ByteLevel") return 0;
  if (type == "RobertaProcessing" || type == "BertProcessing") return 2;
  if (type == "TemplateProcessing") {
    if (!pp.contains("single") || !pp["single"].is_array())
      throw std::invalid_argument(where + ": post_processor TemplateProcessing has no 'single'");
    int64_t n = 0;
    for (const auto& piece : pp["single"])
      if (piece.is_object() && piece.contains("SpecialToken")) ++n;
    return n;
  }
  if (type == "Sequence") {
    if (!pp.contains("processors") || !pp["processors"].is_array())
      throw std::invalid_argument(where + ": post_processor Sequence has no 'processors'");
    int64_t n = 0;
    for (const auto& p : pp["processors"]) n += added_by(p, where);
    return n;
  }
  throw std::invalid_argument(where + ": post_processor type '" + type + "' is not supported");
}

bool byte_level_decoder(const json& d) {
  if (!d.is_object() || !d.contains("type") || !d["type"].is_string()) return false;
  const std::string type = d["type"].get<std::string>();
  if (type == "ByteLevel") return true;
  if (type != "Sequence" || !d.contains("decoders") || !d["decoders"].is_array()) return false;
  bool any = false;
  for (const auto& x : d["decoders"]) {
    if (!byte_level_decoder(x)) return false;
    any = true;
  }
  return any;
}

}  // namespace

char32_t byte_level_char(uint8_t b) { return byte_chars()[b]; }

std::string utf8_lossy(std::string_view s) {
  static const char kReplacement[] = "\xEF\xBF\xBD";
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const auto b = static_cast<unsigned char>(s[i]);
    if (b < 0x80) {
      out.push_back(char(b));
      ++i;
      continue;
    }
    int len = 0;
    unsigned char lo = 0x80, hi = 0xBF;  // the second byte's range
    if (b >= 0xC2 && b <= 0xDF) {
      len = 2;
    } else if (b >= 0xE0 && b <= 0xEF) {
      len = 3;
      if (b == 0xE0) lo = 0xA0;
      if (b == 0xED) hi = 0x9F;
    } else if (b >= 0xF0 && b <= 0xF4) {
      len = 4;
      if (b == 0xF0) lo = 0x90;
      if (b == 0xF4) hi = 0x8F;
    }
    if (len == 0) {  // a continuation byte or a byte that never starts a character
      out += kReplacement;
      ++i;
      continue;
    }
    size_t k = 1;
    for (; k < size_t(len) && i + k < s.size(); ++k) {
      const auto c = static_cast<unsigned char>(s[i + k]);
      const unsigned char l = k == 1 ? lo : 0x80, h = k == 1 ? hi : 0xBF;
      if (c < l || c > h) break;
    }
    if (k == size_t(len)) {
      out.append(s.substr(i, k));
    } else {
      out += kReplacement;  // the maximal valid prefix of a character, replaced once
    }
    i += k;
  }
  return out;
}

BpeDecoder BpeDecoder::load(const std::string& path) {
  namespace fs = std::filesystem;
  BpeDecoder d;
  d.path_ = fs::is_directory(path) ? (fs::path(path) / "tokenizer.json").string() : path;
  const std::string where = "--tokenizer '" + path + "' (" + d.path_ + ")";
  std::ifstream f(d.path_, std::ios::binary);
  if (!f) throw std::invalid_argument(where + ": cannot open");
  const json j = json::parse(f, nullptr, false);
  if (j.is_discarded() || !j.is_object()) throw std::invalid_argument(where + ": not JSON");
  if (!j.contains("model") || !j["model"].is_object() || !j["model"].contains("vocab") ||
      !j["model"]["vocab"].is_object() || j["model"]["vocab"].empty())
    throw std::invalid_argument(where +
                                ": no model.vocab object (not a byte-level BPE tokenizer.json)");
  if (!j.contains("decoder") || !byte_level_decoder(j["decoder"]))
    throw std::invalid_argument(
        where + ": decoder " +
        (j.contains("decoder") && j["decoder"].is_object() && j["decoder"].contains("type")
             ? "type " + j["decoder"]["type"].dump()
             : std::string("missing")) +
        " is not ByteLevel: only byte-level BPE tokenizers decode here; leave --tokenizer out "
        "(give --vocab-size) to decode through the server's /v1/detokenize");
  for (const auto& [token, id] : j["model"]["vocab"].items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0)
      throw std::invalid_argument(where + ": model.vocab['" + token + "'] is " + id.dump() +
                                  ", not a token id");
    d.tokens_[id.get<int64_t>()] = token;
  }
  d.vocab_size_ = int64_t(j["model"]["vocab"].size());
  if (j.contains("added_tokens") && j["added_tokens"].is_array()) {
    for (const auto& t : j["added_tokens"]) {
      if (!t.is_object() || !t.contains("id") || !t["id"].is_number_integer() ||
          !t.contains("content") || !t["content"].is_string())
        throw std::invalid_argument(where +
                                    ": an added_tokens entry lacks an integer 'id' or a "
                                    "string 'content': " +
                                    t.dump());
      const int64_t id = t["id"].get<int64_t>();
      d.tokens_[id] = t["content"].get<std::string>();
      if (t.value("special", false)) d.special_.insert(id);
    }
  }
  d.special_tokens_ = added_by(j.value("post_processor", json()), where);
  return d;
}

std::string BpeDecoder::decode(const std::vector<int32_t>& ids, bool skip_special) const {
  std::string bytes;
  for (int32_t id : ids) {
    auto it = tokens_.find(id);
    if (it == tokens_.end()) continue;  // tokenizers drops ids it has no token for
    if (skip_special && special_.count(id)) continue;
    token_bytes(it->second, bytes);
  }
  return utf8_lossy(bytes);
}

}  // namespace dsv4::eval::serve
