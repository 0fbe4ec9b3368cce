#include "cli/topology_svg.h"

#include "cli/svg.h"

#include <algorithm>
#include <cmath>
#include <map>

namespace fednode::cli {
namespace {

constexpr double kBoxW = 150, kLineH = 14, kPad = 8, kMargin = 30;
constexpr size_t kChainRow = 6;  // nodes per row of a chain

struct Place {
  double x = 0, y = 0;  // centre
};

double box_height(const PictureNode& n) { return kPad + kLineH * static_cast<double>(n.lines.size()) + kPad / 2; }

// The ids in the order knowledge passes them: from `first` along the (single) outgoing edges.
std::vector<NodeId> along_edges(const TopologyPicture& p, NodeId first) {
  std::map<NodeId, NodeId> next;
  for (const auto& e : p.edges)
    if (!e.implied && !e.feedback) next.emplace(e.from, e.to);
  std::vector<NodeId> order = {first};
  while (order.size() < p.nodes.size()) {
    const auto it = next.find(order.back());
    if (it == next.end() || std::find(order.begin(), order.end(), it->second) != order.end()) break;
    order.push_back(it->second);
  }
  for (const auto& n : p.nodes)  // anything the walk missed still gets a place
    if (std::find(order.begin(), order.end(), n.id) == order.end()) order.push_back(n.id);
  return order;
}

NodeId chain_head(const TopologyPicture& p) {
  std::map<NodeId, int> indegree;
  for (const auto& e : p.edges)
    if (!e.implied && !e.feedback) ++indegree[e.to];
  for (const auto& n : p.nodes)
    if (!indegree.count(n.id)) return n.id;
  return p.nodes.front().id;
}

// Longest path from a source over ordinary edges (a DAG in graph mode; a cycle is cut where the
// walk would come back).
std::map<NodeId, int> depths(const TopologyPicture& p) {
  std::map<NodeId, int> depth;
  for (const auto& n : p.nodes) depth[n.id] = 0;
  for (size_t round = 0; round < p.nodes.size(); ++round) {
    bool changed = false;
    for (const auto& e : p.edges) {
      if (e.implied || e.feedback) continue;
      if (depth[e.to] < depth[e.from] + 1 && depth[e.from] + 1 < static_cast<int>(p.nodes.size())) {
        depth[e.to] = depth[e.from] + 1;
        changed = true;
      }
    }
    if (!changed) break;
  }
  return depth;
}

// Where a segment from the centre of a box towards (dx, dy) leaves the box.
std::pair<double, double> border(const Place& c, double hw, double hh, double dx, double dy) {
  const double tx = dx == 0 ? 1e9 : hw / std::fabs(dx), ty = dy == 0 ? 1e9 : hh / std::fabs(dy);
  const double t = std::min(tx, ty);
  return {c.x + dx * t, c.y + dy * t};
}

}  // namespace

std::string topology_svg(const TopologyPicture& p) {
  if (p.nodes.empty() || p.nodes.size() > kMaxDrawnNodes) {
    Svg svg(600, 40, {{"class", "topology"}});
    svg.text(10, 25, p.title + ": " + std::to_string(p.nodes.size()) + " nodes, too many to draw legibly (at most " +
                         std::to_string(kMaxDrawnNodes) + ")");
    return svg.str();
  }
  double max_h = 0;
  for (const auto& n : p.nodes) max_h = std::max(max_h, box_height(n));
  const double cell_w = kBoxW + 50, cell_h = max_h + 36;
  std::map<NodeId, Place> at;
  double width = 0, height = 0;
  const double top = kMargin + 10;  // below the title
  if (p.mode == TopologyMode::Ring || p.mode == TopologyMode::Star) {
    std::vector<NodeId> around;
    if (p.mode == TopologyMode::Ring) around = along_edges(p, p.start.value_or(p.nodes.front().id));
    else
      for (const auto& n : p.nodes)
        if (!p.hub || n.id != *p.hub) around.push_back(n.id);
    const double k = static_cast<double>(around.size());
    // Neighbouring boxes on the circle must not overlap: the circumference holds them all.
    const double r = std::max(cell_h * 1.2, k * (kBoxW + 60) / (2 * M_PI));
    width = 2 * r + kBoxW + 2 * kMargin;
    height = 2 * r + max_h + 2 * kMargin + top;
    const Place centre{width / 2, top + max_h / 2 + kMargin + r};
    if (p.hub) at[*p.hub] = centre;
    for (size_t i = 0; i < around.size(); ++i) {
      const double a = -M_PI / 2 + 2 * M_PI * static_cast<double>(i) / k;
      at[around[i]] = {centre.x + r * std::cos(a), centre.y + r * std::sin(a)};
    }
  } else if (p.mode == TopologyMode::Linear) {
    const std::vector<NodeId> order = along_edges(p, chain_head(p));
    const size_t cols = std::min(order.size(), kChainRow);
    const size_t rows = (order.size() + kChainRow - 1) / kChainRow;
    for (size_t i = 0; i < order.size(); ++i) {
      const size_t row = i / kChainRow, col = row % 2 == 0 ? i % kChainRow : kChainRow - 1 - i % kChainRow;
      at[order[i]] = {kMargin + cell_w * (static_cast<double>(col) + 0.5), top + cell_h * (static_cast<double>(row) + 0.5)};
    }
    width = 2 * kMargin + cell_w * static_cast<double>(cols);
    height = top + cell_h * static_cast<double>(rows) + kMargin;
  } else {
    const auto depth = depths(p);
    std::map<int, int> in_column;
    int columns = 0, tallest = 0;
    for (const auto& n : p.nodes) {
      const int c = depth.at(n.id), row = in_column[c]++;
      at[n.id] = {kMargin + cell_w * (c + 0.5), top + cell_h * (row + 0.5)};
      columns = std::max(columns, c + 1);
      tallest = std::max(tallest, row + 1);
    }
    // Centre each column vertically.
    for (const auto& n : p.nodes) at[n.id].y += cell_h * (tallest - in_column[depth.at(n.id)]) / 2.0;
    width = 2 * kMargin + cell_w * columns;
    height = top + cell_h * tallest + kMargin;
  }

  Svg svg(width, height, {{"class", "topology"}, {"data-mode", to_string(p.mode)}});
  svg.arrow_marker("arrow", "#333333");
  svg.arrow_marker("arrow-implied", "#888888");
  svg.text(width / 2, 20, p.title, {{"text-anchor", "middle"}, {"font-weight", "bold"}});
  std::map<NodeId, double> half_h;
  for (const auto& n : p.nodes) half_h[n.id] = box_height(n) / 2;
  for (const auto& e : p.edges) {
    if (!at.count(e.from) || !at.count(e.to)) continue;
    const Place a = at[e.from], b = at[e.to];
    double dx = b.x - a.x, dy = b.y - a.y;
    // An implied head and the edge it answers would overlap: the head runs a little beside it.
    double ox = 0, oy = 0;
    if (e.implied) {
      const double len = std::hypot(dx, dy);
      ox = -dy / len * 8;
      oy = dx / len * 8;
    }
    const auto [x1, y1] = border({a.x + ox, a.y + oy}, kBoxW / 2 + 2, half_h[e.from] + 2, dx, dy);
    const auto [x2, y2] = border({b.x + ox, b.y + oy}, kBoxW / 2 + 2, half_h[e.to] + 2, -dx, -dy);
    SvgAttrs attrs = {{"class", "topology-edge"}, {"data-from", std::to_string(e.from)},
                      {"data-to", std::to_string(e.to)}, {"stroke-width", "1.5"}};
    if (e.implied || e.feedback) attrs.push_back({"stroke-dasharray", "5,4"});
    attrs.push_back({"marker-end", e.implied ? "url(#arrow-implied)" : "url(#arrow)"});
    if (!e.label.empty()) attrs.push_back({"title", e.label});
    if (e.bytes_sent >= 0) attrs.push_back({"data-bytes-sent", std::to_string(e.bytes_sent)});
    svg.line(x1, y1, x2, y2, e.implied ? "#888888" : "#333333", attrs);
    if (!e.label.empty() && !e.implied)
      svg.text((x1 + x2) / 2 + 4, (y1 + y2) / 2 - 4, e.label, {{"font-size", "10"}, {"fill", "#555555"}});
  }
  for (const auto& n : p.nodes) {
    const Place c = at[n.id];
    const double h = box_height(n);
    SvgAttrs g = {{"class", "topology-node"}, {"data-node", std::to_string(n.id)}};
    if (!n.state.empty()) g.push_back({"data-state", n.state_class});
    svg.begin_group(g);
    svg.rect(c.x - kBoxW / 2, c.y - h / 2, kBoxW, h, state_colour(n.state_class),
             {{"rx", "6"}, {"stroke", "#333333"}, {"stroke-width", n.state.empty() ? "1" : "1.2"}});
    for (size_t i = 0; i < n.lines.size(); ++i)
      svg.text(c.x, c.y - h / 2 + kPad + kLineH * (static_cast<double>(i) + 0.75), n.lines[i],
               {{"text-anchor", "middle"}, {"font-size", i == 0 ? "12" : "10"}, {"font-weight", i == 0 ? "bold" : "normal"}});
    svg.end_group();
  }
  if (p.has_state) {
    double x = 10;
    for (const char* s : {"done", "running", "failed", "not started"}) {
      svg.rect(x, height - 18, 12, 12, state_colour(s), {{"stroke", "#333333"}});
      svg.text(x + 16, height - 8, s, {{"font-size", "10"}});
      x += 90;
    }
  }
  return svg.str();
}

}  // namespace fednode::cli
