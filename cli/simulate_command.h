// `fednode simulate`'s work, shared by the command and the Python module's fednode.simulate: the
// same command line (the module turns keywords into it), the same parsing and the same report, so
// that the two cannot drift apart. The module lends its data as arrays instead of naming files.
#pragma once

#include "features/data_options.h"

#include <atomic>
#include <functional>
#include <iosfwd>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace fednode::cli {

struct SimulateHooks {
  // Progress lines (unless --quiet or FEDNODE_LOG says less); may be empty.
  std::function<void(const std::string&)> progress;
  // The result table `fednode simulate` prints; null: none.
  std::ostream* table = nullptr;
  // Data given as arrays: --dataset and the .npy options are then refused, the other data options
  // (limits, --num-classes, --backbone-fingerprint, --backbone, --feature-expansion) apply.
  std::optional<DataSettings::Lent> lent;
  // When it becomes true, the run ends at its next class or epoch by throwing Interrupted.
  const std::atomic<bool>* stop = nullptr;
};

// The options `fednode simulate` takes with a value, and those it takes as flags (--no-baselines).
std::set<std::string> simulate_valued_options();
std::set<std::string> simulate_flag_options();

// Runs `fednode simulate ARGV` (no --help) and returns its JSON report (docs/report.md; with
// --seeds the sweep's), having written --report and --save-heads as the command does. Throws
// UsageError for the command line and InputError for the data, as the command does.
std::string simulate_command(const std::vector<std::string>& argv, const SimulateHooks& hooks);

}  // namespace fednode::cli
