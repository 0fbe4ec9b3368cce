#include "core/version.h"

namespace fednode {

const char* fednode_version() { return FEDNODE_VERSION; }

}  // namespace fednode
