// A Hugging Face byte-level BPE tokenizer.json read for encoding, as bench_serving encodes the
// ShareGPT text of its `random` dataset with the user's tokenizer (transformers' encode, special
// tokens added): no server endpoint is needed.
//
// The pipeline of the tokenizers library, for what byte-level tokenizers (GPT-2, Llama-3,
// DeepSeek-V3) use: the added tokens are cut out of the text first (leftmost-longest) and become
// their ids; the normalizer must be absent (or an empty Sequence); the pre_tokenizer is ByteLevel
// (GPT-2's pattern when use_regex, a space prefixed when add_prefix_space), Split (a Regex or
// String pattern; Isolated or Removed pieces, invert) or a Sequence of them, regexes run by
// Oniguruma as the library runs them; each piece's bytes become byte-level characters and the
// model's merges join them, lowest rank first (leftmost among equals; a whole piece in the
// vocabulary is one token with ignore_merges); the post_processor adds its special tokens
// (TemplateProcessing's single template, Roberta/Bert's cls and sep, ByteLevel none). Anything
// else is refused naming the field.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace dsv4::eval::serve {

class BpeEncoder {
 public:
  // `path`: a tokenizer.json or a folder holding one. Throws std::invalid_argument naming the
  // path and the field that is missing or not supported.
  static BpeEncoder load(const std::string& path);

  // transformers' encode(text, add_special_tokens=add_special).
  std::vector<int32_t> encode(const std::string& text, bool add_special = true) const;

  struct Regex;  // an Oniguruma pattern
  struct Step {  // one pre-tokenizer
    enum Kind { kSplit, kByteLevel } kind = kSplit;
    std::shared_ptr<Regex> re;  // Split: Regex pattern; ByteLevel with use_regex: GPT-2's
    std::string literal;        // Split: String pattern
    bool removed = false;       // Split: Removed (else Isolated)
    bool invert = false;
    bool add_prefix_space = false;  // ByteLevel
  };

 private:
  void model_ids(const std::string& piece, std::vector<int32_t>& out) const;
  std::vector<std::string> pre_tokenize(const std::string& text) const;

  std::string path_;
  std::vector<Step> steps_;
  std::unordered_map<std::string, int32_t> vocab_;
  std::unordered_map<std::string, size_t> ranks_;  // "a\x01b" -> merge rank
  bool ignore_merges_ = false;
  std::vector<std::pair<std::string, int32_t>> added_;  // content, id
  std::vector<int32_t> before_, after_;                 // special ids around the sequence
};

}  // namespace dsv4::eval::serve
