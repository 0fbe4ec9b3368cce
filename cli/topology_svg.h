// A topology picture laid out by fednode itself, as inline SVG: the report's drawing when
// Graphviz is not installed. A chain snakes in rows, a ring is a circle, a star has its hub in
// the middle, and a graph is drawn in columns by depth (the longest path from a source).
#pragma once

#include "cli/topology_picture.h"

#include <string>

namespace fednode::cli {

// Above this many nodes the drawing is one line of text saying so: boxes would not be legible.
constexpr size_t kMaxDrawnNodes = 120;

// Every node is a <g class="topology-node" data-node="ID" data-state="...">, every edge a
// <line class="topology-edge" data-from=... data-to=...>.
std::string topology_svg(const TopologyPicture& picture);

}  // namespace fednode::cli
