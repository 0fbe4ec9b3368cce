// A progress line on stderr for long loops: count, rate and time left. On a terminal it redraws
// one line; otherwise (logs, CI) it prints a line every few seconds so logs stay short.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace fednode {

class Progress {
 public:
  Progress(std::string label, int64_t total, bool enabled, std::string unit = "images");
  ~Progress();
  // `done` is the absolute count so far.
  void update(int64_t done);
  // Prints the summary line (once); called by the destructor if not before.
  void finish();
  double seconds() const;

 private:
  void draw(bool final);

  std::string label_, unit_;
  int64_t total_ = 0, done_ = 0;
  bool enabled_ = false, tty_ = false, finished_ = false;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

}  // namespace fednode
