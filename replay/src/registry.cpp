// The family registry: adapters add themselves at static initialisation, looked up by name.
#include <algorithm>
#include <map>
#include <stdexcept>

#include "dsv4/replay/replay.hpp"

namespace dsv4::replay {
namespace {

std::map<std::string, Family>& families() {
  static std::map<std::string, Family> all;  // constructed on first use, before any lookup
  return all;
}

}  // namespace

bool register_family(Family f) {
  if (f.name.empty() || !f.reference || !f.compare)
    throw std::logic_error("replay family '" + f.name +
                           "' needs a name, a reference and a comparator");
  const std::string name = f.name;
  if (!families().emplace(name, std::move(f)).second)
    throw std::logic_error("replay family '" + name + "' registered twice");
  return true;
}

const Family* find_family(const std::string& name) {
  auto it = families().find(name);
  return it == families().end() ? nullptr : &it->second;
}

std::vector<std::string> family_names() {
  std::vector<std::string> names;
  for (const auto& [n, f] : families()) names.push_back(n);
  return names;
}

}  // namespace dsv4::replay
