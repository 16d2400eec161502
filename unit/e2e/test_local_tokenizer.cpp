// Prompts from the user's byte-level BPE tokenizer.json, decoded and encoded here as the tokenizers
// library does (id table, added tokens, byte decoder, merges by rank), so serve-bench needs no
// tokenizer endpoint of the server; the seed's serve-bench line against a server without them.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include <cmath>

#include "gsm8k_runner_util.hpp"
#include "http/process_setup.hpp"
#include "report/report_runs.hpp"
#include "report/report_table.hpp"
#include "serve_bench/bpe_decoder.hpp"
#include "serve_bench/bpe_encoder.hpp"
#include "serve_bench/serve_bench_metrics.hpp"
#include "serve_bench/serve_bench_run.hpp"
#include "serve_bench/serve_bench_workload.hpp"

namespace dsv4::e2e_test {
namespace {

using json = nlohmann::json;
using test_server::TestServer;
using test_server::TestServerConfig;

double metric(const json& rep, const char* k) { return rep["metrics"][k].get<double>(); }

// The UTF-8 of code point c (a test's own encoder: the expectations below are written with it).
std::string utf8(char32_t c) {
  std::string s;
  if (c < 0x80) {
    s += char(c);
  } else if (c < 0x800) {
    s += char(0xC0 | (c >> 6));
    s += char(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    s += char(0xE0 | (c >> 12));
    s += char(0x80 | ((c >> 6) & 0x3F));
    s += char(0x80 | (c & 0x3F));
  } else {
    s += char(0xF0 | (c >> 18));
    s += char(0x80 | ((c >> 12) & 0x3F));
    s += char(0x80 | ((c >> 6) & 0x3F));
    s += char(0x80 | (c & 0x3F));
  }
  return s;
}

// A byte-level token: the characters standing for `bytes` (GPT-2's table).
std::string bl(const std::string& bytes) {
  std::string t;
  for (unsigned char b : bytes) t += utf8(eval::serve::byte_level_char(b));
  return t;
}

// The project's small byte-level BPE tokenizer.json: every byte a token (ids 0..255), a few
// merged tokens, a BOS added token and a template adding it.
json small_tokenizer() {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[bl(std::string(1, char(b)))] = b;
  vocab[bl(" the")] = 256;
  vocab[bl("\xE2\x82")] = 257;          // the first two bytes of the euro sign
  vocab[bl("\xAC")] = 172;              // (its last byte is a byte token already)
  vocab[bl("caf\xC3\xA9")] = 258;       // "café"
  vocab[bl("\xF0\x9F\x8D\x8E")] = 259;  // U+1F34E, a 4-byte character in one token
  return {{"version", "1.0"},
          {"added_tokens", json::array({{{"id", 300}, {"content", "<|bos|>"}, {"special", true}},
                                        {{"id", 301}, {"content", "<tool>"}, {"special", false}}})},
          {"normalizer", nullptr},
          {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}}},
          {"post_processor",
           {{"type", "TemplateProcessing"},
            {"single", json::array({{{"SpecialToken", {{"id", "<|bos|>"}, {"type_id", 0}}}},
                                    {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})}}},
          {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", true}}},
          {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", json::array()}}}};
}

TEST(LocalTokenizer, Utf8LossyAsRust) {
  using eval::serve::utf8_lossy;
  const std::string r = "\xEF\xBF\xBD";
  EXPECT_EQ(utf8_lossy("caf\xC3\xA9"), "caf\xC3\xA9");
  EXPECT_EQ(utf8_lossy("\xE2\x82"), r);         // a cut 3-byte character: one replacement
  EXPECT_EQ(utf8_lossy("\xE2\x82x"), r + "x");  // ... followed by ASCII
  EXPECT_EQ(utf8_lossy("\xAC"), r);             // a lone continuation byte
  EXPECT_EQ(utf8_lossy("\xF0\x9F\x8Dz"), r + "z");
  EXPECT_EQ(utf8_lossy("\xE0\x80\x80"), r + r + r);  // overlong: E0 needs A0..BF next
  EXPECT_EQ(utf8_lossy("\xED\xA0\x80"), r + r + r);  // a surrogate
  EXPECT_EQ(utf8_lossy("\xC0\xAF"), r + r);
  EXPECT_EQ(utf8_lossy("\xF4\x90\x80\x80"), r + r + r + r);  // above U+10FFFF
}

TEST(LocalTokenizer, DecodesByteLevelBpe) {
  TempDir d;
  write_text(d.str("tokenizer.json"), small_tokenizer().dump());
  const auto dec = eval::serve::BpeDecoder::load(d.str(""));  // a folder holding one
  EXPECT_EQ(dec.vocab_size(), 260);
  EXPECT_EQ(dec.special_tokens(), 1);  // the template's <|bos|>
  EXPECT_EQ(dec.decode({'H', 'i', 256, ' ', 258}), "Hi the caf\xC3\xA9");
  EXPECT_EQ(dec.decode({300, 'a', 301}), "<|bos|>a<tool>");  // special tokens kept by default
  EXPECT_EQ(dec.decode({300, 'a'}, true), "a");
  EXPECT_EQ(dec.decode({257, 172}), "\xE2\x82\xAC");              // the euro sign from two tokens
  EXPECT_EQ(dec.decode({257, 'x'}), "\xEF\xBF\xBDx");             // its first two bytes alone
  EXPECT_EQ(dec.decode({259, 999, 10}), "\xF0\x9F\x8D\x8E\n");    // id 999 has no token: dropped
  EXPECT_EQ(eval::serve::byte_level_char(' '), char32_t(0x120));  // GPT-2's "\u0120" for a space
  EXPECT_EQ(dec.decode({32, 10, 9}), " \n\t");
  // Not byte-level: refused, naming the decoder type and the way out.
  json sp = small_tokenizer();
  sp["decoder"] = {{"type", "Metaspace"}, {"replacement", "_"}};
  write_text(d.str("sp.json"), sp.dump());
  try {
    eval::serve::BpeDecoder::load(d.str("sp.json"));
    ADD_FAILURE() << "a Metaspace decoder was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("\"Metaspace\""), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("/v1/detokenize"), std::string::npos) << e.what();
  }
}

// The small tokenizer with merges and DeepSeek-style pre-tokenizers: digits split in threes, then
// GPT-2's pattern; hand-traced: "hello" merges h+e, l+l, he+ll; " world" starts with the merge
// of the space character and w; the trailing space is its own piece.
json merging_tokenizer(bool ignore_merges) {
  json t = small_tokenizer();
  json& v = t["model"]["vocab"];
  v[bl("he")] = 260;
  v[bl("ll")] = 261;
  v[bl("hell")] = 262;
  v[bl(" w")] = 263;
  if (ignore_merges) v[bl("hello")] = 264;
  t["model"]["merges"] = json::array({bl("h") + " " + bl("e"), bl("l") + " " + bl("l"),
                                      json::array({bl("he"), bl("ll")}), bl(" ") + " " + bl("w")});
  t["model"]["ignore_merges"] = ignore_merges;
  t["pre_tokenizer"] = {
      {"type", "Sequence"},
      {"pretokenizers",
       json::array({{{"type", "Split"},
                     {"pattern", {{"Regex", "\\p{N}{1,3}"}}},
                     {"behavior", "Isolated"},
                     {"invert", false}},
                    {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}})}};
  t["post_processor"]["special_tokens"] = {{"<|bos|>", {{"id", "<|bos|>"}, {"ids", {300}}}}};
  return t;
}

TEST(LocalTokenizer, EncodesByteLevelBpe) {
  TempDir d;
  write_text(d.str("m.json"), merging_tokenizer(false).dump());
  const auto enc = eval::serve::BpeEncoder::load(d.str("m.json"));
  EXPECT_EQ(
      enc.encode("hello world 12345"),
      (std::vector<int32_t>{300, 262, 'o', 263, 'o', 'r', 'l', 'd', ' ', '1', '2', '3', '4', '5'}));
  EXPECT_EQ(enc.encode("a<tool>b<|bos|>", false), (std::vector<int32_t>{'a', 301, 'b', 300}));
  EXPECT_EQ(enc.encode("", true), (std::vector<int32_t>{300}));  // num_special_tokens_to_add
  EXPECT_EQ(enc.encode("caf\xC3\xA9", false),
            (std::vector<int32_t>{'c', 'a', 'f', 0xC3, 0xA9}));  // no merge: the bytes
  write_text(d.str("i.json"), merging_tokenizer(true).dump());
  EXPECT_EQ(eval::serve::BpeEncoder::load(d.str("i.json")).encode("hello", false),
            (std::vector<int32_t>{264}));  // ignore_merges: the whole word from the vocabulary
  // Decoding the encoding gives the text back.
  const auto dec = eval::serve::BpeDecoder::load(d.str("m.json"));
  EXPECT_EQ(dec.decode(enc.encode("Zo\xC3\xAB h\xC3\xA4lt 3 \xE2\x82\xAC \xF0\x9F\x8D\x8E", false)),
            "Zo\xC3\xAB h\xC3\xA4lt 3 \xE2\x82\xAC \xF0\x9F\x8D\x8E");
  json bad = merging_tokenizer(false);
  bad["normalizer"] = {{"type", "NFKC"}};
  write_text(d.str("bad.json"), bad.dump());
  try {
    eval::serve::BpeEncoder::load(d.str("bad.json"));
    ADD_FAILURE() << "an NFKC normalizer was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("normalizer NFKC"), std::string::npos) << e.what();
  }
}

// bench_serving's `random` with --tokenizer against a server without tokenizer endpoints: the
// ShareGPT text is encoded and the prompts decoded here.
TEST(LocalTokenizer, RandomDatasetEncodesHere) {
  TempDir d;
  write_text(d.str("tokenizer.json"), merging_tokenizer(false).dump());
  json share = json::array();
  for (int i = 0; i < 10; ++i)
    share.push_back({{"conversations",
                      json::array({{{"from", "human"},
                                    {"value", "hello w\xC3\xB6rld " + std::to_string(100 + i)}},
                                   {{"from", "gpt"}, {"value", "Some."}}})}});
  write_text(d.str("sharegpt.json"), share.dump());
  TestServerConfig cfg;
  cfg.threads = 16;
  cfg.no_tokenizer_endpoints = true;
  TestServer server(cfg);
  server.start();
  std::string err;
  ASSERT_EQ(run_eval_capture({"serve-bench",
                              "--url",
                              server.url(),
                              "--dataset-name",
                              "random",
                              "--dataset-path",
                              d.str("sharegpt.json"),
                              "--tokenizer",
                              d.str("tokenizer.json"),
                              "--random-input",
                              "30",
                              "--random-output",
                              "4",
                              "--random-range-ratio",
                              "1",
                              "--num-prompts",
                              "6",
                              "--disable-tqdm",
                              "--out",
                              d.str("r")},
                             err),
            0)
      << err;
  const json rep = read_report(d.str("r"));
  EXPECT_EQ(metric(rep, "total_input_tokens"), 6 * 29);
  EXPECT_NE(rep["context"]["encoding"].get<std::string>().find("encoded by --tokenizer"),
            std::string::npos)
      << rep["context"];
  // The text sent: the encoding (BOS first, as transformers' encode) repeated, cut by one
  // special token at the end and decoded with special tokens kept, as bench_serving does.
  const std::string text = json::parse(server.stats().last_generation_body)["text"];
  EXPECT_EQ(text.rfind("<|bos|>hello w\xC3\xB6rld 1", 0), 0u) << text;
}

// The seed's serve-bench line with --tokenizer against a server without /v1/tokenize and
// /v1/detokenize: prompts are decoded here and the run passes; the text on the wire is the local
// decode of bench_serving's ids. Without a tokenizer the refusal names both ways out.
TEST(LocalTokenizer, SeedLineAgainstAServerWithoutTokenizerEndpoints) {
  TempDir d;
  write_text(d.str("tokenizer.json"), small_tokenizer().dump());
  TestServerConfig cfg;
  cfg.threads = 32;
  cfg.no_tokenizer_endpoints = true;
  cfg.accept_lengths = {3.2, 3.4};
  TestServer server(cfg);
  server.start();
  const std::string port = std::to_string(server.port());
  std::string err;
  const std::vector<std::string> line = {"serve-bench",
                                         "--backend",
                                         "sglang",
                                         "--host",
                                         "127.0.0.1",
                                         "--port",
                                         port,
                                         "--dataset-name",
                                         "random-ids",
                                         "--random-input",
                                         "24",
                                         "--random-output",
                                         "8",
                                         "--random-range-ratio",
                                         "1",
                                         "--max-concurrency",
                                         "4",
                                         "--num-prompt",
                                         "8",
                                         "--warmup-requests",
                                         "8",
                                         "--tokenizer",
                                         d.str(""),
                                         "--output-file",
                                         d.str("bench.jsonl"),
                                         "--out",
                                         d.str("s"),
                                         "--disable-tqdm",
                                         "--seed",
                                         "3"};
  ASSERT_EQ(run_eval_capture(line, err), 0) << err;
  const json rep = read_report(d.str("s"));
  EXPECT_EQ(metric(rep, "completed"), 8);
  EXPECT_EQ(metric(rep, "total_input_tokens"), 8 * 23);  // the template's BOS left to the server
  EXPECT_NE(rep["prompt_form"].get<std::string>().find("decoded by --tokenizer"), std::string::npos)
      << rep["prompt_form"];
  // The last prompt on the wire: bench_serving's ids for prompt 7, one fewer, decoded locally.
  eval::serve::WorkloadSpec w;
  w.num_prompts = 8;
  w.input_len = 24;
  w.output_len = 8;
  w.range_ratio = 1;
  w.vocab_size = 260;
  w.seed = 3;
  const auto reqs = eval::serve::make_workload(w);
  const auto dec = eval::serve::BpeDecoder::load(d.str("tokenizer.json"));
  std::vector<std::string> texts;
  for (const auto& r : reqs)
    texts.push_back(dec.decode(std::vector<int32_t>(r.input_ids.begin(), r.input_ids.end() - 1)));
  const json body = json::parse(server.stats().last_generation_body);
  EXPECT_NE(std::find(texts.begin(), texts.end(), body["text"].get<std::string>()), texts.end())
      << body.dump();
  // Without --tokenizer the server's endpoints are needed: exit 3 naming the ways out.
  EXPECT_EQ(run_eval_capture({"serve-bench", "--url", server.url(), "--vocab-size", "260",
                              "--num-prompts", "2", "--disable-tqdm", "--out", d.str("n")},
                             err),
            3);
  EXPECT_NE(err.find("/v1/tokenize"), std::string::npos) << err;
  EXPECT_NE(err.find("--tokenize-prompt"), std::string::npos) << err;
  EXPECT_NE(err.find("--tokenizer"), std::string::npos) << err;
  // --tokenize-prompt needs no endpoint either.
  EXPECT_EQ(run_eval_capture(
                {"serve-bench", "--url", server.url(), "--vocab-size", "260", "--num-prompts", "2",
                 "--disable-tqdm", "--tokenize-prompt", "--out", d.str("ids")},
                err),
            0)
      << err;
}

}  // namespace
}  // namespace dsv4::e2e_test
