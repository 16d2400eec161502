// The vocabulary size of a Hugging Face tokenizer, read from its tokenizer.json (the number the
// random-ids dataset draws token ids below).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace dsv4::eval::serve {

struct TokenizerVocab {
  int64_t vocab_size = 0;    // model.vocab entries: transformers' tokenizer.vocab_size
  int64_t added_tokens = 0;  // added_tokens entries (special tokens), not counted above
  std::string path;          // the tokenizer.json read
};

// `path` is a tokenizer.json or a model folder holding one. Throws std::invalid_argument naming
// the path and what is wrong (missing file, not JSON, no model.vocab).
TokenizerVocab read_tokenizer_vocab(const std::string& path);

}  // namespace dsv4::eval::serve
