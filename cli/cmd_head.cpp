// fednode head info FILE: what a head file holds (docs/methods/heads.md, "Head files").
#include "cli/commands.h"
#include "core/options.h"
#include "node/head_io.h"

#include <iostream>

namespace fednode::cli {
namespace {

const char* kHelp =
    "usage: fednode head info FILE [--format text|json]\n"
    "  what a head file (a node's state directory's head or personal_head) holds: its kind, classes\n"
    "  and class names, the features it reads and how images become them (pixels or a backbone,\n"
    "  preprocessing, expansion, fingerprint), the method, run, node and contributors\n"
    "  exit 1, naming the problem, for a file that is truncated, damaged or not a head file\n";

}  // namespace

int cmd_head(const std::vector<std::string>& argv) {
  if (argv.empty()) throw UsageError("give a head command: fednode head info FILE");
  if (argv[0] == "--help" || argv[0] == "-h") {
    std::cout << kHelp;
    return 0;
  }
  if (argv[0] != "info") throw UsageError("unknown head command '" + argv[0] + "' (known: info)");
  std::vector<std::string> rest;
  const std::string file = split_positional({argv.begin() + 1, argv.end()}, {"--format"}, rest);
  const Args a(rest, {"format"}, {});
  if (a.help()) {
    std::cout << kHelp;
    return 0;
  }
  if (file.empty()) throw UsageError("give the head file: fednode head info FILE");
  const std::string format = a.str("format", "text");
  if (format != "text" && format != "json") throw UsageError("--format must be text or json, got '" + format + "'");
  const HeadFile head = read_head_file(file);
  std::cout << (format == "json" ? head_info_json(head) : head_info_text(head));
  return 0;
}

}  // namespace fednode::cli
