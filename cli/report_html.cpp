#include "cli/report_html.h"

#include "cli/status_view.h"
#include "cli/svg.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <tuple>

namespace fednode::cli {
namespace {

const char* kAccuracyColour = "#4e79a7";
const char* kLocalColour = "#f28e2b";
const char* kLinearColour = "#e15759";
const char* kLdaColour = "#59a14f";
const char* kSentColour = "#4e79a7";
const char* kReceivedColour = "#9c755f";
const char* kNullColour = "#bdbdbd";

constexpr double kChartW = 540, kChartH = 300;
constexpr double kLeft = 62, kRight = 12, kTop = 34, kBottom = 42;

std::string value_attr(const std::optional<double>& v) { return v ? exact_text(*v) : "null"; }

// 1, 2 or 5 times a power of ten, so that about `ticks` steps cover `max`.
double nice_step(double max, int ticks) {
  if (max <= 0) return 1;
  const double raw = max / ticks, mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (raw <= m * mag) return m * mag;
  return 10 * mag;
}

// The red-yellow-green scale of the heatmap: 0 red, 0.5 yellow, 1 green.
std::string heat_colour(double v) {
  v = std::clamp(v, 0.0, 1.0);
  struct Stop { double at; int r, g, b; };
  const Stop stops[] = {{0.0, 215, 48, 39}, {0.5, 254, 224, 139}, {1.0, 26, 152, 80}};
  const Stop& a = v <= 0.5 ? stops[0] : stops[1];
  const Stop& b = v <= 0.5 ? stops[1] : stops[2];
  const double t = (v - a.at) / (b.at - a.at);
  char c[8];
  std::snprintf(c, sizeof c, "#%02x%02x%02x", static_cast<int>(std::lround(a.r + t * (b.r - a.r))),
                static_cast<int>(std::lround(a.g + t * (b.g - a.g))), static_cast<int>(std::lround(a.b + t * (b.b - a.b))));
  return c;
}

// Node ids on an x axis: every one while they fit, otherwise every k-th.
size_t label_every(size_t n, double width) {
  const size_t fit = std::max<size_t>(1, static_cast<size_t>(width / 28));
  return n <= fit ? 1 : (n + fit - 1) / fit;
}

// The frame of a chart: y grid with labels from 0 to y_max, the axis titles, a legend on top.
void frame(Svg& svg, double y_max, double step, const std::string& y_title,
           std::string (*y_label)(double), const std::vector<std::pair<std::string, std::string>>& legend,
           const std::string& x_title) {
  const double ph = kChartH - kTop - kBottom;
  for (double y = 0; y <= y_max + step / 1e6; y += step) {
    const double py = kTop + ph * (1 - y / y_max);
    svg.line(kLeft, py, kChartW - kRight, py, y == 0 ? "#666666" : "#e0e0e0");
    svg.text(kLeft - 6, py + 4, y_label(y), {{"text-anchor", "end"}, {"font-size", "10"}});
  }
  svg.text(14, kTop + ph / 2, y_title,
           {{"text-anchor", "middle"}, {"transform", "rotate(-90 14 " + fixed(kTop + ph / 2, 1) + ")"}, {"font-size", "11"}});
  svg.text(kLeft + (kChartW - kLeft - kRight) / 2, kChartH - 6, x_title, {{"text-anchor", "middle"}, {"font-size", "11"}});
  double x = kLeft;
  for (const auto& [name, colour] : legend) {
    svg.rect(x, 10, 11, 11, colour);
    svg.text(x + 15, 20, name, {{"font-size", "11"}});
    x += 22 + 6.5 * static_cast<double>(name.size());
  }
}

std::string accuracy_tick(double y) { return fixed(y, 1); }
std::string bytes_tick(double y) { return short_bytes(y); }

// A horizontal reference line across the plot (a centralised accuracy), named at its right end.
void reference(Svg& svg, double value, double y_max, const std::string& colour, const std::string& name,
               const std::string& id, const std::string& dash) {
  const double ph = kChartH - kTop - kBottom, py = kTop + ph * (1 - value / y_max);
  svg.line(kLeft, py, kChartW - kRight, py, colour,
           {{"stroke-width", "1.5"}, {"stroke-dasharray", dash}, {"class", "reference"}, {"data-reference", id},
            {"data-value", exact_text(value)}, {"title", name + " " + accuracy_text(value)}});
  // LDA's name goes below its line and linear's above, so two close baselines stay legible.
  svg.text(kChartW - kRight - 2, id == "lda" ? py + 11 : py - 3, name + " " + accuracy_text(value),
           {{"text-anchor", "end"}, {"font-size", "10"}, {"fill", colour}});
}

std::string accuracy_chart(const ReportModel& m) {
  Svg svg(kChartW, kChartH, {{"id", "chart-accuracy"}});
  std::vector<std::pair<std::string, std::string>> legend = {{m.sweep ? "federated (mean)" : "federated", kAccuracyColour}};
  const bool local = std::any_of(m.nodes.begin(), m.nodes.end(), [](const ReportNode& n) { return n.local_only.has_value(); });
  if (local) legend.push_back({"local-only", kLocalColour});
  frame(svg, 1.0, 0.2, "test accuracy", accuracy_tick, legend, "node");
  const double pw = kChartW - kLeft - kRight, ph = kChartH - kTop - kBottom;
  const double group = pw / static_cast<double>(std::max<size_t>(1, m.nodes.size()));
  const double bar = std::max(1.0, std::min(24.0, group * (local ? 0.4 : 0.7)));
  const size_t every = label_every(m.nodes.size(), pw);
  for (size_t i = 0; i < m.nodes.size(); ++i) {
    const ReportNode& n = m.nodes[i];
    const double gx = kLeft + group * (static_cast<double>(i) + 0.5);
    const auto draw = [&](const std::optional<double>& v, double x, const char* colour, const char* series) {
      if (!v) return;
      const double h = ph * std::clamp(*v, 0.0, 1.0);
      std::string title = "node " + std::to_string(n.id) + ", " + series + " " + accuracy_text(*v);
      if (n.accuracy_sd && std::string(series) == "federated") title += " (sd " + accuracy_text(*n.accuracy_sd) + ")";
      svg.rect(x, kTop + ph - h, bar, h, colour,
               {{"class", "bar"}, {"data-series", series}, {"data-node", std::to_string(n.id)},
                {"data-value", exact_text(*v)}, {"title", title}});
    };
    draw(n.accuracy, local ? gx - bar : gx - bar / 2, kAccuracyColour, "federated");
    if (local) draw(n.local_only, gx, kLocalColour, "local-only");
    if (n.accuracy && n.accuracy_sd) {  // the spread over the seeds
      const double cx = local ? gx - bar / 2 : gx;
      const double lo = kTop + ph * (1 - std::clamp(*n.accuracy - *n.accuracy_sd, 0.0, 1.0));
      const double hi = kTop + ph * (1 - std::clamp(*n.accuracy + *n.accuracy_sd, 0.0, 1.0));
      svg.line(cx, lo, cx, hi, "#222222", {{"stroke-width", "1"}});
    }
    if (i % every == 0)
      svg.text(gx, kTop + ph + 14, std::to_string(n.id), {{"text-anchor", "middle"}, {"font-size", "10"}});
  }
  if (m.centralized_linear) reference(svg, *m.centralized_linear, 1.0, kLinearColour, "centralised linear", "linear", "6,3");
  if (m.centralized_lda) reference(svg, *m.centralized_lda, 1.0, kLdaColour, "centralised LDA", "lda", "2,3");
  return svg.str();
}

// Accuracy by node id along a linear or ring topology, whose nodes simulate numbers in chain
// order: knowledge accumulates along the x axis.
std::string chain_chart(const ReportModel& m) {
  Svg svg(kChartW, kChartH, {{"id", "chart-chain"}});
  std::vector<std::pair<std::string, std::string>> legend = {{"federated", kAccuracyColour}};
  const bool local = std::any_of(m.nodes.begin(), m.nodes.end(), [](const ReportNode& n) { return n.local_only.has_value(); });
  if (local) legend.push_back({"local-only", kLocalColour});
  frame(svg, 1.0, 0.2, "test accuracy", accuracy_tick, legend, "node along the " + std::string(m.topology == "ring" ? "ring" : "chain"));
  const double pw = kChartW - kLeft - kRight, ph = kChartH - kTop - kBottom;
  const double step = pw / static_cast<double>(std::max<size_t>(1, m.nodes.size()));
  const size_t every = label_every(m.nodes.size(), pw);
  const auto px = [&](size_t i) { return kLeft + step * (static_cast<double>(i) + 0.5); };
  const auto py = [&](double v) { return kTop + ph * (1 - std::clamp(v, 0.0, 1.0)); };
  if (m.centralized_linear) reference(svg, *m.centralized_linear, 1.0, kLinearColour, "centralised linear", "linear", "6,3");
  if (m.centralized_lda) reference(svg, *m.centralized_lda, 1.0, kLdaColour, "centralised LDA", "lda", "2,3");
  for (int pass = local ? 1 : 0; pass >= 0; --pass) {  // local-only first, so the federated line is on top
    const char* colour = pass ? kLocalColour : kAccuracyColour;
    const char* series = pass ? "local-only" : "federated";
    std::vector<std::pair<double, double>> points;
    for (size_t i = 0; i < m.nodes.size(); ++i) {
      const auto& v = pass ? m.nodes[i].local_only : m.nodes[i].accuracy;
      if (v) points.push_back({px(i), py(*v)});
    }
    svg.polyline(points, colour, {{"stroke-width", pass ? "1.5" : "2.5"}, {"class", "line"}, {"data-series", series}});
    for (size_t i = 0; i < m.nodes.size(); ++i) {
      const auto& v = pass ? m.nodes[i].local_only : m.nodes[i].accuracy;
      if (!v) continue;
      svg.circle(px(i), py(*v), pass ? 2.5 : 3.5, colour,
                 {{"class", "point"}, {"data-series", series}, {"data-node", std::to_string(m.nodes[i].id)},
                  {"data-value", exact_text(*v)},
                  {"title", "node " + std::to_string(m.nodes[i].id) + ", " + series + " " + accuracy_text(*v)}});
    }
  }
  for (size_t i = 0; i < m.nodes.size(); i += every)
    svg.text(px(i), kTop + ph + 14, std::to_string(m.nodes[i].id), {{"text-anchor", "middle"}, {"font-size", "10"}});
  return svg.str();
}

std::string bytes_chart(const ReportModel& m) {
  Svg svg(kChartW, kChartH, {{"id", "chart-bytes"}});
  double max = 0;
  for (const auto& n : m.nodes) max = std::max({max, n.bytes_sent.value_or(0), n.bytes_received.value_or(0)});
  const double step = nice_step(max, 5), y_max = max > 0 ? step * std::ceil(max / step) : 1;
  frame(svg, y_max, step, "payload bytes", bytes_tick, {{"sent", kSentColour}, {"received", kReceivedColour}}, "node");
  const double pw = kChartW - kLeft - kRight, ph = kChartH - kTop - kBottom;
  const double group = pw / static_cast<double>(std::max<size_t>(1, m.nodes.size()));
  const double bar = std::max(1.0, std::min(24.0, group * 0.4));
  const size_t every = label_every(m.nodes.size(), pw);
  for (size_t i = 0; i < m.nodes.size(); ++i) {
    const ReportNode& n = m.nodes[i];
    const double gx = kLeft + group * (static_cast<double>(i) + 0.5);
    int k = 0;
    for (const auto& [v, colour, series] : {std::tuple{n.bytes_sent, kSentColour, "sent"},
                                            std::tuple{n.bytes_received, kReceivedColour, "received"}}) {
      const double x = gx - bar + bar * k++;
      if (!v) continue;
      const double h = ph * *v / y_max;
      svg.rect(x, kTop + ph - h, bar, h, colour,
               {{"class", "bar"}, {"data-series", series}, {"data-node", std::to_string(n.id)},
                {"data-value", exact_text(*v)},
                {"title", "node " + std::to_string(n.id) + " " + series + " " + fixed(*v, 0) + " bytes"}});
    }
    if (i % every == 0)
      svg.text(gx, kTop + ph + 14, std::to_string(n.id), {{"text-anchor", "middle"}, {"font-size", "10"}});
  }
  return svg.str();
}

std::string heatmap(const ReportModel& m) {
  size_t classes = static_cast<size_t>(std::max<long>(0, m.num_classes));
  for (const auto& n : m.nodes) classes = std::max(classes, n.per_class.size());
  const size_t rows = m.nodes.size();
  const double left = 56, top = 30, width = 1100;
  const double cw = std::clamp((width - left - 20) / static_cast<double>(std::max<size_t>(classes, 1)), 3.0, 48.0);
  const double ch = std::clamp(640.0 / static_cast<double>(std::max<size_t>(rows, 1)), 3.0, 22.0);
  const double height = top + ch * static_cast<double>(rows) + 60;
  const double used_w = std::max(left + cw * static_cast<double>(classes) + 20, 420.0);
  Svg svg(used_w, height, {{"id", "chart-per-class"}});
  svg.text(left + cw * static_cast<double>(classes) / 2, 14, "class", {{"text-anchor", "middle"}, {"font-size", "11"}});
  const size_t col_every = label_every(classes, cw * static_cast<double>(classes)), row_every = ch >= 11 ? 1 : static_cast<size_t>(std::ceil(11 / ch));
  for (size_t c = 0; c < classes; c += col_every)
    svg.text(left + cw * (static_cast<double>(c) + 0.5), top - 4, std::to_string(c), {{"text-anchor", "middle"}, {"font-size", "10"}});
  const bool numbers = cw >= 34 && ch >= 14;
  for (size_t r = 0; r < rows; ++r) {
    const ReportNode& n = m.nodes[r];
    const double y = top + ch * static_cast<double>(r);
    if (r % row_every == 0)
      svg.text(left - 6, y + ch / 2 + 4, "node " + std::to_string(n.id), {{"text-anchor", "end"}, {"font-size", "10"}});
    for (size_t c = 0; c < classes; ++c) {
      const bool known = c < n.per_class.size() && n.per_class[c].has_value();
      const double value = known ? *n.per_class[c] : 0.0;
      const std::optional<double> v = known ? std::optional<double>(value) : std::nullopt;
      const double x = left + cw * static_cast<double>(c);
      svg.rect(x, y, cw, ch, known ? heat_colour(value) : kNullColour,
               {{"class", "cell"}, {"data-node", std::to_string(n.id)}, {"data-class", std::to_string(c)},
                {"data-value", value_attr(v)}, {"stroke", "#ffffff"}, {"stroke-width", "0.5"},
                {"title", "node " + std::to_string(n.id) + ", class " + std::to_string(c) + ": " +
                              (known ? accuracy_text(value) : "no test sample")}});
      if (numbers && known)
        svg.text(x + cw / 2, y + ch / 2 + 3.5, fixed(value, 2), {{"text-anchor", "middle"}, {"font-size", "9"}});
    }
  }
  // The scale: 0 to 1 in twenty steps, and grey for a class the test split does not have.
  const double sy = top + ch * static_cast<double>(rows) + 18;
  for (int i = 0; i < 20; ++i) svg.rect(left + 12.0 * i, sy, 12, 12, heat_colour((i + 0.5) / 20));
  svg.text(left, sy + 26, "0", {{"font-size", "10"}, {"text-anchor", "middle"}});
  svg.text(left + 120, sy + 26, "0.5", {{"font-size", "10"}, {"text-anchor", "middle"}});
  svg.text(left + 240, sy + 26, "1", {{"font-size", "10"}, {"text-anchor", "middle"}});
  svg.rect(left + 270, sy, 12, 12, kNullColour);
  svg.text(left + 286, sy + 10, "no test sample (null)", {{"font-size", "10"}});
  return svg.str();
}

std::string cell(const std::string& id, const std::optional<double>& v, const std::string& shown) {
  return "<td class=\"num\" id=\"" + id + "\" data-value=\"" + value_attr(v) + "\">" + (v ? shown : "-") + "</td>";
}

std::string nodes_table(const ReportModel& m) {
  std::ostringstream o;
  o << "<table id=\"nodes-table\"><tr><th>node</th>";
  if (!m.sweep) o << "<th>samples</th><th>contributors</th>";
  o << "<th>accuracy" << (m.sweep ? " (mean)" : "") << "</th>";
  if (m.sweep) o << "<th>sd</th>";
  // A privacy column only for a run whose ledger holds private releases (docs/privacy.md).
  const bool private_run =
      std::any_of(m.nodes.begin(), m.nodes.end(), [](const ReportNode& n) { return n.epsilon.has_value(); });
  o << "<th>local-only</th><th>bytes sent" << (m.sweep ? " (mean)" : "") << "</th><th>bytes received</th>"
    << (private_run ? "<th>privacy (epsilon, delta)</th>" : "") << "</tr>\n";
  for (const auto& n : m.nodes) {
    const std::string id = "node-" + std::to_string(n.id);
    o << "<tr data-node=\"" << n.id << "\"><td>" << n.id << "</td>";
    if (!m.sweep) {
      std::vector<long> c(n.contributors.begin(), n.contributors.end());
      o << "<td class=\"num\">" << (n.samples ? std::to_string(*n.samples) : "-") << "</td><td>"
        << xml_escape(compact_ids(c)) << "</td>";
    }
    o << cell(id + "-accuracy", n.accuracy, n.accuracy ? accuracy_text(*n.accuracy) : "");
    if (m.sweep) o << cell(id + "-accuracy-sd", n.accuracy_sd, n.accuracy_sd ? accuracy_text(*n.accuracy_sd) : "");
    o << cell(id + "-local-only", n.local_only, n.local_only ? accuracy_text(*n.local_only) : "");
    o << cell(id + "-bytes-sent", n.bytes_sent, n.bytes_sent ? fixed(*n.bytes_sent, 0) : "");
    o << cell(id + "-bytes-received", n.bytes_received, n.bytes_received ? fixed(*n.bytes_received, 0) : "");
    if (private_run) {
      char text[64] = "not private";
      if (n.epsilon) std::snprintf(text, sizeof text, "%.3g, %.2g", *n.epsilon, n.delta.value_or(0.0));
      o << cell(id + "-epsilon", n.epsilon, text);
    }
    o << "</tr>\n";
  }
  o << "</table>\n";
  return o.str();
}

std::string parameters_table(const ReportModel& m) {
  std::ostringstream o;
  o << "<table id=\"parameters-table\"><tr><th>parameter</th><th>value</th></tr>\n";
  for (const auto& [k, v] : m.parameters)
    o << "<tr><td>" << xml_escape(k) << "</td><td id=\"param-" << xml_escape(k) << "\">" << xml_escape(v) << "</td></tr>\n";
  o << "</table>\n";
  return o.str();
}

std::string summary_value(const std::string& id, const std::optional<double>& v) {
  return "<b id=\"" + id + "\" data-value=\"" + value_attr(v) + "\">" + (v ? accuracy_text(*v) : "not computed") + "</b>";
}

const char* kStyle =
    "body{font-family:sans-serif;margin:18px 24px;color:#222;max-width:1160px}"
    "h1{font-size:20px;margin:0 0 4px}h2{font-size:15px;margin:18px 0 6px}"
    ".note{color:#555;font-size:12px;margin:2px 0 8px}"
    ".row{display:flex;flex-wrap:wrap;gap:16px}.row>section{flex:0 0 auto}"
    "table{border-collapse:collapse;font-size:12px}td,th{border:1px solid #d0d0d0;padding:2px 7px;text-align:left}"
    "th{background:#f3f3f3}td.num{text-align:right;font-variant-numeric:tabular-nums}"
    ".summary{font-size:14px;margin:8px 0}.topology svg{max-width:100%;height:auto}";

}  // namespace

std::string accuracy_text(double accuracy) { return fixed(accuracy, 4); }

std::string exact_text(double value) {
  char b[40];
  std::snprintf(b, sizeof b, "%.17g", value);
  return b;
}

std::string report_html(const ReportModel& m, const std::string& topology_svg, const std::string& drawn_by) {
  std::ostringstream o;
  const std::string what = m.method + " on a " + m.topology + " topology of " + std::to_string(m.node_count) + " nodes";
  std::string seeds;
  if (m.sweep) {
    std::vector<long> s(m.seeds.begin(), m.seeds.end());
    seeds = "seeds " + compact_ids(s);
  } else {
    seeds = "seed " + std::to_string(m.seed);
  }
  o << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>fednode report: "
    << xml_escape(what) << "</title>\n<style>" << kStyle << "</style>\n</head>\n<body>\n";
  o << "<h1>fednode: " << xml_escape(what) << "</h1>\n";
  o << "<p class=\"note\">" << xml_escape(m.source) << ", "
    << (m.sweep ? "a seed sweep (fednode simulate --seeds): means over " : "fednode simulate, ") << xml_escape(seeds)
    << ". Hover a bar or cell for its value; the tables below hold every number.</p>\n";
  o << "<p class=\"summary\" id=\"summary\">centralised linear " << summary_value("centralized-linear", m.centralized_linear)
    << " &middot; centralised LDA " << summary_value("centralized-lda", m.centralized_lda) << " &middot; local-only mean "
    << summary_value("local-only-mean", m.local_only_mean) << "</p>\n";

  o << "<div class=\"row\">\n<section id=\"accuracy\"><h2>Accuracy per node</h2>\n" << accuracy_chart(m) << "</section>\n";
  o << "<section id=\"chain\"><h2>Accuracy along the " << (m.topology == "ring" ? "ring" : "chain") << "</h2>\n";
  if (m.topology == "linear" || m.topology == "ring") o << chain_chart(m);
  else
    o << "<p class=\"note\">Only for linear and ring topologies, where knowledge accumulates from node to node; this "
         "is a "
      << xml_escape(m.topology) << ".</p>\n";
  o << "</section>\n</div>\n";

  o << "<div class=\"row\">\n<section id=\"bytes\"><h2>Bytes per node" << (m.sweep ? " (mean over the seeds)" : "")
    << "</h2>\n" << bytes_chart(m) << "</section>\n";
  o << "<section id=\"per-class\"><h2>Per-class accuracy" << (m.sweep ? " (mean over the seeds)" : "") << "</h2>\n"
    << heatmap(m) << "</section>\n</div>\n";
  o << "<section id=\"topology\" class=\"topology\"><h2>Topology</h2>\n";
  if (topology_svg.empty()) o << "<p class=\"note\">" << xml_escape(drawn_by.empty() ? "not drawn" : drawn_by) << "</p>\n";
  else o << topology_svg << "<p class=\"note\">" << xml_escape(drawn_by) << "</p>\n";
  o << "</section>\n";
  o << "<section id=\"nodes\"><h2>Nodes</h2>\n" << nodes_table(m) << "</section>\n";
  o << "<section id=\"parameters\"><h2>Parameters</h2>\n" << parameters_table(m) << "</section>\n";
  o << "</body>\n</html>\n";
  return o.str();
}

}  // namespace fednode::cli
