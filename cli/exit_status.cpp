#include "cli/exit_status.h"

#include "node/node.h"

namespace fednode::cli {

int exit_status_of(const NodeResult& r) {
  switch (r.status) {
    case NodeStatus::Finished: return kExitSuccess;
    case NodeStatus::Stopped: return kExitStopped;
    case NodeStatus::Incomplete:
      return r.refused_by.empty() && r.discarded_from.empty() ? kExitDeadline : kExitRefused;
    case NodeStatus::Running: break;
  }
  return kExitError;  // a result read before the node ended: not a status a finished run gives
}

}  // namespace fednode::cli
