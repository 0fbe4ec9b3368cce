// The fednode executable: parse the subcommand, then one call into the library.
#include "cli/commands.h"
#include "features/allocator.h"

#include <cstring>
#include <iostream>
#include <string>
#include <vector>

namespace {

void usage(std::ostream& out) {
  out << "usage: fednode <command> [options]\n\ncommands:\n";
  for (const auto& c : fednode::cli::commands()) {
    std::string name = c.name;
    name.resize(10, ' ');
    out << "  " << name << " " << c.summary << "\n";
  }
  out << "  help       this text; 'fednode <command> --help' for a command's options\n"
         "  --version  the version, the protocol versions it speaks and the libraries it was built with\n"
         "Exit status: 0 success, 1 error, 2 usage, 3-5 and 130 from run and launch (docs/cli.md).\n";
}

}  // namespace

int main(int argc, char** argv) {
  fednode::reuse_large_allocations();  // batch work without page-fault churn (features/allocator.h)
  if (argc < 2) {
    usage(std::cerr);
    return 2;
  }
  const std::string command = argv[1];
  std::vector<std::string> args(argv + 2, argv + argc);
  if (command == "--version") {
    std::cout << fednode::cli::version_text();
    return 0;
  }
  if (command == "help" || command == "--help" || command == "-h") {
    // `fednode help simulate` is `fednode simulate --help`.
    if (command == "help" && args.size() == 1) {
      for (const auto& c : fednode::cli::commands())
        if (args[0] == c.name) return fednode::cli::run_guarded(c, {"--help"});
      std::cerr << "fednode: unknown command '" << args[0] << "'\n";
      usage(std::cerr);
      return 2;
    }
    usage(std::cout);
    return 0;
  }
  for (const auto& c : fednode::cli::commands())
    if (command == c.name) return fednode::cli::run_guarded(c, args);
  std::cerr << "fednode: unknown command '" << command << "'\n";
  usage(std::cerr);
  return 2;
}
