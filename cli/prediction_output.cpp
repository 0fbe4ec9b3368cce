#include "cli/prediction_output.h"

#include "cli/report_html.h"
#include "cli/svg.h"
#include "core/json_writer.h"
#include "node/durable_file.h"

#include <algorithm>
#include <cstdio>
#include <iomanip>
#include <filesystem>
#include <numeric>
#include <sstream>

namespace fednode::cli {
namespace {

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char ch : s) q += ch == '"' ? std::string("\"\"") : std::string(1, ch);
  return q + "\"";
}

// Row i's `top` most probable classes, most probable first (ties: the lower label).
std::vector<int> ranked(const Classification& c, Eigen::Index i, int top) {
  std::vector<int> order(static_cast<size_t>(c.probabilities.cols()));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return c.logits(i, a) > c.logits(i, b); });
  order.resize(static_cast<size_t>(top));
  return order;
}

std::string probability_text(float p) {
  std::ostringstream s;
  s.precision(6);
  s << p;
  return s.str();
}

}  // namespace

static std::string logit_text(float v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.9g", static_cast<double>(v));  // float32 round trip
  return text;
}

std::string predictions_csv(const Predictions& p, const HeadCard& card, int top, bool logits) {
  std::ostringstream o;
  o << "item";
  for (int k = 1; k <= top; ++k) {
    const std::string suffix = k == 1 ? "" : "_" + std::to_string(k);
    o << ",label" << suffix << ",class" << suffix << ",probability" << suffix;
  }
  if (!p.truth.empty()) o << ",true_label,true_class";
  if (logits)
    for (Eigen::Index k = 0; k < p.classification.logits.cols(); ++k) o << ",logit_" << k;
  o << "\n";
  const Classification& c = p.classification;
  for (size_t i = 0; i < p.items.size(); ++i) {
    o << csv_field(p.items[i]);
    for (int label : ranked(c, static_cast<Eigen::Index>(i), top))
      o << "," << label << "," << csv_field(card.class_name(label)) << ","
        << probability_text(c.probabilities(static_cast<Eigen::Index>(i), label));
    if (!p.truth.empty()) o << "," << p.truth[i] << "," << csv_field(card.class_name(p.truth[i]));
    if (logits)
      for (Eigen::Index k = 0; k < c.logits.cols(); ++k) o << "," << logit_text(c.logits(static_cast<Eigen::Index>(i), k));
    o << "\n";
  }
  return o.str();
}

std::string predictions_json(const Predictions& p, const Evaluation& e, const Classifier& classifier,
                             const std::string& head_file, int top, bool logits) {
  const HeadCard& card = classifier.card();
  std::ostringstream s;
  JsonWriter w(s);
  w.begin_object();
  w.key("head").begin_object();
  w.key("file").value(head_file);
  w.key("kind").value(classifier.head().kind());
  w.key("method").value(card.method);
  w.key("node").value(card.node);
  w.key("fingerprint").value(classifier.version() >= 2 ? card.recipe.fingerprint() : std::string("unknown"));
  w.key("class_names").begin_array();
  for (int c = 0; c < classifier.head().num_classes(); ++c) w.value(card.class_name(c));
  w.end_array();
  w.end_object();
  w.key("data").value(p.description);
  w.key("skipped").begin_array();
  for (const auto& why : p.skipped) w.value(why);
  w.end_array();
  w.key("predictions").begin_array();
  const Classification& c = p.classification;
  for (size_t i = 0; i < p.items.size(); ++i) {
    w.begin_object();
    w.key("item").value(p.items[i]);
    w.key("top").begin_array();
    for (int label : ranked(c, static_cast<Eigen::Index>(i), top)) {
      w.begin_object();
      w.key("label").value(label);
      w.key("class").value(card.class_name(label));
      w.key("probability").value(static_cast<double>(c.probabilities(static_cast<Eigen::Index>(i), label)));
      w.end_object();
    }
    w.end_array();
    if (!p.truth.empty()) w.key("true_label").value(p.truth[i]);
    if (logits) {
      w.key("logits").begin_array();
      for (Eigen::Index k = 0; k < c.logits.cols(); ++k)
        w.value(static_cast<double>(c.logits(static_cast<Eigen::Index>(i), k)));
      w.end_array();
    }
    w.end_object();
  }
  w.end_array();
  if (!p.truth.empty()) {
    w.key("samples").value(e.total);
    w.key("correct").value(e.correct);
    w.key("accuracy").value(e.accuracy());
    w.key("per_class").begin_array();
    for (size_t k = 0; k < e.per_class.size(); ++k) {
      w.begin_object();
      w.key("label").value(static_cast<int64_t>(k));
      w.key("class").value(card.class_name(static_cast<int>(k)));
      w.key("samples").value(e.per_class[k].total);
      w.key("correct").value(e.per_class[k].correct);
      w.key("accuracy").value(e.per_class[k].value());
      w.end_object();
    }
    w.end_array();
    w.key("confusion").begin_array();
    for (const auto& row : e.confusion) {
      w.begin_array();
      for (int64_t v : row) w.value(v);
      w.end_array();
    }
    w.end_array();
  }
  w.end_object();
  s << "\n";
  return s.str();
}

std::string summary_text(const Evaluation& e, const HeadCard& card) {
  std::ostringstream o;
  o << "accuracy " << accuracy_text(e.accuracy()) << " (" << e.correct << " of " << e.total << ")\n";
  size_t width = 5;
  for (size_t k = 0; k < e.per_class.size(); ++k) width = std::max(width, card.class_name(static_cast<int>(k)).size());
  for (size_t k = 0; k < e.per_class.size(); ++k) {
    if (e.per_class[k].total == 0) continue;
    std::string name = card.class_name(static_cast<int>(k));
    name.resize(width, ' ');
    o << "  " << name << "  " << accuracy_text(e.per_class[k].value()) << " (" << e.per_class[k].correct << " of "
      << e.per_class[k].total << ")\n";
  }
  o << "confusion (rows: true label, columns: predicted)\n";
  for (const auto& row : e.confusion) {
    o << " ";
    for (int64_t v : row) o << " " << std::setw(5) << v;
    o << "\n";
  }
  return o.str();
}

void write_prediction_html(const std::string& dir, const Predictions& p, const Evaluation& e, const Classifier& c,
                           const std::string& head_file) {
  const HeadCard& card = c.card();
  const int classes = c.head().num_classes();
  std::ostringstream o;
  o << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>fednode predict</title>\n"
    << "<style>body{font-family:sans-serif;margin:2em;color:#222}table{border-collapse:collapse}"
       "td,th{padding:2px 6px;text-align:right;font-size:12px}th{background:#eee}.bar{background:#3b6ea8;height:10px}"
       ".note{color:#666;font-size:12px}</style>\n</head>\n<body>\n";
  o << "<h1>fednode predict</h1>\n<p class=\"note\">" << xml_escape(head_file) << " (" << xml_escape(c.head().kind())
    << (card.method.empty() ? "" : ", " + xml_escape(card.method)) << (card.node.empty() ? "" : ", " + xml_escape(card.node))
    << ") on " << xml_escape(p.description) << "</p>\n";
  o << "<p>accuracy <b id=\"accuracy\" data-value=\"" << exact_text(e.accuracy()) << "\">" << accuracy_text(e.accuracy())
    << "</b> (" << e.correct << " of " << e.total << ")</p>\n";
  o << "<h2>Per class</h2>\n<table>\n<tr><th>class</th><th>samples</th><th>accuracy</th><th></th></tr>\n";
  for (int k = 0; k < classes; ++k) {
    const ClassAccuracy& a = e.per_class[static_cast<size_t>(k)];
    o << "<tr><td>" << xml_escape(card.class_name(k)) << "</td><td>" << a.total << "</td><td id=\"class-" << k
      << "-accuracy\" data-value=\"" << exact_text(a.value()) << "\">" << (a.total ? accuracy_text(a.value()) : "-")
      << "</td><td><div class=\"bar\" style=\"width:" << static_cast<int>(200 * a.value()) << "px\"></div></td></tr>\n";
  }
  o << "</table>\n<h2>Confusion matrix</h2>\n<p class=\"note\">rows: true class; columns: predicted class</p>\n<table>\n<tr><th></th>";
  for (int k = 0; k < classes; ++k) o << "<th>" << xml_escape(card.class_name(k)) << "</th>";
  o << "</tr>\n";
  for (int t = 0; t < classes; ++t) {
    const int64_t row_total = e.per_class[static_cast<size_t>(t)].total;
    o << "<tr><th>" << xml_escape(card.class_name(t)) << "</th>";
    for (int k = 0; k < classes; ++k) {
      const int64_t v = e.confusion[static_cast<size_t>(t)][static_cast<size_t>(k)];
      const double share = row_total ? static_cast<double>(v) / static_cast<double>(row_total) : 0.0;
      const int light = 255 - static_cast<int>(std::lround(160 * share));
      o << "<td id=\"confusion-" << t << "-" << k << "\" data-value=\"" << v << "\" style=\"background:rgb(" << light << ","
        << light << ",255)\">" << v << "</td>";
    }
    o << "</tr>\n";
  }
  o << "</table>\n</body>\n</html>\n";
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw InputError("--html " + dir + ": cannot create the folder: " + ec.message());
  replace_file_at_once((std::filesystem::path(dir) / "index.html").string(), o.str());
}

}  // namespace fednode::cli
