// What `fednode report` draws, read from a report file: simulate's report ("fednode_report": 1)
// or its seed sweep ("fednode_seed_sweep": 1), docs/report.md. A sweep is drawn as its summary:
// per node the mean over the seeds (with the sd), bytes and per-class accuracies averaged.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace fednode::cli {

struct ReportNode {
  long id = 0;
  std::optional<long> samples;
  std::vector<long> contributors;
  std::optional<double> accuracy, accuracy_sd, local_only;
  std::optional<double> bytes_sent, bytes_received;
  std::vector<std::optional<double>> per_class;  // nullopt: no test sample of the class (JSON null)
  // The privacy ledger's total (docs/privacy.md): epsilon, or nullopt for "not private" or no
  // ledger; delta with it.
  std::optional<double> epsilon, delta;
};

struct ReportModel {
  std::string source;   // the file, for the page and for messages
  bool sweep = false;   // a seed sweep's summary
  std::string method, topology;
  long node_count = 0;
  uint64_t seed = 0;    // the run's seed; a sweep's first
  std::vector<long> seeds;  // a sweep's seeds
  std::optional<double> centralized_linear, centralized_lda, local_only_mean;
  long num_classes = 0;
  std::vector<ReportNode> nodes;
  // The run's parameters and data, flattened ("parameters.fedpft.components" -> "10"), in the
  // file's order; strings without quotes, other values as JSON.
  std::vector<std::pair<std::string, std::string>> parameters;
};

// Throws InputError naming the file and what is wrong with it: missing, not JSON, not one of
// the two reports, another version, a field missing or of the wrong type.
ReportModel load_report(const std::string& path);

}  // namespace fednode::cli
