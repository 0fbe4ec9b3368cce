#include "node/standing_files.h"

#include "node/durable_file.h"
#include "node/metrics_file.h"

#include <utility>

namespace fednode {
namespace {

constexpr double kEvery = 1.0;  // seconds between rewrites

}  // namespace

StandingFiles::StandingFiles(std::string status_path, std::string metrics_path, Say say)
    : status_path_(std::move(status_path)), metrics_path_(std::move(metrics_path)), say_(std::move(say)) {}

void StandingFiles::update(const std::function<NodeStanding()>& standing, const NodeResult& result) {
  const auto now = std::chrono::steady_clock::now();
  if (written_ != std::chrono::steady_clock::time_point{} && std::chrono::duration<double>(now - written_).count() < kEvery)
    return;
  // Before anything is said: a line said here comes back through the node's log to update().
  written_ = now;
  const NodeStanding s = standing();
  try {
    write_standing(status_path_, s);
  } catch (const InputError& e) {
    if (!std::exchange(said_status_failure_, true)) say_.warn(std::string(e.what()) + "; fednode status will not see this node");
  }
  write_metrics(s, result);
}

void StandingFiles::write_metrics(const NodeStanding& standing, const NodeResult& result) {
  if (metrics_path_.empty()) return;
  try {
    replace_file_at_once(metrics_path_, prometheus_metrics(standing, result));
  } catch (const InputError& e) {
    if (!std::exchange(said_metrics_failure_, true)) say_.warn(std::string(e.what()) + "; no metrics from this node");
  }
}

}  // namespace fednode
