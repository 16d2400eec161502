// A Hugging Face byte-level BPE tokenizer.json read for decoding, as bench_serving decodes its
// random prompts with the user's tokenizer (transformers' decode, special tokens kept): no server
// endpoint is needed.
//
// What is read: model.vocab (token -> id; the id to token table), added_tokens (id, content,
// special), the decoder (ByteLevel, alone or in a Sequence: anything else is refused, naming it)
// and the post_processor (how many special tokens encoding adds: transformers'
// num_special_tokens_to_add()). Decoding follows the tokenizers library: each id becomes its
// added token's content or its vocabulary token (an id in neither is dropped), the tokens'
// characters go back through the byte decoder (GPT-2's bytes_to_unicode table; a token holding a
// character outside it keeps its own UTF-8 bytes) and the bytes become text as Rust's
// String::from_utf8_lossy does: each maximal invalid subsequence (a split character) is one
// U+FFFD.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace dsv4::eval::serve {

class BpeDecoder {
 public:
  // `path`: a tokenizer.json or a folder holding one. Throws std::invalid_argument naming the path
  // and the field that is missing or not supported.
  static BpeDecoder load(const std::string& path);

  // transformers' decode(ids, skip_special_tokens=skip_special).
  std::string decode(const std::vector<int32_t>& ids, bool skip_special = false) const;
  int64_t vocab_size() const { return vocab_size_; }          // model.vocab entries
  int64_t special_tokens() const { return special_tokens_; }  // num_special_tokens_to_add()
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int64_t vocab_size_ = 0, special_tokens_ = 0;
  std::unordered_map<int64_t, std::string> tokens_;  // vocabulary and added tokens
  std::unordered_set<int64_t> special_;
};

// Bytes -> text as Rust's String::from_utf8_lossy: valid UTF-8 kept, each maximal subpart of an
// invalid sequence replaced by U+FFFD.
std::string utf8_lossy(std::string_view bytes);

// GPT-2's bytes_to_unicode: the character byte b stands for in a byte-level token.
char32_t byte_level_char(uint8_t b);

}  // namespace dsv4::eval::serve
