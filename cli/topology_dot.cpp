#include "cli/topology_dot.h"

#include "core/types.h"

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <set>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace fednode::cli {
namespace {

namespace fs = std::filesystem;

std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c == '\n' ? ' ' : c;
  }
  return out + "\"";
}

std::string label(const std::vector<std::string>& lines) {
  std::string s;
  for (const auto& l : lines) s += (s.empty() ? "" : "\n") + l;
  // DOT's "\n" inside a quoted label is its own line break: quoted() must not escape it away.
  std::string out = "\"";
  for (char c : s) {
    if (c == '\n') out += "\\n";
    else {
      if (c == '"' || c == '\\') out += '\\';
      out += c;
    }
  }
  return out + "\"";
}

std::string id(NodeId n) { return "\"" + std::to_string(n) + "\""; }

// A file of our own in the temporary directory, removed when the scope ends.
struct TempFile {
  std::string path;
  explicit TempFile(const std::string& stem) {
    std::string name = (fs::temp_directory_path() / (stem + "_XXXXXX")).string();
    const int fd = ::mkstemp(name.data());
    if (fd < 0) throw InputError("cannot create a temporary file in " + fs::temp_directory_path().string());
    ::close(fd);
    path = name;
  }
  ~TempFile() {
    std::error_code ec;
    fs::remove(path, ec);
  }
  std::string read() const {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
  }
};

}  // namespace

std::string to_dot(const TopologyPicture& p) {
  std::ostringstream out;
  out << "digraph fednode {\n";
  out << "  graph [label=" << quoted(p.title) << ", labelloc=t, fontname=\"Helvetica\", fontsize=12";
  // dot's ranks suit a chain, a graph and a star; a ring reads best as a circle.
  if (p.mode == TopologyMode::Ring) out << ", layout=circo";
  else if (p.mode == TopologyMode::Linear) out << ", rankdir=LR";
  out << "];\n";
  out << "  node [shape=box, style=\"rounded,filled\", fillcolor=\"#ffffff\", fontname=\"Helvetica\", fontsize=10];\n";
  out << "  edge [fontname=\"Helvetica\", fontsize=9];\n";
  for (const PictureNode& n : p.nodes) {
    out << "  " << id(n.id) << " [label=" << label(n.lines);
    if (!n.state_class.empty())
      out << ", fillcolor=\"" << state_colour(n.state_class) << "\", tooltip=" << quoted(n.state);
    out << "];\n";
  }
  for (const PictureEdge& e : p.edges) {
    out << "  " << id(e.from) << " -> " << id(e.to);
    std::string attrs;
    if (e.implied || e.feedback || !e.via.empty()) attrs += "style=dashed";
    if (e.implied) attrs += ", constraint=false, color=\"#777777\"";
    else if (!e.via.empty()) attrs += ", color=\"#3b6fb6\"";
    if (!e.label.empty()) attrs += std::string(attrs.empty() ? "" : ", ") + "label=" + quoted(e.label);
    if (!attrs.empty()) out << " [" << attrs << "]";
    out << ";\n";
  }
  // Relays stand apart, joined by dotted lines to the nodes whose edges they carry.
  for (const auto& [name, address] : p.relays)
    out << "  " << quoted("relay:" + name) << " [shape=diamond, style=filled, fillcolor=\"#dbe6f5\", label="
        << label({"relay " + name, address}) << "];\n";
  std::set<std::pair<NodeId, std::string>> joined;
  for (const PictureEdge& e : p.edges)
    if (!e.via.empty())
      for (NodeId end : {e.from, e.to})
        if (joined.emplace(end, e.via).second)
          out << "  " << id(end) << " -> " << quoted("relay:" + e.via)
              << " [style=dotted, dir=none, color=\"#3b6fb6\", constraint=false];\n";
  if (p.has_state)
    out << "  // node colours: done " << state_colour("done") << ", running " << state_colour("running")
        << ", failed " << state_colour("failed") << ", not started " << state_colour("not started") << "\n";
  out << "}\n";
  return out.str();
}

std::string find_program(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path ? path : "/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    if (dir.empty()) dir = ".";
    const std::string candidate = dir + "/" + program;
    if (::access(candidate.c_str(), X_OK) == 0 && !fs::is_directory(candidate)) return candidate;
  }
  return "";
}

std::string graphviz_svg(const std::string& dot_text) {
  const std::string dot = find_program("dot");
  if (dot.empty())
    throw InputError("drawing SVG needs Graphviz's 'dot' program, which is not on PATH (Debian: apt-get install "
                     "graphviz); --dot writes the DOT text without it");
  TempFile in("fednode_dot_in"), out("fednode_dot_out"), err("fednode_dot_err");
  {
    std::ofstream f(in.path, std::ios::binary);
    f << dot_text;
    if (!f) throw InputError("cannot write the temporary file " + in.path);
  }
  // No shell: the arguments go to dot as they are, and dot's messages to a file of our own.
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 2, err.path.c_str(), O_WRONLY | O_TRUNC, 0);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  std::vector<std::string> args = {dot, "-Tsvg", "-o", out.path, in.path};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int rc = ::posix_spawn(&pid, dot.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw InputError("cannot start " + dot);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::string why = err.read();
    while (!why.empty() && (why.back() == '\n' || why.back() == ' ')) why.pop_back();
    throw InputError(dot + " failed to lay out the topology" + (why.empty() ? "" : ": " + why));
  }
  std::string svg = out.read();
  if (svg.find("<svg") == std::string::npos) throw InputError(dot + " wrote no SVG");
  return svg;
}

}  // namespace fednode::cli
