#include "cli/svg.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace fednode::cli {
namespace {

// Coordinates to a tenth of a pixel: enough for a screen, and the files stay small.
std::string num(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f", std::fabs(v) < 0.05 ? 0.0 : v);
  return b;
}

std::string attributes(const SvgAttrs& attrs, std::string& title) {
  std::string s;
  for (const auto& [k, v] : attrs) {
    if (k == "title") title = v;
    else s += " " + k + "=\"" + xml_escape(v) + "\"";
  }
  return s;
}

}  // namespace

std::string xml_escape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string fixed(double value, int decimals) {
  char b[64];
  std::snprintf(b, sizeof b, "%.*f", decimals, value);
  return b;
}

std::string short_bytes(double bytes) {
  const char* units[] = {"B", "KB", "MB", "GB", "TB"};
  int u = 0;
  while (std::fabs(bytes) >= 1000 && u < 4) {
    bytes /= 1000;
    ++u;
  }
  return (u == 0 || bytes >= 100 ? fixed(bytes, 0) : fixed(bytes, bytes >= 10 ? 0 : 1)) + " " + units[u];
}

Svg::Svg(double width, double height, const SvgAttrs& attrs) {
  std::string title;
  head_ = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(width) + "\" height=\"" + num(height) +
          "\" viewBox=\"0 0 " + num(width) + " " + num(height) + "\" font-family=\"sans-serif\" font-size=\"12\"" +
          attributes(attrs, title) + ">\n";
  if (!title.empty()) head_ += "<title>" + xml_escape(title) + "</title>\n";
}

void Svg::element(const std::string& name, const std::string& geometry, const SvgAttrs& attrs) {
  std::string title;
  const std::string rest = attributes(attrs, title);
  body_ += "<" + name + geometry + rest;
  body_ += title.empty() ? "/>\n" : "><title>" + xml_escape(title) + "</title></" + name + ">\n";
}

void Svg::rect(double x, double y, double w, double h, const std::string& fill, const SvgAttrs& attrs) {
  element("rect", " x=\"" + num(x) + "\" y=\"" + num(y) + "\" width=\"" + num(std::max(w, 0.0)) + "\" height=\"" +
                      num(std::max(h, 0.0)) + "\" fill=\"" + xml_escape(fill) + "\"",
          attrs);
}

void Svg::line(double x1, double y1, double x2, double y2, const std::string& stroke, const SvgAttrs& attrs) {
  element("line", " x1=\"" + num(x1) + "\" y1=\"" + num(y1) + "\" x2=\"" + num(x2) + "\" y2=\"" + num(y2) +
                      "\" stroke=\"" + xml_escape(stroke) + "\"",
          attrs);
}

void Svg::polyline(const std::vector<std::pair<double, double>>& points, const std::string& stroke,
                   const SvgAttrs& attrs) {
  std::string p;
  for (const auto& [x, y] : points) p += (p.empty() ? "" : " ") + num(x) + "," + num(y);
  element("polyline", " points=\"" + p + "\" fill=\"none\" stroke=\"" + xml_escape(stroke) + "\"", attrs);
}

void Svg::circle(double cx, double cy, double r, const std::string& fill, const SvgAttrs& attrs) {
  element("circle", " cx=\"" + num(cx) + "\" cy=\"" + num(cy) + "\" r=\"" + num(r) + "\" fill=\"" + xml_escape(fill) + "\"",
          attrs);
}

void Svg::text(double x, double y, const std::string& text, const SvgAttrs& attrs) {
  std::string title;
  body_ += "<text x=\"" + num(x) + "\" y=\"" + num(y) + "\"" + attributes(attrs, title) + ">" + xml_escape(text);
  if (!title.empty()) body_ += "<title>" + xml_escape(title) + "</title>";
  body_ += "</text>\n";
}

void Svg::begin_group(const SvgAttrs& attrs) {
  std::string title;
  body_ += "<g" + attributes(attrs, title) + ">\n";
  if (!title.empty()) body_ += "<title>" + xml_escape(title) + "</title>\n";
  ++open_groups_;
}

void Svg::end_group() {
  if (open_groups_ == 0) return;
  body_ += "</g>\n";
  --open_groups_;
}

void Svg::arrow_marker(const std::string& id, const std::string& colour) {
  head_ += "<defs><marker id=\"" + xml_escape(id) +
           "\" viewBox=\"0 0 10 10\" refX=\"10\" refY=\"5\" markerWidth=\"8\" markerHeight=\"8\" "
           "orient=\"auto-start-reverse\"><path d=\"M0,0 L10,5 L0,10 z\" fill=\"" +
           xml_escape(colour) + "\"/></marker></defs>\n";
}

std::string Svg::str() const {
  std::string s = head_ + body_;
  for (int i = 0; i < open_groups_; ++i) s += "</g>\n";
  return s + "</svg>\n";
}

}  // namespace fednode::cli
