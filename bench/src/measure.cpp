// dsv4-bench's measurement of one row: the harness's device buffers, the check, then the clock.
#include "dsv4/bench/measure.hpp"

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <thread>

#include "dsv4/bench/timing.hpp"
#include "dsv4/replay/replay.hpp"

namespace dsv4::bench {

namespace {

Prepared prepare_one(const PlannedRow& r, uint64_t seed, bool on_device) {
  Prepared p{.planned = r, .seed = seed};
  try {
    const replay::Family* f = replay::find_family(r.family);
    p.k = f->drawing->from_vars(r.row.vars);
    if (const std::string why = on_device ? p.k->cannot_run() : ""; !why.empty()) {
      p.error = "not on this device: " + why;
      p.not_here = true;
      return p;
    }
    fx::Rng rng(seed);
    p.in = p.k->draw(rng);
    p.want = p.k->reference(p.in);
    p.work = p.k->work(p.in, p.want);
  } catch (const std::exception& e) {
    p.error = std::string("cannot draw the row: ") + e.what();
  }
  return p;
}

size_t buffer_bytes(const fx::Tensors& in, const std::vector<fx::OutputSpec>& outs) {
  size_t b = 0;
  for (const auto& [n, t] : in) b += t.data.size();
  for (const fx::OutputSpec& o : outs) {
    size_t n = fx::st::dtype_bits(o.dtype);
    for (uint64_t d : o.shape) n *= d;
    b += n / 8;
  }
  return b;
}

}  // namespace

std::vector<Prepared> prepare(const std::vector<PlannedRow>& rows, uint64_t seed, unsigned jobs,
                              bool on_device) {
  std::vector<Prepared> out(rows.size());
  if (!jobs) jobs = std::max(1u, std::thread::hardware_concurrency());
  jobs = std::min<unsigned>(jobs, unsigned(rows.size()));
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next++; i < rows.size(); i = next++)
      out[i] = prepare_one(rows[i], seed, on_device);
  };
  std::vector<std::thread> pool;
  for (unsigned j = 1; j < jobs; ++j) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  return out;
}

std::vector<std::string> write_cases(const std::vector<Prepared>& rows, const std::string& dir) {
  std::filesystem::create_directories(dir);
  std::vector<std::string> paths;
  for (const Prepared& p : rows) {
    if (!p.error.empty()) continue;
    const std::string path = replay::drawn_path(dir, p.planned.family, p.planned.row.vars, p.seed);
    replay::drawn_case(*p.k, p.planned.row.vars, p.seed, p.in, p.want).write(path);
    paths.push_back(path);
  }
  return paths;
}

Measured measure(const Prepared& p, const Peers& peers, gpu::Stream s, const MeasureOptions& o) {
  Measured m{.planned = p.planned, .bytes = p.work.bytes, .flops = p.work.flops};
  if (const Peer* peer = peers.find(p.planned.id)) m.peer = *peer;
  if (!p.error.empty()) {
    m.error = p.error;
    m.not_here = p.not_here;
    return m;
  }
  m.name = p.k->name();
  gpu::set_activity("dsv4-bench " + p.planned.id);
  try {
    std::vector<std::unique_ptr<fx::CaseDevice>> sets;
    sets.push_back(std::make_unique<fx::CaseDevice>(*p.k, p.in, s));
    m.launch = p.k->launch_note(p.in);
    fx::CaseDevice& first = *sets.front();
    first.set_seed(p.seed);
    first.reset_outputs();
    first.launch();
    fx::Tensors got;
    const ::testing::AssertionResult checked = first.check_outputs(p.want, &got);
    const std::string wrong = checked ? "" : std::string(checked.message()).substr(0, 1200) + " ";
    if (!wrong.empty()) {
      m.wrong = true;
      m.error = "WRONG output, not timed: " + wrong;
      fx::Case c = replay::drawn_case(*p.k, p.planned.row.vars, p.seed, p.in, p.want);
      c.got = got;
      std::filesystem::create_directories(o.case_dir);
      m.case_file = replay::drawn_path(o.case_dir, p.planned.family, p.planned.row.vars, p.seed);
      c.write(m.case_file);
      m.error += "(case file " + m.case_file +
                 "; rerun: " + fx::replay_command(m.case_file, p.planned.family, "--device") + ")";
      return m;
    }
    const size_t set_bytes = std::max<size_t>(1, buffer_bytes(p.in, first.specs()));
    m.sets = int(std::clamp<size_t>(o.rotate_bytes / set_bytes, 1, size_t(o.max_sets)));
    for (int i = 1; i < m.sets; ++i) {
      sets.push_back(std::make_unique<fx::CaseDevice>(*p.k, p.in, s));
      sets.back()->set_seed(p.seed);
      sets.back()->reset_outputs();
    }
    m.us = median_us([&](int i, gpu::Stream) { sets[size_t(i % m.sets)]->launch(); }, s, o.reps,
                     o.batch, o.warmup);
    gpu::synchronize(s);
    for (auto& d : sets)
      if (const auto g = d->guards_intact(); !g)
        throw std::runtime_error("canaries damaged while timing: " + std::string(g.message()));
    m.copy_gbps = copy_ceiling_gbps(std::max<size_t>(size_t(m.bytes / 2), 4096), s);
  } catch (const std::exception& e) {
    m.error = std::string("failed on the device: ") + e.what();
  }
  return m;
}

}  // namespace dsv4::bench
