// dsv4-bench's plan: rows from the registry, selected, with the rows their targets need.
#include "dsv4/bench/plan.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

#include "dsv4/replay/replay.hpp"

namespace dsv4::bench {

namespace {

std::set<std::string> words_of(const fx::Vars& v) {
  std::set<std::string> w;
  for (const auto& [k, value] : v.items()) w.insert(value.empty() ? k : k + "=" + value);
  return w;
}

bool matches(const fx::Vars& row, const std::vector<std::string>& filters) {
  if (filters.empty()) return true;
  const std::set<std::string> have = words_of(row);
  for (const std::string& f : filters) {
    const std::set<std::string> want = words_of(fx::Vars::parse(f));
    if (std::includes(have.begin(), have.end(), want.begin(), want.end())) return true;
  }
  return false;
}

std::string family_of(const std::string& id) { return id.substr(0, id.find(':')); }

}  // namespace

std::vector<PlannedRow> plan(const Selection& s) {
  // Every declared row, by family.
  std::map<std::string, std::vector<PlannedRow>> all;
  for (const std::string& name : replay::family_names()) {
    const replay::Family* f = replay::find_family(name);
    if (!f->drawing || !f->drawing->bench) continue;
    for (cases::BenchRow& r : f->drawing->bench()) {
      const std::string id = cases::bench_row_id(name, r.vars);
      all[name].push_back({name, std::move(r), id});
    }
  }
  std::string known;
  for (const auto& [name, rows] : all) known += (known.empty() ? "" : ", ") + name;
  std::vector<std::string> families = s.families;
  if (families.empty())
    for (const auto& [name, rows] : all) families.push_back(name);
  for (const std::string& f : families)
    if (!all.count(f))
      throw PlanError("--family " + f + ": " +
                      (replay::find_family(f) ? "declares no benchmark rows" : "no such family") +
                      " (families with rows: " + known + ")");

  std::map<std::string, const PlannedRow*> by_id;
  for (const auto& [name, rows] : all)
    for (const PlannedRow& r : rows) by_id[r.id] = &r;

  std::set<std::string> chosen;
  std::vector<std::string> order;  // ids, selection order
  for (const std::string& f : families)
    for (const PlannedRow& r : all.at(f))
      if (matches(r.row.vars, s.shapes) && chosen.insert(r.id).second) order.push_back(r.id);
  if (order.empty()) {
    std::string filters;
    for (const auto& x : s.shapes) filters += (filters.empty() ? "" : " | ") + x;
    throw PlanError("--shape " + filters + ": no benchmark row of the selected families matches");
  }
  // The rows targets refer to (transitively).
  std::set<std::string> needed;
  for (size_t i = 0; i < order.size(); ++i) {
    const PlannedRow& r = *by_id.at(order[i]);
    for (const cases::BenchTarget& t : r.row.targets) {
      if (t.row.empty()) continue;
      if (!by_id.count(t.row))
        throw PlanError("benchmark row " + r.id + ": its target '" + t.text() +
                        "' names a row no family declares");
      if (!chosen.count(t.row)) {
        chosen.insert(t.row);
        needed.insert(t.row);
        order.push_back(t.row);
      }
    }
  }
  // Families ordered so that a family comes after every family its rows' targets refer to.
  std::map<std::string, std::set<std::string>> after;  // family -> families it needs first
  std::vector<std::string> fam_order;
  for (const std::string& id : order) {
    const std::string f = family_of(id);
    if (std::find(fam_order.begin(), fam_order.end(), f) == fam_order.end()) fam_order.push_back(f);
    for (const cases::BenchTarget& t : by_id.at(id)->row.targets)
      if (!t.row.empty() && family_of(t.row) != f) after[f].insert(family_of(t.row));
  }
  std::vector<std::string> sorted_fams;
  std::set<std::string> placed;
  while (sorted_fams.size() < fam_order.size()) {
    bool progress = false;
    for (const std::string& f : fam_order) {
      if (placed.count(f)) continue;
      bool ready = true;
      for (const std::string& dep : after[f]) ready = ready && (placed.count(dep) || dep == f);
      if (!ready) continue;
      sorted_fams.push_back(f);
      placed.insert(f);
      progress = true;
    }
    if (!progress) throw PlanError("benchmark rows' targets refer to each other in a cycle");
  }
  // Within a family: declaration order, a row after the rows of its family it refers to.
  std::vector<PlannedRow> out;
  for (const std::string& f : sorted_fams) {
    std::vector<const PlannedRow*> rows;
    for (const PlannedRow& r : all.at(f))
      if (chosen.count(r.id)) rows.push_back(&r);
    std::set<std::string> done;
    while (!rows.empty()) {
      const size_t before = rows.size();
      for (auto it = rows.begin(); it != rows.end();) {
        bool ready = true;
        for (const cases::BenchTarget& t : (*it)->row.targets)
          if (!t.row.empty() && family_of(t.row) == f && !done.count(t.row)) ready = false;
        if (!ready) {
          ++it;
          continue;
        }
        PlannedRow p = **it;
        p.for_target = needed.count(p.id) != 0;
        done.insert(p.id);
        out.push_back(std::move(p));
        it = rows.erase(it);
      }
      if (rows.size() == before)
        throw PlanError("benchmark rows of " + f + " refer to each other in a cycle");
    }
  }
  return out;
}

std::string describe(const std::vector<PlannedRow>& rows) {
  std::ostringstream o;
  std::string family;
  for (const PlannedRow& r : rows) {
    if (r.family != family) {
      family = r.family;
      o << family << "\n";
    }
    o << "  " << r.row.vars.spec();
    if (!r.row.note.empty()) o << "  (" << r.row.note << ")";
    for (size_t i = 0; i < r.row.targets.size(); ++i)
      o << (i ? "; " : "  target: ") << r.row.targets[i].text();
    if (r.for_target) o << "  [timed for another row's target]";
    o << "\n";
  }
  return o.str();
}

}  // namespace dsv4::bench
