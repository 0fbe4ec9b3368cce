// The TOML side of topology files: text to an unvalidated Topology. The only place that
// includes toml++ (a large header-only library), so that one translation unit pays for it.
// Internal to topology/; users call load_topology / parse_topology.
#pragma once

#include "topology/topology.h"

#include <string>

namespace fednode::topo {

// Reads the document's structure and types, resolves node names in references, and reports
// unknown keys and wrongly typed values with their line. Structure (duplicates, cycles, ...) is
// validate_topology's job.
Topology parse_toml(const std::string& text, const std::string& source, const std::string& base_dir);

}  // namespace fednode::topo
