// What every benchmark program needs around its measurement: a wall clock for one run, the
// process's CPU time, the median of repeated runs, and integer command-line values that fail
// loudly (exit 2, naming the program and the flag).
#pragma once

#include <algorithm>
#include <chrono>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

namespace fednode::bench {

template <class F>
double seconds(F&& run) {
  const auto t0 = std::chrono::steady_clock::now();
  run();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// CPU seconds of every thread of this process: steadier than wall time on a busy machine.
inline double cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

// An integer in [lo, hi]; anything else ends the program with a message.
inline int parse_int(const char* program, const char* flag, const char* value, long lo = 1, long hi = 1L << 30) {
  char* end = nullptr;
  const long v = std::strtol(value, &end, 10);
  if (!end || end == value || *end || v < lo || v > hi) {
    std::fprintf(stderr, "%s: %s needs an integer in [%ld, %ld], got '%s'\n", program, flag, lo, hi, value);
    std::exit(2);
  }
  return static_cast<int>(v);
}

// "512,1280": a comma-separated list of such integers.
inline std::vector<int> parse_int_list(const char* program, const char* flag, const char* value) {
  std::vector<int> out;
  std::stringstream ss(value);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(parse_int(program, flag, item.c_str()));
  if (out.empty()) parse_int(program, flag, "");  // exits with the message
  return out;
}

}  // namespace fednode::bench
