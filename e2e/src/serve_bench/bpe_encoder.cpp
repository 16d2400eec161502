// Byte-level BPE encoding from a tokenizer.json: added tokens, pre-tokenizers (Oniguruma regexes),
// byte-level characters, merges by rank, the post-processor's special tokens.
#include "serve_bench/bpe_encoder.hpp"

#include <oniguruma.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>
#include <mutex>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "serve_bench/bpe_decoder.hpp"

namespace dsv4::eval::serve {

using json = nlohmann::json;

struct BpeEncoder::Regex {
  regex_t* re = nullptr;
  ~Regex() {
    if (re) onig_free(re);
  }
};

namespace {

// GPT-2's pattern, what ByteLevel's use_regex splits with.
constexpr const char* kGpt2 =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

std::shared_ptr<BpeEncoder::Regex> compile(const std::string& pattern, const std::string& where) {
  static std::once_flag once;
  std::call_once(once, [] {
    OnigEncoding enc[] = {ONIG_ENCODING_UTF8};
    onig_initialize(enc, 1);
  });
  auto r = std::make_shared<BpeEncoder::Regex>();
  OnigErrorInfo info;
  const auto* p = reinterpret_cast<const OnigUChar*>(pattern.data());
  const int rc = onig_new(&r->re, p, p + pattern.size(), ONIG_OPTION_NONE, ONIG_ENCODING_UTF8,
                          ONIG_SYNTAX_DEFAULT, &info);
  if (rc != ONIG_NORMAL) {
    OnigUChar msg[ONIG_MAX_ERROR_MESSAGE_LEN];
    onig_error_code_to_str(msg, rc, &info);
    r->re = nullptr;
    throw std::invalid_argument(where + ": pattern " + json(pattern).dump() +
                                " does not compile: " + reinterpret_cast<char*>(msg));
  }
  return r;
}

// Byte ranges of every match of `re` in `s` (an empty match moves on by one character).
std::vector<std::pair<size_t, size_t>> matches(const BpeEncoder::Regex& re, const std::string& s) {
  std::vector<std::pair<size_t, size_t>> out;
  OnigRegion* region = onig_region_new();
  const auto* b = reinterpret_cast<const OnigUChar*>(s.data());
  const OnigUChar* e = b + s.size();
  size_t at = 0;
  while (at <= s.size()) {
    const int r = onig_search(re.re, b, e, b + at, e, region, ONIG_OPTION_NONE);
    if (r < 0) break;
    const size_t mb = size_t(region->beg[0]), me = size_t(region->end[0]);
    if (me > mb) out.emplace_back(mb, me);
    if (me > at) {
      at = me;
    } else {  // empty match: step over one character
      at = mb + 1;
      while (at < s.size() && (static_cast<unsigned char>(s[at]) & 0xC0) == 0x80) ++at;
    }
  }
  onig_region_free(region, 1);
  return out;
}

std::vector<std::pair<size_t, size_t>> literal_matches(const std::string& lit,
                                                       const std::string& s) {
  std::vector<std::pair<size_t, size_t>> out;
  if (lit.empty()) return out;
  for (size_t p = s.find(lit); p != std::string::npos; p = s.find(lit, p + lit.size()))
    out.emplace_back(p, p + lit.size());
  return out;
}

// Splits `s` at the matches: Isolated keeps matches and the text between them, Removed only the
// text between (with invert, the roles of matches and text between swap).
void split_piece(const std::string& s, const std::vector<std::pair<size_t, size_t>>& m,
                 bool removed, bool invert, std::vector<std::string>& out) {
  size_t at = 0;
  auto keep = [&](size_t b, size_t e, bool is_match) {
    if (e <= b) return;
    if (removed && (is_match != invert)) return;
    out.push_back(s.substr(b, e - b));
  };
  for (const auto& [b, e] : m) {
    keep(at, b, false);
    keep(b, e, true);
    at = e;
  }
  keep(at, s.size(), false);
}

std::string byte_level(const std::string& s) {
  std::string out;
  for (unsigned char b : s) {
    const char32_t c = byte_level_char(b);
    if (c < 0x80) {
      out += char(c);
    } else {  // every byte-level character is below U+0800
      out += char(0xC0 | (c >> 6));
      out += char(0x80 | (c & 0x3F));
    }
  }
  return out;
}

std::vector<std::string> chars(const std::string& s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    size_t e = i + 1;
    while (e < s.size() && (static_cast<unsigned char>(s[e]) & 0xC0) == 0x80) ++e;
    out.push_back(s.substr(i, e - i));
    i = e;
  }
  return out;
}

void read_steps(const json& pt, const std::string& where, std::vector<BpeEncoder::Step>& out) {
  if (!pt.is_object() || !pt.contains("type") || !pt["type"].is_string())
    throw std::invalid_argument(where + ": pre_tokenizer has no string 'type'");
  const std::string type = pt["type"].get<std::string>();
  BpeEncoder::Step st;
  if (type == "Sequence") {
    if (!pt.contains("pretokenizers") || !pt["pretokenizers"].is_array())
      throw std::invalid_argument(where + ": pre_tokenizer Sequence has no 'pretokenizers'");
    for (const auto& p : pt["pretokenizers"]) read_steps(p, where, out);
    return;
  }
  if (type == "ByteLevel") {
    st.kind = BpeEncoder::Step::kByteLevel;
    st.add_prefix_space = pt.value("add_prefix_space", false);
    if (pt.value("use_regex", true)) st.re = compile(kGpt2, where);
    out.push_back(st);
    return;
  }
  if (type != "Split")
    throw std::invalid_argument(where + ": pre_tokenizer type '" + type +
                                "' is not supported (ByteLevel, Split, Sequence)");
  const json& pat = pt.value("pattern", json());
  if (pat.is_object() && pat.contains("Regex") && pat["Regex"].is_string())
    st.re = compile(pat["Regex"].get<std::string>(), where);
  else if (pat.is_object() && pat.contains("String") && pat["String"].is_string())
    st.literal = pat["String"].get<std::string>();
  else
    throw std::invalid_argument(where + ": Split pre_tokenizer pattern " + pat.dump() +
                                " is neither {\"Regex\": ...} nor {\"String\": ...}");
  const std::string behavior = pt.value("behavior", "");
  if (behavior != "Isolated" && behavior != "Removed")
    throw std::invalid_argument(where + ": Split behavior '" + behavior +
                                "' is not supported (Isolated, Removed)");
  st.removed = behavior == "Removed";
  st.invert = pt.value("invert", false);
  out.push_back(st);
}

// The ids a post_processor puts before and after a single sequence.
void read_post(const json& pp, const std::string& where, std::vector<int32_t>& before,
               std::vector<int32_t>& after) {
  if (pp.is_null()) return;
  const std::string type = pp.is_object() ? pp.value("type", "") : "";
  if (type == "ByteLevel") return;
  if (type == "Sequence") {
    for (const auto& p : pp.value("processors", json::array())) read_post(p, where, before, after);
    return;
  }
  if (type == "RobertaProcessing" || type == "BertProcessing") {
    const json& cls = pp.value("cls", json());
    const json& sep = pp.value("sep", json());
    if (!cls.is_array() || cls.size() != 2 || !sep.is_array() || sep.size() != 2)
      throw std::invalid_argument(where + ": post_processor " + type + " lacks cls or sep");
    before.push_back(cls[1].get<int32_t>());
    after.push_back(sep[1].get<int32_t>());
    return;
  }
  if (type != "TemplateProcessing")
    throw std::invalid_argument(where + ": post_processor type '" + type + "' is not supported");
  bool seen_a = false;
  for (const auto& piece : pp.value("single", json::array())) {
    if (piece.contains("Sequence")) {
      seen_a = true;
      continue;
    }
    const std::string id =
        piece.contains("SpecialToken") ? piece["SpecialToken"].value("id", "") : std::string();
    const json& sp = pp.value("special_tokens", json::object());
    if (id.empty() || !sp.contains(id) || !sp[id].contains("ids") || !sp[id]["ids"].is_array())
      throw std::invalid_argument(where + ": post_processor template names special token '" + id +
                                  "' without its ids in special_tokens");
    for (const auto& x : sp[id]["ids"]) (seen_a ? after : before).push_back(x.get<int32_t>());
  }
}

}  // namespace

BpeEncoder BpeEncoder::load(const std::string& path) {
  namespace fs = std::filesystem;
  BpeEncoder e;
  e.path_ = fs::is_directory(path) ? (fs::path(path) / "tokenizer.json").string() : path;
  const std::string where = "--tokenizer '" + path + "' (" + e.path_ + ")";
  std::ifstream f(e.path_, std::ios::binary);
  if (!f) throw std::invalid_argument(where + ": cannot open");
  const json j = json::parse(f, nullptr, false);
  if (j.is_discarded() || !j.is_object()) throw std::invalid_argument(where + ": not JSON");
  const json& model = j.value("model", json());
  if (!model.is_object() || model.value("type", "BPE") != "BPE" || !model.contains("vocab") ||
      !model["vocab"].is_object())
    throw std::invalid_argument(where + ": model is not BPE with a vocab object");
  for (const char* k : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (model.contains(k) && !model[k].is_null() && model[k] != "")
      throw std::invalid_argument(where + ": model." + k + " is not supported");
  const json& norm = j.value("normalizer", json());
  if (!norm.is_null() &&
      !(norm.value("type", "") == "Sequence" && norm.value("normalizers", json::array()).empty()))
    throw std::invalid_argument(where + ": normalizer " + norm.value("type", std::string("?")) +
                                " is not supported (byte-level tokenizers have none)");
  for (const auto& [tok, id] : model["vocab"].items()) e.vocab_[tok] = id.get<int32_t>();
  size_t rank = 0;
  for (const auto& m : model.value("merges", json::array())) {
    std::string a, b;
    if (m.is_string()) {  // "a b"
      const std::string s = m.get<std::string>();
      const size_t sp = s.find(' ');
      if (sp == std::string::npos)
        throw std::invalid_argument(where + ": merge '" + s + "' is not two tokens");
      a = s.substr(0, sp), b = s.substr(sp + 1);
    } else if (m.is_array() && m.size() == 2) {  // ["a", "b"]
      a = m[0].get<std::string>(), b = m[1].get<std::string>();
    } else {
      throw std::invalid_argument(where + ": merge " + m.dump() + " is not two tokens");
    }
    e.ranks_.emplace(a + '\x01' + b, rank++);
  }
  e.ignore_merges_ = model.value("ignore_merges", false);
  for (const auto& t : j.value("added_tokens", json::array()))
    e.added_.emplace_back(t.value("content", ""), t.value("id", 0));
  // Leftmost-longest: at one position the longest content wins.
  std::sort(e.added_.begin(), e.added_.end(),
            [](const auto& x, const auto& y) { return x.first.size() > y.first.size(); });
  const json& pt = j.value("pre_tokenizer", json());
  if (!pt.is_null()) read_steps(pt, where, e.steps_);
  if (std::none_of(e.steps_.begin(), e.steps_.end(),
                   [](const Step& st) { return st.kind == Step::kByteLevel; }))
    throw std::invalid_argument(where + ": no ByteLevel pre_tokenizer (not a byte-level BPE)");
  read_post(j.value("post_processor", json()), where, e.before_, e.after_);
  return e;
}

std::vector<std::string> BpeEncoder::pre_tokenize(const std::string& text) const {
  std::vector<std::string> pieces = {text};
  for (const Step& st : steps_) {
    std::vector<std::string> next;
    for (std::string& p : pieces) {
      if (st.kind == Step::kByteLevel) {
        if (st.add_prefix_space && (p.empty() || p[0] != ' ')) p = " " + p;
        if (st.re)
          split_piece(p, matches(*st.re, p), false, false, next);
        else
          next.push_back(p);
      } else {
        split_piece(p, st.re ? matches(*st.re, p) : literal_matches(st.literal, p), st.removed,
                    st.invert, next);
      }
    }
    pieces = std::move(next);
  }
  for (auto& p : pieces) p = byte_level(p);
  return pieces;
}

void BpeEncoder::model_ids(const std::string& piece, std::vector<int32_t>& out) const {
  if (ignore_merges_)
    if (auto it = vocab_.find(piece); it != vocab_.end()) {
      out.push_back(it->second);
      return;
    }
  std::vector<std::string> sym = chars(piece);
  while (sym.size() > 1) {
    size_t best = std::numeric_limits<size_t>::max(), at = 0;
    for (size_t i = 0; i + 1 < sym.size(); ++i) {
      auto it = ranks_.find(sym[i] + '\x01' + sym[i + 1]);
      if (it != ranks_.end() && it->second < best) best = it->second, at = i;
    }
    if (best == std::numeric_limits<size_t>::max()) break;
    sym[at] += sym[at + 1];
    sym.erase(sym.begin() + long(at) + 1);
  }
  for (const auto& s : sym) {
    auto it = vocab_.find(s);
    if (it == vocab_.end())
      throw std::runtime_error("--tokenizer " + path_ + ": symbol " + json(s).dump() +
                               " is not in model.vocab");
    out.push_back(it->second);
  }
}

std::vector<int32_t> BpeEncoder::encode(const std::string& text, bool add_special) const {
  std::vector<int32_t> out;
  if (add_special) out = before_;
  auto encode_plain = [&](const std::string& s) {
    if (s.empty()) return;
    for (const auto& piece : pre_tokenize(s)) model_ids(piece, out);
  };
  size_t at = 0, plain = 0;
  while (at < text.size()) {
    bool hit = false;
    for (const auto& [content, id] : added_) {
      if (!content.empty() && text.compare(at, content.size(), content) == 0) {
        encode_plain(text.substr(plain, at - plain));
        out.push_back(id);
        at += content.size();
        plain = at;
        hit = true;
        break;
      }
    }
    if (!hit) ++at;
  }
  encode_plain(text.substr(plain));
  if (add_special) out.insert(out.end(), after_.begin(), after_.end());
  return out;
}

}  // namespace dsv4::eval::serve
