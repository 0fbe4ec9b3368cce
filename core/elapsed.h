// Seconds since a steady-clock time point: deadlines, resend warnings and the timings reports carry.
#pragma once

#include <chrono>

namespace fednode {

inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace fednode
