// fednode's version, as CMakeLists.txt's project() gives it: one place for the CLI's --version and
// the `software` a node names in its hello.
#pragma once

namespace fednode {

const char* fednode_version();  // "0.1.0"

}  // namespace fednode
