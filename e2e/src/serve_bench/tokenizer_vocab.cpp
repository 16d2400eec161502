// tokenizer.json -> vocabulary size, as transformers' PreTrainedTokenizerFast.vocab_size
// (tokenizers' get_vocab_size(with_added_tokens=False): the model's own vocabulary).
#include "serve_bench/tokenizer_vocab.hpp"

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

namespace dsv4::eval::serve {

TokenizerVocab read_tokenizer_vocab(const std::string& path) {
  namespace fs = std::filesystem;
  TokenizerVocab out;
  out.path = fs::is_directory(path) ? (fs::path(path) / "tokenizer.json").string() : path;
  std::ifstream f(out.path, std::ios::binary);
  if (!f) throw std::invalid_argument("--tokenizer '" + path + "': cannot open " + out.path);
  const nlohmann::json j = nlohmann::json::parse(f, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    throw std::invalid_argument("--tokenizer '" + path + "': " + out.path + " is not JSON");
  if (!j.contains("model") || !j["model"].is_object() || !j["model"].contains("vocab") ||
      !(j["model"]["vocab"].is_object() || j["model"]["vocab"].is_array()) ||
      j["model"]["vocab"].empty())
    throw std::invalid_argument("--tokenizer '" + path + "': " + out.path +
                                " has no model.vocab (not a Hugging Face tokenizer.json)");
  out.vocab_size = int64_t(j["model"]["vocab"].size());
  if (j.contains("added_tokens") && j["added_tokens"].is_array())
    out.added_tokens = int64_t(j["added_tokens"].size());
  return out;
}

}  // namespace dsv4::eval::serve
