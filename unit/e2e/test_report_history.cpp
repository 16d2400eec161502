// `dsv4-eval report --history`: history charts as SVG, checked by parsing them with a strict XML
// well-formedness reader (which is itself shown to reject broken documents).
#include <gtest/gtest.h>

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>

#include "e2e_test_util.hpp"
#include "report/report_history_svg.hpp"

namespace {

namespace fs = std::filesystem;
using namespace dsv4::eval::report;
using nlohmann::json;

// ---- A strict reader for the XML subset SVG files use: declaration, comments, elements with
// quoted unique attributes, character data with the five named and numeric entities.
struct Element {
  std::string name;
  std::map<std::string, std::string> attrs;
  std::vector<std::unique_ptr<Element>> children;
  std::string text;  // character data directly inside, entities decoded
  void all(const std::string& n, std::vector<const Element*>& out) const {
    if (name == n) out.push_back(this);
    for (const auto& c : children) c->all(n, out);
  }
};

struct XmlError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class XmlReader {
 public:
  explicit XmlReader(const std::string& s) : s_(s) {}
  std::unique_ptr<Element> document() {
    if (s_.compare(0, 5, "<?xml") == 0) {
      const size_t e = s_.find("?>");
      if (e == std::string::npos) fail("unterminated XML declaration");
      p_ = e + 2;
    }
    misc();
    if (p_ >= s_.size() || s_[p_] != '<') fail("no root element");
    auto root = element();
    misc();
    if (p_ != s_.size()) fail("content after the root element");
    return root;
  }

 private:
  const std::string& s_;
  size_t p_ = 0;
  [[noreturn]] void fail(const std::string& why) {
    throw XmlError(why + " at offset " + std::to_string(p_));
  }
  void ws() {
    while (p_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[p_]))) ++p_;
  }
  void misc() {
    for (;;) {
      ws();
      if (s_.compare(p_, 4, "<!--") == 0) {
        const size_t e = s_.find("-->", p_ + 4);
        if (e == std::string::npos) fail("unterminated comment");
        p_ = e + 3;
      } else {
        return;
      }
    }
  }
  std::string name() {
    const size_t b = p_;
    auto start = [](char c) {
      return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == ':';
    };
    if (p_ >= s_.size() || !start(s_[p_])) fail("bad name");
    while (p_ < s_.size() && (start(s_[p_]) || std::isdigit(static_cast<unsigned char>(s_[p_])) ||
                              s_[p_] == '-' || s_[p_] == '.'))
      ++p_;
    return s_.substr(b, p_ - b);
  }
  std::string entity() {  // at '&'
    const size_t e = s_.find(';', p_);
    if (e == std::string::npos || e - p_ > 10) fail("unterminated entity");
    const std::string ent = s_.substr(p_ + 1, e - p_ - 1);
    p_ = e + 1;
    static const std::map<std::string, std::string> named = {
        {"amp", "&"}, {"lt", "<"}, {"gt", ">"}, {"quot", "\""}, {"apos", "'"}};
    if (auto it = named.find(ent); it != named.end()) return it->second;
    if (ent.size() > 1 && ent[0] == '#') {
      const bool hex = ent[1] == 'x';
      const std::string digits = ent.substr(hex ? 2 : 1);
      if (digits.empty() || digits.find_first_not_of(hex ? "0123456789abcdefABCDEF"
                                                         : "0123456789") != std::string::npos)
        fail("bad character reference &" + ent + ";");
      return "?";
    }
    fail("unknown entity &" + ent + ";");
  }
  std::unique_ptr<Element> element() {
    ++p_;  // '<'
    auto el = std::make_unique<Element>();
    el->name = name();
    for (;;) {
      const size_t before = p_;
      ws();
      if (p_ >= s_.size()) fail("unterminated start tag <" + el->name);
      if (s_.compare(p_, 2, "/>") == 0) {
        p_ += 2;
        return el;
      }
      if (s_[p_] == '>') {
        ++p_;
        break;
      }
      if (p_ == before) fail("attributes must be separated by space in <" + el->name);
      const std::string an = name();
      ws();
      if (p_ >= s_.size() || s_[p_] != '=') fail("attribute " + an + " without '='");
      ++p_;
      ws();
      if (p_ >= s_.size() || (s_[p_] != '"' && s_[p_] != '\'')) fail("unquoted attribute " + an);
      const char q = s_[p_++];
      std::string v;
      while (p_ < s_.size() && s_[p_] != q) {
        if (s_[p_] == '<') fail("'<' in attribute " + an);
        if (s_[p_] == '&')
          v += entity();
        else
          v += s_[p_++];
      }
      if (p_ >= s_.size()) fail("unterminated attribute " + an);
      ++p_;
      if (!el->attrs.emplace(an, v).second) fail("duplicate attribute " + an);
    }
    for (;;) {
      if (p_ >= s_.size()) fail("unclosed element <" + el->name + ">");
      if (s_.compare(p_, 2, "</") == 0) {
        p_ += 2;
        if (name() != el->name) fail("mismatched end tag for <" + el->name + ">");
        ws();
        if (p_ >= s_.size() || s_[p_] != '>') fail("bad end tag");
        ++p_;
        return el;
      }
      if (s_.compare(p_, 4, "<!--") == 0) {
        misc();
        continue;
      }
      if (s_[p_] == '<') {
        el->children.push_back(element());
      } else if (s_[p_] == '&') {
        el->text += entity();
      } else {
        el->text += s_[p_++];
      }
    }
  }
};

std::unique_ptr<Element> parse_xml(const std::string& s) { return XmlReader(s).document(); }

std::vector<std::pair<double, double>> points_of(const std::string& attr) {
  std::vector<std::pair<double, double>> out;
  std::istringstream in(attr);
  for (std::string pt; in >> pt;) {
    const size_t comma = pt.find(',');
    EXPECT_NE(comma, std::string::npos) << "point '" << pt << "'";
    out.emplace_back(std::stod(pt.substr(0, comma)), std::stod(pt.substr(comma + 1)));
  }
  return out;
}

TEST(XmlReader, RejectsBrokenDocuments) {
  EXPECT_NO_THROW(
      parse_xml("<?xml version=\"1.0\"?>\n<a x=\"1\"><b/><!-- c --><c>&amp;&#38;</c></a>\n"));
  for (const char* bad :
       {"<a><b></a>", "<a x=1/>", "<a x=\"1\" x=\"2\"/>", "<a>&nbsp;</a>", "<a>1 < 2</a>",
        "<a/><b/>", "<a>", "<a x=\"<\"/>", "text", "<a>&#xZZ;</a>", "<a x=\"1\"y=\"2\"/>"})
    EXPECT_THROW(parse_xml(bad), XmlError) << bad;
}

Chart sample_chart() {
  Chart c;
  c.title = "accuracy over nightly runs";
  c.y_label = "accuracy";
  c.x_labels = {"2026-11-26", "2026-11-27", "2026-11-28", "current"};
  c.series = {{"backend=aiter, spec=mtp", {0.95, 0.948, std::nullopt, 0.951}},
              {"backend=<triton> & \"friends\"", {0.90, 0.91, 0.92, 0.93}},
              {"only one", {std::nullopt, 0.94, std::nullopt, std::nullopt}}};
  return c;
}

TEST(HistorySvg, WellFormedWithOneLinePerSeriesInsideTheViewBox) {
  const Chart c = sample_chart();
  const std::string svg = render_svg(c, 760, 380);
  std::unique_ptr<Element> root;
  ASSERT_NO_THROW(root = parse_xml(svg)) << svg;
  EXPECT_EQ(root->name, "svg");
  EXPECT_EQ(root->attrs["xmlns"], "http://www.w3.org/2000/svg");
  EXPECT_EQ(root->attrs["viewBox"], "0 0 760 380");
  std::vector<const Element*> titles, polylines, circles, groups, texts;
  root->all("title", titles);
  root->all("polyline", polylines);
  root->all("circle", circles);
  root->all("g", groups);
  root->all("text", texts);
  ASSERT_FALSE(titles.empty());
  EXPECT_EQ(titles[0]->text, c.title);
  // Series 1 breaks at the missing night: one 2-point line and a lone marker; series 2 is one
  // 4-point line; series 3 has a single point and no line.
  ASSERT_EQ(polylines.size(), 2u) << svg;
  EXPECT_EQ(points_of(polylines[0]->attrs.at("points")).size(), 2u);
  EXPECT_EQ(points_of(polylines[1]->attrs.at("points")).size(), 4u);
  EXPECT_EQ(circles.size(), 3u + 4u + 1u);
  for (const auto* pl : polylines)
    for (auto [x, y] : points_of(pl->attrs.at("points"))) {
      EXPECT_GE(x, 0);
      EXPECT_LE(x, 760);
      EXPECT_GE(y, 0);
      EXPECT_LE(y, 380);
    }
  // Higher values are drawn higher: series 2 rises night after night, so y falls.
  const auto rising = points_of(polylines[1]->attrs.at("points"));
  for (size_t i = 1; i < rising.size(); ++i) {
    EXPECT_LT(rising[i].second, rising[i - 1].second);
    EXPECT_GT(rising[i].first, rising[i - 1].first);
  }
  bool legend_escaped = false, label_seen = false;
  for (const auto* t : texts) {
    legend_escaped |= t->text == "backend=<triton> & \"friends\"";
    label_seen |= t->text == "2026-11-27";
  }
  EXPECT_TRUE(legend_escaped);
  EXPECT_TRUE(label_seen);
}

TEST(HistorySvg, EmptyAndFlatChartsStayWellFormed) {
  Chart empty;
  empty.title = "tpot";
  EXPECT_NO_THROW(parse_xml(render_svg(empty)));
  Chart flat;
  flat.title = "flat";
  flat.x_labels = {"a"};
  flat.series = {{"s", {5.0}}};
  EXPECT_NO_THROW(parse_xml(render_svg(flat)));
}

TEST(HistorySvg, NiceTicksCoverTheRange) {
  auto t = nice_ticks(0.9, 0.95);
  ASSERT_GE(t.size(), 2u);
  EXPECT_LE(t.front(), 0.9);
  EXPECT_GE(t.back(), 0.95 - 1e-12);
  EXPECT_NEAR(t[1] - t[0], 0.01, 1e-12);
  t = nice_ticks(0, 1);
  EXPECT_NEAR(t[1] - t[0], 0.2, 1e-12);
  EXPECT_NEAR(t.back(), 1.0, 1e-12);
  t = nice_ticks(12, 12);
  EXPECT_LT(t.front(), 12);
  EXPECT_GT(t.back(), 12);
}

// Writes a night of runs: aiter/mtp and triton/mtp gsm8k and serve-bench reports.
void write_night(const fs::path& dir, double acc_aiter, double acc_triton, double tpot) {
  auto run = [&](const std::string& kind, const std::string& backend, json metrics) {
    json j = {{"suite", kind},
              {"labels", {{"backend", backend}, {"spec", "mtp"}}},
              {"metrics", metrics},
              {"gates", json::array()}};
    fs::create_directories(dir);
    std::ofstream(dir / (backend + "_" + kind + ".json")) << j.dump();
  };
  run("gsm8k", "aiter", {{"accuracy", acc_aiter}, {"accept_length", 3.1}});
  run("gsm8k", "triton", {{"accuracy", acc_triton}, {"accept_length", 2.9}});
  run("serve-bench", "aiter", {{"mean_tpot_ms", tpot}, {"total_throughput", 1000.0}});
}

TEST(History, ChartsFollowTheNightsAndTheCurrentRun) {
  dsv4::e2e_test::TempDir tmp;
  const fs::path root = tmp.path();
  write_night(root / "hist" / "2026-11-27", 0.95, 0.90, 12.0);
  write_night(root / "hist" / "2026-11-26", 0.94, 0.89, 13.0);
  fs::create_directories(root / "hist" / "2026-11-28-empty");
  write_night(root / "now", 0.96, 0.91, 11.0);

  ComparisonOptions o;
  o.group_by = {"backend", "spec"};
  o.columns = columns_by_keys({"accuracy", "tpot"});
  const auto nights = load_history(root / "hist", o, nullptr);
  ASSERT_EQ(nights.size(), 2u);  // the empty night is skipped
  EXPECT_EQ(nights[0].first, "2026-11-26");
  const Comparison now = build_comparison(collect_runs({(root / "now").string()}), o);
  const Chart acc = history_chart(o.columns[0], nights, &now);
  EXPECT_EQ(acc.x_labels, (std::vector<std::string>{"2026-11-26", "2026-11-27", "current"}));
  ASSERT_EQ(acc.series.size(), 2u);
  EXPECT_EQ(acc.series[0].name, "backend=aiter, spec=mtp");
  EXPECT_EQ(acc.series[0].values, (std::vector<std::optional<double>>{0.94, 0.95, 0.96}));
  EXPECT_EQ(acc.series[1].values, (std::vector<std::optional<double>>{0.89, 0.90, 0.91}));
  const Chart tpot = history_chart(o.columns[1], nights, &now);
  ASSERT_EQ(tpot.series.size(), 1u);  // only aiter ran serve-bench
  EXPECT_EQ(tpot.series[0].values, (std::vector<std::optional<double>>{13.0, 12.0, 11.0}));
  // When the current runs already sit in the history folder they are not drawn twice.
  const Comparison again =
      build_comparison(collect_runs({(root / "hist" / "2026-11-27").string()}), o);
  EXPECT_EQ(history_chart(o.columns[0], nights, &again).x_labels.size(), 2u);

  // Through the command: one SVG per charted column, each referenced from the Markdown.
  ASSERT_EQ(dsv4::e2e_test::run_eval({"report", (root / "now").string(), "--group-by",
                                      "backend,spec", "--history", (root / "hist").string(),
                                      "--out", (root / "out").string(), "--quiet"}),
            0);
  std::ifstream mdf(root / "out" / "comparison.md");
  std::stringstream md;
  md << mdf.rdbuf();
  for (const char* col : {"accuracy", "accept_length", "tpot"}) {
    const fs::path svg = root / "out" / (std::string("history_") + col + ".svg");
    ASSERT_TRUE(fs::exists(svg)) << svg;
    std::ifstream f(svg);
    std::stringstream s;
    s << f.rdbuf();
    EXPECT_NO_THROW(parse_xml(s.str())) << svg;
    EXPECT_NE(md.str().find(std::string("(history_") + col + ".svg)"), std::string::npos)
        << md.str();
  }
}

}  // namespace
