// dsv4-bench's measurement: a row drawn through its adapter, checked, then timed on the device.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dsv4/bench/peers.hpp"
#include "dsv4/bench/plan.hpp"
#include "dsv4/bench/results.hpp"
#include "dsv4/fixtures/kernel_case.hpp"
#include "dsv4/gpu/runtime.hpp"

namespace dsv4::bench {

// A row on the host: its adapter, inputs drawn from Rng(seed), the reference's outputs, its work.
struct Prepared {
  PlannedRow planned;
  uint64_t seed = 0;
  std::unique_ptr<fx::KernelCase> k = {};
  fx::Tensors in = {}, want = {};
  fx::Work work = {};
  std::string error = {};  // the row cannot be drawn or run here
  bool not_here = false;   // the row's launch is not built for this device (error says why)
};

// Draws `rows` and runs their references on `jobs` threads (0: the machine's cores); `on_device`:
// a row the device cannot run (cannot_run()) is an error, not drawn.
std::vector<Prepared> prepare(const std::vector<PlannedRow>& rows, uint64_t seed, unsigned jobs,
                              bool on_device);

// Writes each prepared row as a drawn case file into `dir` (what the PyTorch peers read); returns
// the paths.
std::vector<std::string> write_cases(const std::vector<Prepared>& rows, const std::string& dir);

struct MeasureOptions {
  int reps = 30, batch = 20, warmup = 10;
  size_t rotate_bytes = size_t(256) << 20;  // input sets rotated until they exceed any L2
  int max_sets = 16;
  std::string case_dir = ".";  // where a wrong output's case file goes
};

// Checks the row's outputs against the reference (every output by the family's comparator, the
// canaries of every buffer), and only then times it (median per launch over rotating input sets)
// and measures the copy ceiling over the same bytes. A wrong output is an error with its case file.
Measured measure(const Prepared& p, const Peers& peers, gpu::Stream s, const MeasureOptions& o);

}  // namespace dsv4::bench
