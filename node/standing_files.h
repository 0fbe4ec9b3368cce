// The files people and monitors watch a running node through (docs/node.md, docs/cli.md "fednode
// status"): status.json and, when asked for, the Prometheus metrics file, rewritten about once a
// second while the node runs; result.json takes over from status.json at the end, and the metrics
// have the last word. A file that cannot be written is said once and the node runs on: they are
// for watching, not for the run.
#pragma once

#include "core/log.h"
#include "node/node.h"
#include "node/node_status.h"

#include <chrono>
#include <functional>
#include <string>

namespace fednode {

class StandingFiles {
 public:
  // `metrics_path` empty: no metrics file.
  StandingFiles(std::string status_path, std::string metrics_path, Say say);

  // Both files from `standing()`, unless they were written less than a second ago.
  void update(const std::function<NodeStanding()>& standing, const NodeResult& result);
  // The metrics file alone: at the end, from the node's final standing and result.
  void write_metrics(const NodeStanding& standing, const NodeResult& result);

 private:
  std::string status_path_, metrics_path_;
  Say say_;
  std::chrono::steady_clock::time_point written_{};
  bool said_status_failure_ = false, said_metrics_failure_ = false;
};

}  // namespace fednode
