// A tiny SVG writer for the pictures fednode draws itself (fednode report --html, the topology
// drawing): the page must be one self-contained file that needs no plotting tool, no script and
// no web server, so the few shapes it uses are written here.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace fednode::cli {

// Extra attributes of an element, in order: ids and data- attributes let tests find a number,
// style and anchors place it. The name "title" is not an attribute: it becomes a <title> child,
// the tooltip a browser shows on hover without any script.
using SvgAttrs = std::vector<std::pair<std::string, std::string>>;

// Text made safe inside XML or HTML text and attribute values.
std::string xml_escape(const std::string& text);
// `value` with `decimals` digits after the point ("0.8090"): the form every number on the page takes.
std::string fixed(double value, int decimals);
// 1536 -> "1.5 KB": axis labels (1 KB = 1000 bytes, as the byte counts in the tables).
std::string short_bytes(double bytes);

class Svg {
 public:
  Svg(double width, double height, const SvgAttrs& attrs = {});

  void rect(double x, double y, double w, double h, const std::string& fill, const SvgAttrs& attrs = {});
  void line(double x1, double y1, double x2, double y2, const std::string& stroke, const SvgAttrs& attrs = {});
  void polyline(const std::vector<std::pair<double, double>>& points, const std::string& stroke,
                const SvgAttrs& attrs = {});
  void circle(double cx, double cy, double r, const std::string& fill, const SvgAttrs& attrs = {});
  void text(double x, double y, const std::string& text, const SvgAttrs& attrs = {});
  void begin_group(const SvgAttrs& attrs);
  void end_group();
  // An arrowhead marker named `id` (for marker-end="url(#id)"), drawn in `colour`.
  void arrow_marker(const std::string& id, const std::string& colour);

  std::string str() const;  // the <svg> element, closed

 private:
  void element(const std::string& name, const std::string& geometry, const SvgAttrs& attrs);
  std::string head_, body_;
  int open_groups_ = 0;
};

}  // namespace fednode::cli
