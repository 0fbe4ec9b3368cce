// fednode keygen: a node's key pair, as topology files and `fednode run` expect it.
#include "core/options.h"
#include "cli/commands.h"
#include "crypto/key_files.h"

#include <iostream>

namespace fednode::cli {
namespace {

const char* kHelp =
    "usage: fednode keygen --out DIR\n"
    "writes a new X25519 key pair for one node (docs/protocol.md, section 9):\n"
    "  DIR/node.key   the secret key, mode 0600; it never leaves this machine\n"
    "  DIR/node.pub   the public key (64 hex digits), read by topology files through key_dir\n"
    "and prints the public key on stdout, for a topology's public_key = \"...\" on other machines.\n"
    "DIR is created (mode 0700) if missing. An existing key is never overwritten: remove it\n"
    "yourself to replace it, and start a new run (docs/security.md, \"Rotating a key\").\n"
    "  --out DIR      the node's key directory (required)\n";

}  // namespace

int cmd_keygen(const std::vector<std::string>& argv) {
  const Args a(argv, {"out"}, {});
  if (a.help()) {
    std::cout << kHelp;
    return 0;
  }
  const std::string dir = a.required("out");
  if (dir.empty()) throw UsageError("--out needs a directory, got an empty path");
  std::cout << write_new_identity(dir).to_hex() << "\n";
  return 0;
}

}  // namespace fednode::cli
