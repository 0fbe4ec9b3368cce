// What `fednode launch FILE --report REPORT.json` writes once its nodes have ended: a report in the
// layout of `fednode simulate --report` (docs/report.md), made from every node's result.json, so
// that `fednode report REPORT.json --html DIR` draws a launched federation as it draws a simulated
// one. Its bytes are frames on the wire (sealed, resends and acknowledgements included), where
// simulate counts payload tensors; it has no centralised or local-only baselines (a launch trains
// none), and a node that left no result is listed with null accuracy and status "no result".
#pragma once

#include "topology/topology.h"

#include <string>

namespace fednode::cli {

std::string launch_report_json(const Topology& topology, const std::string& topology_file, double wall_seconds);

}  // namespace fednode::cli
