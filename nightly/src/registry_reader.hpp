// The registry loader's field reader (every problem names its path and value) and the suite
// parser it drives; private to nightly/src (registry.cpp, registry_suites.cpp).
#pragma once

#include <initializer_list>
#include <regex>
#include <string>
#include <vector>

#include "registry.hpp"

namespace dsv4::nightly::detail {

using nlohmann::json;

inline std::string shown(const json* v) {
  if (v == nullptr) return "(missing)";
  std::string s = v->dump();
  if (s.size() > 160) s = s.substr(0, 157) + "...";
  return s;
}

inline std::string join(const std::string& path, const std::string& key) {
  return path.empty() ? key : path + "." + key;
}

inline std::string at(const std::string& path, size_t i) {
  return path + "[" + std::to_string(i) + "]";
}

inline const std::regex& name_re() {
  static const std::regex r("^[a-z][a-z0-9-]{0,62}$");
  return r;
}
inline const std::regex& env_re() {
  static const std::regex r("^[A-Za-z_][A-Za-z0-9_]*$");
  return r;
}
inline const std::regex& word_re() {
  static const std::regex r("^[A-Za-z0-9][A-Za-z0-9_.:/-]*$");
  return r;
}

// Field access with named errors; `file` goes into every message.
class Reader {
 public:
  explicit Reader(std::string file) : file_(std::move(file)) {}

  [[noreturn]] void fail(const std::string& path, const std::string& problem, const json* v) const {
    throw RegistryError(file_, path, problem, shown(v));
  }

  void object(const json& v, const std::string& path) const {
    if (!v.is_object()) fail(path, "must be an object", &v);
  }

  void keys(const json& obj, const std::string& path, std::initializer_list<const char*> allowed,
            std::initializer_list<const char*> required = {}) const {
    object(obj, path);
    for (auto it = obj.begin(); it != obj.end(); ++it) {
      bool ok = false;
      for (const char* k : allowed) ok = ok || it.key() == k;
      if (!ok) {
        std::string list;
        for (const char* k : allowed) list += std::string(list.empty() ? "" : ", ") + k;
        fail(join(path, it.key()), "unknown field (known: " + list + ")", &it.value());
      }
    }
    for (const char* k : required)
      if (!obj.contains(k)) fail(join(path, k), "is required", nullptr);
  }

  std::string str(const json& obj, const std::string& path, const char* key, bool required,
                  const std::string& def = "") const {
    const std::string p = join(path, key);
    if (!obj.contains(key)) {
      if (required) fail(p, "is required", nullptr);
      return def;
    }
    const json& v = obj.at(key);
    if (!v.is_string()) fail(p, "must be a string", &v);
    if (v.get<std::string>().empty()) fail(p, "must not be empty", &v);
    return v.get<std::string>();
  }

  std::string matching(const json& obj, const std::string& path, const char* key, bool required,
                       const std::regex& re, const char* what, const std::string& def = "") const {
    std::string s = str(obj, path, key, required, def);
    if ((required || obj.contains(key)) && !std::regex_match(s, re))
      fail(join(path, key), std::string("must be ") + what, &obj.at(key));
    return s;
  }

  int integer(const json& obj, const std::string& path, const char* key, long lo, long hi,
              bool required, int def) const {
    const std::string p = join(path, key);
    if (!obj.contains(key)) {
      if (required) fail(p, "is required", nullptr);
      return def;
    }
    const json& v = obj.at(key);
    if (!v.is_number_integer())
      fail(p, "must be an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]", &v);
    const long n = v.get<long>();
    if (n < lo || n > hi)
      fail(p, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]", &v);
    return static_cast<int>(n);
  }

  bool boolean(const json& obj, const std::string& path, const char* key, bool def) const {
    if (!obj.contains(key)) return def;
    const json& v = obj.at(key);
    if (!v.is_boolean()) fail(join(path, key), "must be true or false", &v);
    return v.get<bool>();
  }

  std::vector<std::string> strings(const json& obj, const std::string& path, const char* key,
                                   bool required, bool nonempty) const {
    const std::string p = join(path, key);
    std::vector<std::string> out;
    if (!obj.contains(key)) {
      if (required) fail(p, "is required", nullptr);
      return out;
    }
    const json& v = obj.at(key);
    if (!v.is_array()) fail(p, "must be an array of strings", &v);
    if (nonempty && v.empty()) fail(p, "must not be empty", &v);
    for (size_t i = 0; i < v.size(); ++i) {
      if (!v[i].is_string() || v[i].get<std::string>().empty())
        fail(at(p, i), "must be a non-empty string", &v[i]);
      out.push_back(v[i].get<std::string>());
    }
    return out;
  }

  std::map<std::string, std::string> env(const json& obj, const std::string& path,
                                         const char* key) const {
    std::map<std::string, std::string> out;
    if (!obj.contains(key)) return out;
    const std::string p = join(path, key);
    const json& v = obj.at(key);
    object(v, p);
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (!std::regex_match(it.key(), env_re()))
        fail(join(p, it.key()), "is not a valid environment variable name", &it.value());
      if (!it.value().is_string()) fail(join(p, it.key()), "must be a string", &it.value());
      out[it.key()] = it.value().get<std::string>();
    }
    return out;
  }

  // Every {placeholder} in `args` must be one of `allowed`.
  void placeholders(const std::vector<std::string>& args, const std::string& path, const json& arr,
                    const std::set<std::string>& allowed) const {
    static const std::regex ph(R"(\{([A-Za-z_]+)\})");
    for (size_t i = 0; i < args.size(); ++i) {
      for (std::sregex_iterator m(args[i].begin(), args[i].end(), ph), e; m != e; ++m) {
        if (!allowed.count((*m)[1].str())) {
          std::string list;
          for (const auto& a : allowed) list += (list.empty() ? "{" : ", {") + a + "}";
          fail(at(path, i), "unknown placeholder {" + (*m)[1].str() + "} (known: " + list + ")",
               &arr[i]);
        }
      }
    }
  }

 private:
  std::string file_;
};

// What a job spends besides its suite: image pull, VRAM clearing, installs (e2e), and the
// build (kernels).
inline constexpr long kSetupS = 30 * 60;
inline constexpr long kBuildS = 60 * 60;
inline constexpr long kStepS = 30 * 60;

// Suite p of suites.json into s (kernels or e2e, their container, sources and gates).
void parse_suite(const Reader& r, const json& j, const std::string& p, Suite& s);

}  // namespace dsv4::nightly::detail
