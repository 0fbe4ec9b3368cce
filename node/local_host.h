// The Host (methods/host.h) of a node or a simulation on this machine: files read from its file
// system, programs run by /bin/sh in folders under TMPDIR, images decoded by features/images.h.
#pragma once

#include "methods/host.h"

#include <memory>

namespace fednode {

std::shared_ptr<const Host> local_host();

}  // namespace fednode
