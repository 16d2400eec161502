// Shared helpers of the workflow rendering tests: the committed registry and its renderings.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "registry.hpp"
#include "render.hpp"

namespace dsv4::nightly::test {

inline const std::string kRegistry = DSV4_SOURCE_DIR "/nightly/suites.json";

inline Registry committed() { return load_registry(kRegistry); }

// The rendered workflow `name` (nightly.yml, weekly.yml, pr.yml).
inline std::string rendered(const Registry& reg, const std::string& name) {
  for (const auto& f : render_all(reg, default_templates_dir()))
    if (f.name == name) return f.text;
  ADD_FAILURE() << "no rendered " << name;
  return "";
}

// The reusable workflow every schedule calls.
inline std::string render_reusable(const Registry& reg) {
  return rendered(reg, "nightly-suites.yml");
}

}  // namespace dsv4::nightly::test
