// dsv4-bench's PyTorch peers: bench/torch_peers.py run on the rows' case files, its lines read
// back.
#pragma once

#include <map>
#include <optional>
#include <string>

namespace dsv4::bench {

// One row's peer: the PyTorch expression a user would write, eager and under torch.compile.
struct Peer {
  std::string name = {};  // the expression's short name
  std::optional<double> eager_us = {}, compile_us = {};
  std::string eager_error = {}, compile_error = {};  // why a time is missing
  // The faster of the two, if any.
  std::optional<double> best_us() const;
  // "eager", "compile" or "best".
  std::optional<double> us(const std::string& which) const;
};

struct Peers {
  std::map<std::string, Peer> rows;     // by row id ("family:spec")
  std::optional<double> matmul_tflops;  // the dense bf16 matrix rate torch reached on the card
  std::string matmul_shape;
  std::string device, torch;  // as the script saw them
  std::string error;          // why there are no peers ("" when the script ran)
  const Peer* find(const std::string& id) const;
};

// The script's JSON Lines: one object per case ({"family", "shape", "peer", "eager_us", ...}) and
// a ceiling line ({"ceiling": "bf16_matmul", "tflops", "shape"}). A line that is not JSON, or
// lacks "family" and "shape", throws std::runtime_error naming the file and the line number.
Peers read_peers(const std::string& path);

// Runs `python script DIR --out FILE` on the case files in DIR and reads FILE (`python` is a
// shell word list, e.g. "timeout 300 python3"). When the script cannot run or writes nothing,
// the result holds no rows and says why in `error`; cut short (exit 124), it keeps its rows.
Peers run_peers(const std::string& python, const std::string& script, const std::string& dir,
                const std::string& out_file);

}  // namespace dsv4::bench
