#include "features/progress.h"

#include <unistd.h>

#include <cstdio>

namespace fednode {

Progress::Progress(std::string label, int64_t total, bool enabled, std::string unit)
    : label_(std::move(label)), unit_(std::move(unit)), total_(total), enabled_(enabled),
      tty_(isatty(STDERR_FILENO) == 1), start_(std::chrono::steady_clock::now()), last_draw_(start_) {}

Progress::~Progress() {
  if (!finished_ && done_ > 0) finish();
}

double Progress::seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void Progress::update(int64_t done) {
  done_ = done;
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  const double since = std::chrono::duration<double>(now - last_draw_).count();
  if (since < (tty_ ? 0.2 : 10.0)) return;
  last_draw_ = now;
  draw(false);
}

void Progress::finish() {
  if (finished_) return;
  finished_ = true;
  if (enabled_) draw(true);
}

void Progress::draw(bool final) {
  const double elapsed = seconds();
  const double rate = elapsed > 0 ? static_cast<double>(done_) / elapsed : 0.0;
  if (final) {
    // Cut short (an error or a stop unwound the loop): say how far it got, not just a count.
    const std::string of = done_ < total_ ? " of " + std::to_string(total_) : "";
    std::fprintf(stderr, "%s%s: %lld%s %s in %.1f s (%.1f %s/s)\n", tty_ ? "\r\033[K" : "", label_.c_str(),
                 static_cast<long long>(done_), of.c_str(), unit_.c_str(), elapsed, rate, unit_.c_str());
    return;
  }
  const double left = rate > 0 ? static_cast<double>(total_ - done_) / rate : 0.0;
  const long long eta = static_cast<long long>(left + 0.5);
  char eta_text[32];
  std::snprintf(eta_text, sizeof eta_text, "%lld:%02lld:%02lld", eta / 3600, (eta / 60) % 60, eta % 60);
  const int width = 24;
  const int filled = total_ > 0 ? static_cast<int>(width * done_ / total_) : 0;
  std::string bar(static_cast<size_t>(filled), '#');
  bar.resize(width, '.');
  std::fprintf(stderr, "%s%s [%s] %lld/%lld  %.1f %s/s  ETA %s%s", tty_ ? "\r\033[K" : "", label_.c_str(),
               bar.c_str(), static_cast<long long>(done_), static_cast<long long>(total_), rate, unit_.c_str(),
               eta_text, tty_ ? "" : "\n");
  std::fflush(stderr);
}

}  // namespace fednode
