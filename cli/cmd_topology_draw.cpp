// fednode topology FILE --dot|--svg: draws an existing topology file, its nodes coloured by the
// state their state directories show (docs/cli.md, "Pictures"). `fednode topology MODE ...`
// (cmd_topology.cpp) writes files; the first word tells the two apart: one of the four mode
// names is a mode, anything else a file (./ring draws a file named ring).
#include "cli/commands.h"
#include "cli/output_path.h"
#include "cli/status_view.h"
#include "cli/topology_dot.h"
#include "cli/topology_picture.h"
#include "core/options.h"

#include <filesystem>
#include <fstream>
#include <iostream>

namespace fednode::cli {
namespace {

const char* kDrawHelp =
    "usage: fednode topology FILE --dot|--svg [--out F]\n"
    "draws the topology FILE: every node with its name, id and address, every edge (a star's\n"
    "head going back to its leaves dashed, graph feedback edges dashed). When the nodes' state\n"
    "directories exist on this machine, nodes are coloured by state (done, running, failed, not\n"
    "started) and labelled with their accuracy and bytes, as `fednode status` reads them.\n"
    "  --dot      Graphviz DOT text\n"
    "  --svg      SVG, laid out by Graphviz's dot program (Debian: graphviz), which must be installed\n"
    "  --out F    where to write (default: stdout); an existing file is replaced\n";

}  // namespace

bool is_topology_mode_word(const std::string& word) {
  return word == "linear" || word == "ring" || word == "star" || word == "graph";
}

int cmd_topology_draw(const std::vector<std::string>& argv) {
  std::vector<std::string> rest;
  const std::string file = split_positional(argv, {"--out"}, rest);
  const Args a(rest, {"out"}, {"dot", "svg"});
  if (a.help()) {
    std::cout << kDrawHelp;
    return 0;
  }
  if (file.empty()) throw UsageError("give the topology file to draw: fednode topology FILE --dot");
  if (a.flag("dot") == a.flag("svg")) throw UsageError("give one of --dot or --svg");
  const std::string out = output_path_option(a, "out");
  LoadOptions o;
  o.require_keys = false;  // a drawing needs the nodes and edges, not the keys
  const Topology t = load_topology(file, o);
  const std::string title = std::filesystem::path(file).filename().string() + ": " + to_string(t.federation.mode) +
                            ", " + t.federation.method + ", " + std::to_string(t.nodes.size()) + " nodes";
  TopologyPicture picture = picture_of(t, title);
  add_states(picture, t, read_node_views(t));
  const std::string dot = to_dot(picture);
  const std::string text = a.flag("svg") ? graphviz_svg(dot) : dot;
  if (out.empty()) {
    std::cout << text << std::flush;
    return 0;
  }
  std::ofstream f(out, std::ios::binary | std::ios::trunc);
  f << text;
  f.close();
  if (!f) throw InputError("cannot write " + out);
  std::cerr << "wrote " << out << (picture.has_state ? " (nodes coloured by state)" : "") << "\n";
  return 0;
}

}  // namespace fednode::cli
