// The fednode executable: parse the subcommand, then one call into the library.
#include "cli/commands.h"

#include <cstring>
#include <iostream>
#include <string>
#include <vector>

namespace {

void usage(std::ostream& out) {
  out << "usage: fednode <command> [options]\n\n"
         "commands:\n"
         "  simulate   run a whole federation in one process and write a JSON report\n"
         "  extract    turn a dataset into features with a TorchScript backbone (.npy)\n"
         "  keygen     write a node's key pair (node.key, node.pub) and print its public key\n"
         "  topology   write a linear, ring, star or graph topology file with a key pair per node\n"
         "  help       this text; 'fednode <command> --help' for a command's options\n";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    usage(std::cerr);
    return 2;
  }
  const std::string command = argv[1];
  std::vector<std::string> args(argv + 2, argv + argc);
  if (command == "help" || command == "--help" || command == "-h") {
    usage(std::cout);
    return 0;
  }
  for (const auto& c : fednode::cli::commands())
    if (command == c.name) return fednode::cli::run_guarded(c, args);
  std::cerr << "fednode: unknown command '" << command << "'\n";
  usage(std::cerr);
  return 2;
}
