// bench ring_layout: each launcher (token locs, verify locs, window rows, prefill expansion) on
// inputs drawn by the family's kernel case, against the device copy ceiling measured in the same
// run, beside PyTorch eager and torch.compile on the same card (bench/ring_layout_torch.py writes
// their times; pass its JSON with --peer FILE).
#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common.hpp"
#include "dsv4/cases/ring_layout.hpp"

namespace {

using namespace dsv4;

constexpr size_t kRotateBytes = size_t(256) << 20;  // several times any current L2
constexpr int kMaxSets = 32;

// The inputs each launcher reads (the case runs the launchers whose inputs are present).
const std::vector<std::pair<std::string, std::vector<std::string>>> kOps = {
    {"token_locs", {"slot", "pos", "final_pos"}},
    {"verify_locs", {"batch_slot", "verify_pos", "commit_len"}},
    {"window_rows", {"batch_id", "pos", "batch_slot"}},
    {"prefill_slots", {"req_slot", "prefill_indptr", "pos"}},
};

fx::Tensors only(const fx::Tensors& all, const std::vector<std::string>& keep) {
  fx::Tensors in;
  for (const char* g : {"ring", "win", "n_slots"}) in[g] = all.at(g);
  for (const auto& k : keep) in[k] = all.at(k);
  return in;
}

// Bytes a launch must move: every input and output once (rows: only the ones written).
double bytes_moved(const fx::Tensors& in, const fx::Tensors& out) {
  double b = 0;
  for (const auto& [n, t] : in) b += t.shape.empty() ? 0 : double(t.data.size());
  for (const auto& [n, t] : out) {
    if (n == "rows") {
      const auto ip = out.at("indptr").values<int32_t>();
      b += 4.0 * double(ip.back() - ip.front());
    } else if (n != "errors") {
      b += double(t.data.size());
    }
  }
  return b;
}

struct Peer {
  nlohmann::json j;
  std::string cell(const std::string& op, int64_t n, const char* key) const {
    const std::string k = op + "/" + std::to_string(n);
    if (!j.contains(k) || !j[k].contains(key) || j[k][key].is_null()) return "n/a";
    return bench::fmt("%.2f", j[k][key].get<double>());
  }
};

}  // namespace

int main(int argc, char** argv) {
  Peer peer;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::string(argv[i]) == "--peer") {
      std::ifstream f(argv[i + 1]);
      if (!f) {
        std::fprintf(stderr, "bench_ring_layout: --peer %s: cannot read the file\n", argv[i + 1]);
        return 2;
      }
      peer.j = nlohmann::json::parse(f);
    }
  if (!bench::require_gpu("bench_ring_layout")) return 0;
  gpu::StreamHandle s;
  bench::Table table({"launcher", "tokens", "MB moved", "us", "GB/s", "copy GB/s", "of copy",
                      "torch eager us", "torch.compile us"});
  for (int64_t n : {64, 4096, 65536, 262144}) {
    // DSpark's geometry: window 125, 4 draft tokens, ring 128; positions up to 2^20.
    const cases::RingLayoutCase k({.n = n,
                                   .V = 4,
                                   .win = 125,
                                   .n_slots = 4096,
                                   .max_pos = int64_t(1) << 20,
                                   .max_request = 8});
    fx::Rng rng(static_cast<uint64_t>(n));
    const fx::Tensors all = k.draw(rng);
    for (const auto& [op, keep] : kOps) {
      const fx::Tensors in = only(all, keep);
      const double bytes = bytes_moved(in, k.reference(in));
      const int sets = int(std::clamp<double>(double(kRotateBytes) / bytes, 2, kMaxSets));
      std::vector<std::unique_ptr<fx::CaseDevice>> dev;
      for (int i = 0; i < sets; ++i) {
        dev.push_back(std::make_unique<fx::CaseDevice>(k, in, s));
        dev.back()->reset_outputs();
      }
      const double us = bench::median_us(
          [&](int i, gpu::Stream st) { k.launch(dev[size_t(i % sets)]->tensors(), st); }, s);
      const double copy = bench::copy_ceiling_gbps(size_t(bytes / 2) + 64, s);
      const double gbps = bytes / (us * 1e3);
      table.row({op, std::to_string(n), bench::fmt("%.2f", bytes / 1e6), bench::fmt("%.2f", us),
                 bench::fmt("%.0f", gbps), bench::fmt("%.0f", copy),
                 bench::fmt("%.0f%%", 100 * gbps / copy), peer.cell(op, n, "eager_us"),
                 peer.cell(op, n, "compile_us")});
    }
  }
  table.print();
  return 0;
}
