// fednode report REPORT.json --html DIR: a simulate report (or a seed sweep's) as one
// self-contained HTML page, DIR/index.html (docs/cli.md, "fednode report").
#include "cli/commands.h"
#include "cli/report_html.h"
#include "cli/report_model.h"
#include "cli/topology_dot.h"
#include "cli/topology_picture.h"
#include "cli/topology_svg.h"
#include "core/options.h"
#include "core/types.h"
#include "topology/builders.h"

#include <filesystem>
#include <fstream>
#include <iostream>

#include <unistd.h>

namespace fednode::cli {
namespace {

namespace fs = std::filesystem;

const char* kHelp =
    "usage: fednode report REPORT.json --html DIR [--layout auto|fednode|graphviz]\n"
    "  Draws a report of `fednode simulate --report` (or of --seeds: the means over the seeds)\n"
    "  as one self-contained HTML page, DIR/index.html: accuracy per node against the centralised\n"
    "  heads and local-only training, accuracy along a chain or ring, bytes per node, per-class\n"
    "  accuracy as a heatmap, the topology, the parameters. Inline SVG, no script, no other file:\n"
    "  open it in any browser. DIR is created if needed; an index.html in it is replaced.\n"
    "  --html DIR   where to write the page\n"
    "  --layout L   who lays out the topology: graphviz (its dot program, Debian: graphviz),\n"
    "               fednode (its own layout), or auto (default): graphviz when installed\n";

// The federation simulate ran, rebuilt from the report as simulate built it (the same builder,
// mode, node count and seed: a graph's random DAG comes out the same), labelled with results.
TopologyPicture report_picture(const ReportModel& m) {
  TopologyBuildOptions b;
  b.mode = parse_topology_mode(m.topology);
  b.nodes = static_cast<int>(m.node_count);
  b.seed = m.seed;
  b.method = m.method;
  const Topology t = build_topology(b);
  TopologyPicture p = picture_of(t, m.topology + " of " + std::to_string(m.node_count) + " nodes" +
                                        (m.topology == "graph" ? ", seed " + std::to_string(m.seed) : ""));
  for (PictureNode& n : p.nodes) {
    n.lines = {"node " + std::to_string(n.id) + (t.federation.hub && *t.federation.hub == n.id ? " (hub)" : "")};
    for (const ReportNode& r : m.nodes)
      if (r.id == static_cast<long>(n.id) && r.accuracy)
        n.lines.push_back(std::string(m.sweep ? "mean " : "") + "accuracy " + accuracy_text(*r.accuracy));
  }
  return p;
}

}  // namespace

int cmd_report(const std::vector<std::string>& argv) {
  std::vector<std::string> rest;
  const std::string file = split_positional(argv, {"--html", "--layout"}, rest);
  const Args a(rest, {"html", "layout"}, {});
  if (a.help()) {
    std::cout << kHelp;
    return 0;
  }
  if (file.empty()) throw UsageError("give the report file to draw: fednode report REPORT.json --html DIR");
  if (!a.has("html")) throw UsageError("missing --html DIR: where to write the page");
  const std::string dir = a.str("html", "");
  if (dir.empty()) throw UsageError("--html needs a directory, got an empty path");
  const std::string layout = a.str("layout", "auto");
  if (layout != "auto" && layout != "fednode" && layout != "graphviz")
    throw UsageError("--layout must be auto, fednode or graphviz, got '" + layout + "'");

  const ReportModel m = load_report(file);

  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec)) throw InputError("--html " + dir + ": exists and is not a directory");
  fs::create_directories(dir, ec);
  if (ec) throw InputError("--html " + dir + ": cannot create the directory (" + ec.message() + ")");
  if (::access(dir.c_str(), W_OK) != 0) throw InputError("--html " + dir + ": the directory is not writable");

  std::string drawing, drawn_by;
  if (m.node_count > static_cast<long>(kMaxDrawnNodes)) {
    drawn_by = std::to_string(m.node_count) + " nodes: not drawn (at most " + std::to_string(kMaxDrawnNodes) + ")";
  } else {
    const TopologyPicture picture = report_picture(m);
    const bool graphviz = layout == "graphviz" || (layout == "auto" && !find_program("dot").empty());
    if (graphviz) {
      drawing = graphviz_svg(to_dot(picture));
      drawing = drawing.substr(drawing.find("<svg"));  // inline: without the XML prolog and doctype
      drawn_by = "laid out by Graphviz (dot)";
    } else {
      drawing = topology_svg(picture);
      drawn_by = "laid out by fednode";
    }
    if (m.topology == "star") drawn_by += "; dashed: the hub's head going back to the leaves";
    if (m.sweep && m.topology == "graph") drawn_by += "; the graph of the first seed (each seed draws its own)";
  }

  const fs::path page = fs::path(dir) / "index.html";
  const fs::path partial = fs::path(dir) / ".index.html.partial";
  {
    std::ofstream out(partial, std::ios::binary | std::ios::trunc);
    if (!out) throw InputError("--html " + dir + ": cannot write " + partial.string());
    out << report_html(m, drawing, drawn_by);
    out.close();
    if (!out) throw InputError("--html " + dir + ": writing " + partial.string() + " failed");
  }
  fs::rename(partial, page, ec);  // a reader never sees half a page
  if (ec) throw InputError("cannot replace " + page.string() + ": " + ec.message());
  std::cout << "wrote " << page.string() << "\n";
  return 0;
}

}  // namespace fednode::cli
