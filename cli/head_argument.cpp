// --state, --topology/--id and --head as predict and export take them (commands.h).
#include "cli/commands.h"
#include "core/options.h"
#include "node/classifier.h"
#include "topology/topology.h"

namespace fednode::cli {

std::string head_file_argument(const Args& a, bool personal) {
  const int given = a.has("state") + a.has("topology") + a.has("head");
  if (given != 1) throw UsageError("give exactly one of --state DIR, --topology FILE --id ID and --head FILE");
  if (a.has("id") != a.has("topology")) throw UsageError("--topology and --id go together");
  if (a.has("head")) {
    if (personal) throw UsageError("--personal picks a state directory's personal head; --head names the file itself");
    return a.str("head", "");
  }
  std::string dir = a.str("state", "");
  if (a.has("topology")) {
    LoadOptions lo;
    lo.require_keys = false;
    const Topology t = load_topology(a.str("topology", ""), lo);
    dir = t.state_dir_of(t.lookup(a.str("id", "")).id);
  }
  return state_dir_head_file(dir, personal);
}

}  // namespace fednode::cli
