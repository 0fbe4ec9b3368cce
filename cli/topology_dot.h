// A topology picture (topology_picture.h) as Graphviz DOT text, and that text laid out by
// Graphviz's `dot` program as SVG when it is installed (Debian package graphviz). fednode does
// not link Graphviz: the program is optional, and only `--svg` and the report's drawing use it.
#pragma once

#include "cli/topology_picture.h"

#include <string>

namespace fednode::cli {

// Every node as a statement "<id>" [label=...], every edge as "<from>" -> "<to>": quoted ids, so
// a script can find them.
std::string to_dot(const TopologyPicture& picture);

// The full path of `program` found on PATH, or "" when it is not there.
std::string find_program(const std::string& program);

// `dot -Tsvg` of `dot_text`. Throws InputError naming the missing program (and the Debian
// package that has it) when `dot` is not installed, or with dot's own message when it fails.
std::string graphviz_svg(const std::string& dot_text);

}  // namespace fednode::cli
