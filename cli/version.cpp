// `fednode --version`: what this binary is and speaks, for bug reports and scripts.
#include "cli/commands.h"
#include "core/version.h"
#include "node/transport.h"
#include "protocol/messages.h"

#include <Eigen/Core>
#include <sodium.h>

#include <sstream>

namespace fednode::cli {

std::string version_text() {
  std::ostringstream out;
  out << "fednode " << fednode_version() << "\n"
      << "protocol versions " << kProtocolVersion << " (one frame a message), " << kStreamVersion
      << " (streams of sealed chunks) and " << kReceiptsVersion << " (receipts), docs/protocol.md\n"
      // LibTorch is loaded only when a command needs it; its version is the one this was built against.
      << "built with LibTorch " << FEDNODE_TORCH_VERSION << ", Eigen " << EIGEN_WORLD_VERSION << "."
      << EIGEN_MAJOR_VERSION << "." << EIGEN_MINOR_VERSION << ", msgpack-c " << msgpack_version_text()
      << "; running with ZeroMQ " << Transport::zeromq_version() << ", libsodium "
      << sodium_version_string() << "\n";
  return out.str();
}

}  // namespace fednode::cli
