// A node's metrics in Prometheus's text exposition format, for node_exporter's textfile collector
// (NodeConfig::metrics_path; `fednode run --metrics FILE`, `fednode launch --metrics-dir DIR`):
// traffic, messages accepted by type and frames rejected by reason, time spent waiting, merging
// and fitting, and where the node stands. Labelled with the node's name and id, so that one
// collector directory can hold a whole federation's files (docs/node.md, "Metrics").
#pragma once

#include "node/node.h"
#include "node/node_status.h"

#include <string>

namespace fednode {

std::string prometheus_metrics(const NodeStanding& standing, const NodeResult& result);

}  // namespace fednode
