// JUnit XML reader (the subset CTest and GoogleTest write) and the families x checks table.
#include "junit.hpp"

#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <stdexcept>

namespace dsv4::nightly {

namespace {

std::string decode(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '&') {
      out += s[i];
      continue;
    }
    const size_t semi = s.find(';', i);
    if (semi == std::string::npos) {
      out += s[i];
      continue;
    }
    const std::string ent = s.substr(i + 1, semi - i - 1);
    if (ent == "lt")
      out += '<';
    else if (ent == "gt")
      out += '>';
    else if (ent == "amp")
      out += '&';
    else if (ent == "quot")
      out += '"';
    else if (ent == "apos")
      out += '\'';
    else if (!ent.empty() && ent[0] == '#') {
      const unsigned long cp = ent.size() > 1 && (ent[1] == 'x' || ent[1] == 'X')
                                   ? std::stoul(ent.substr(2), nullptr, 16)
                                   : std::stoul(ent.substr(1), nullptr, 10);
      if (cp < 0x80) {
        out += static_cast<char>(cp);
      } else if (cp < 0x800) {
        out += static_cast<char>(0xC0 | (cp >> 6));
        out += static_cast<char>(0x80 | (cp & 0x3F));
      } else {
        out += static_cast<char>(0xE0 | (cp >> 12));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
      }
    } else {
      out += s.substr(i, semi - i + 1);
    }
    i = semi;
  }
  return out;
}

struct Tag {
  std::string name;
  std::map<std::string, std::string> attrs;
  bool closing = false;
  bool self_closing = false;
};

// Parses the tag whose '<' is at xml[pos]; returns the position after its '>'.
size_t parse_tag(const std::string& xml, size_t pos, Tag& tag) {
  size_t i = pos + 1;
  if (i < xml.size() && xml[i] == '/') {
    tag.closing = true;
    ++i;
  }
  const size_t name_start = i;
  while (i < xml.size() && !isspace(static_cast<unsigned char>(xml[i])) && xml[i] != '>' &&
         xml[i] != '/')
    ++i;
  tag.name = xml.substr(name_start, i - name_start);
  for (;;) {
    while (i < xml.size() && isspace(static_cast<unsigned char>(xml[i]))) ++i;
    if (i >= xml.size())
      throw std::runtime_error("unterminated tag <" + tag.name + " in JUnit XML");
    if (xml[i] == '>') return i + 1;
    if (xml[i] == '/' && i + 1 < xml.size() && xml[i + 1] == '>') {
      tag.self_closing = true;
      return i + 2;
    }
    const size_t key_start = i;
    while (i < xml.size() && xml[i] != '=' && xml[i] != '>' &&
           !isspace(static_cast<unsigned char>(xml[i])))
      ++i;
    const std::string key = xml.substr(key_start, i - key_start);
    while (i < xml.size() && isspace(static_cast<unsigned char>(xml[i]))) ++i;
    if (i >= xml.size() || xml[i] != '=')
      throw std::runtime_error("attribute '" + key + "' of <" + tag.name + "> has no value");
    ++i;
    while (i < xml.size() && isspace(static_cast<unsigned char>(xml[i]))) ++i;
    if (i >= xml.size() || (xml[i] != '"' && xml[i] != '\''))
      throw std::runtime_error("attribute '" + key + "' of <" + tag.name + "> is not quoted");
    const char quote = xml[i++];
    const size_t end = xml.find(quote, i);
    if (end == std::string::npos)
      throw std::runtime_error("unterminated attribute '" + key + "' of <" + tag.name + ">");
    tag.attrs[key] = decode(xml.substr(i, end - i));
    i = end + 1;
  }
}

std::string normalized(const std::string& s) {
  std::string out;
  for (char c : s)
    if (isalnum(static_cast<unsigned char>(c))) out += static_cast<char>(tolower(c));
  return out;
}

std::string cell(const Counts& c) {
  if (c.total() == 0) return "—";
  const std::string frac = std::to_string(c.pass) + "/" + std::to_string(c.total());
  if (c.fail > 0) return "❌ " + frac;
  if (c.skip == c.total()) return "⏭ " + std::to_string(c.skip) + " skipped";
  if (c.skip > 0) return "✅ " + frac + " (" + std::to_string(c.skip) + " skipped)";
  return "✅ " + frac;
}

}  // namespace

std::vector<TestResult> parse_junit(const std::string& xml) {
  std::vector<TestResult> out;
  bool in_case = false;
  TestResult cur;
  auto finish = [&] {
    out.push_back(cur);
    in_case = false;
  };
  size_t i = 0;
  while ((i = xml.find('<', i)) != std::string::npos) {
    if (xml.compare(i, 4, "<!--") == 0) {
      const size_t e = xml.find("-->", i);
      if (e == std::string::npos) throw std::runtime_error("unterminated comment in JUnit XML");
      i = e + 3;
      continue;
    }
    if (xml.compare(i, 9, "<![CDATA[") == 0) {
      const size_t e = xml.find("]]>", i);
      if (e == std::string::npos) throw std::runtime_error("unterminated CDATA in JUnit XML");
      i = e + 3;
      continue;
    }
    if (xml.compare(i, 2, "<?") == 0 || xml.compare(i, 2, "<!") == 0) {
      const size_t e = xml.find('>', i);
      if (e == std::string::npos) throw std::runtime_error("unterminated declaration in JUnit XML");
      i = e + 1;
      continue;
    }
    Tag tag;
    i = parse_tag(xml, i, tag);
    if (tag.name == "testcase") {
      if (tag.closing) {
        if (in_case) finish();
        continue;
      }
      cur = TestResult{};
      const std::string name = tag.attrs["name"], cls = tag.attrs["classname"];
      cur.name = (!cls.empty() && cls != name) ? cls + "." + name : name;
      const std::string status = tag.attrs["status"], result = tag.attrs["result"];
      if (status == "notrun" || status == "disabled" || result == "skipped" ||
          result == "suppressed")
        cur.outcome = Outcome::kSkip;
      in_case = true;
      if (tag.self_closing) finish();
    } else if (in_case && !tag.closing && (tag.name == "failure" || tag.name == "error")) {
      cur.outcome = Outcome::kFail;
      if (cur.message.empty()) cur.message = tag.attrs["message"];
    } else if (in_case && !tag.closing && tag.name == "skipped") {
      if (cur.outcome != Outcome::kFail) cur.outcome = Outcome::kSkip;
      if (cur.message.empty()) cur.message = tag.attrs["message"];
    }
  }
  if (in_case) throw std::runtime_error("unterminated <testcase> '" + cur.name + "' in JUnit XML");
  return out;
}

std::vector<TestResult> read_junit(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read JUnit file '" + path + "'");
  std::ostringstream buf;
  buf << in.rdbuf();
  try {
    return parse_junit(buf.str());
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(path + ": " + e.what());
  }
}

std::string family_of(const std::string& test, const std::vector<std::string>& families) {
  const std::string t = normalized(test);
  std::string best = "other";
  size_t best_len = 0;
  for (const auto& f : families) {
    const std::string key = normalized(f);
    if (!key.empty() && key.size() > best_len && t.find(key) != std::string::npos) {
      best = f;
      best_len = key.size();
    }
  }
  return best;
}

std::string check_of(const std::string& test,
                     const std::vector<std::pair<std::string, std::string>>& checks) {
  for (const auto& [name, pattern] : checks)
    if (std::regex_search(test, std::regex(pattern, std::regex::ECMAScript | std::regex::icase)))
      return name;
  return "other";
}

std::string summary_table(const std::string& title, const std::vector<TestResult>& results,
                          const Ctest& spec) {
  std::vector<std::string> rows = spec.families, cols;
  for (const auto& c : spec.checks) cols.push_back(c.first);
  std::map<std::string, std::map<std::string, Counts>> grid;
  Counts all;
  bool other_row = false, other_col = false;
  std::vector<const TestResult*> failed;
  for (const auto& r : results) {
    const std::string f = family_of(r.name, spec.families), c = check_of(r.name, spec.checks);
    other_row = other_row || f == "other";
    other_col = other_col || c == "other";
    Counts& k = grid[f][c];
    Counts* both[] = {&k, &all};
    for (Counts* x : both) {
      if (r.outcome == Outcome::kPass) ++x->pass;
      if (r.outcome == Outcome::kFail) ++x->fail;
      if (r.outcome == Outcome::kSkip) ++x->skip;
    }
    if (r.outcome == Outcome::kFail) failed.push_back(&r);
  }
  if (other_row) rows.push_back("other");
  if (other_col) cols.push_back("other");

  std::ostringstream o;
  o << "### " << title << ": " << all.total() << " tests, " << all.pass << " passed, " << all.fail
    << " failed, " << all.skip << " skipped\n\n";
  o << "| family |";
  for (const auto& c : cols) o << " " << c << " |";
  o << " all |\n|---|";
  for (size_t i = 0; i <= cols.size(); ++i) o << "---|";
  o << "\n";
  for (const auto& f : rows) {
    Counts row;
    o << "| " << f << " |";
    for (const auto& c : cols) {
      const Counts k = grid[f][c];
      row.pass += k.pass;
      row.fail += k.fail;
      row.skip += k.skip;
      o << " " << cell(k) << " |";
    }
    o << " " << (row.total() == 0 ? "no tests" : cell(row)) << " |\n";
  }
  if (!failed.empty()) {
    o << "\nFailed tests:\n";
    const size_t shown = std::min<size_t>(failed.size(), 50);
    for (size_t i = 0; i < shown; ++i) o << "- `" << failed[i]->name << "`\n";
    if (failed.size() > shown) o << "- ... and " << failed.size() - shown << " more\n";
  }
  return o.str();
}

}  // namespace dsv4::nightly
