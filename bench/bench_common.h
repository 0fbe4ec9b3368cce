// What every benchmark program needs around its measurement: a wall clock for one run, the
// process's CPU time, the median of repeated runs, and integer command-line values that fail
// loudly (exit 2, naming the program and the flag).
#pragma once

#include <algorithm>
#include <chrono>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <new>
#include <stdexcept>
#include <string>
#include <utility>
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

// Reads "--flag value" pairs, each into its int (parse_int's bounds) or its string. False, after
// saying which, for a flag that is neither.
inline bool parse_flags(const char* program, int argc, char** argv,
                        const std::vector<std::pair<std::string, int*>>& ints,
                        const std::vector<std::pair<std::string, std::string*>>& strings) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    bool known = false;
    for (const auto& [name, into] : ints)
      if (flag == name) {
        *into = parse_int(program, argv[i], argv[i + 1]);
        known = true;
      }
    for (const auto& [name, into] : strings)
      if (flag == name) {
        *into = argv[i + 1];
        known = true;
      }
    if (!known) {
      std::fprintf(stderr, "%s: unknown option %s (see --help)\n", program, argv[i]);
      return false;
    }
  }
  return true;
}

// Runs a benchmark's body: an exception (a bad argument deep inside, no memory) becomes one line
// naming the program and exit status 1, not an abort.
template <class Body>
int guarded(const char* program, Body&& body) {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "%s: out of memory (try smaller sizes)\n", program);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", program, e.what());
  }
  return 1;
}

// Ends the program (exit 2) unless `path` can be written, so that a long run does not end by
// failing to save its result; the file is created, empty, if it did not exist.
inline void require_writable(const char* program, const char* flag, const std::string& path) {
  if (path.empty()) return;
  std::FILE* f = std::fopen(path.c_str(), "a");
  if (!f) {
    std::fprintf(stderr, "%s: %s %s cannot be written\n", program, flag, path.c_str());
    std::exit(2);
  }
  std::fclose(f);
}

// Whether --help or -h is among the arguments.
inline bool wants_help(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == "--help" || std::string(argv[i]) == "-h") return true;
  return false;
}

// Raw little-endian float64 values, the format the Python references read with np.fromfile.
inline void write_raw(const std::string& path, const double* data, size_t count) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(count * sizeof(double)));
  if (!f) throw std::runtime_error("cannot write " + path);
}

// Runs a Python reference to the end and returns what it printed (one JSON object).
inline std::string run_reference(const std::string& cmd) {
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) throw std::runtime_error("cannot run " + cmd);
  std::string out;
  char buf[4096];
  size_t got;
  while ((got = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, got);
  if (pclose(p) != 0) throw std::runtime_error("reference failed (" + cmd + "): " + out);
  return out;
}

// The number after "key": in a reference's flat JSON output.
inline double json_number(const std::string& json, const std::string& key) {
  const std::string needle = "\"" + key + "\": ";
  const size_t at = json.find(needle);
  if (at == std::string::npos) throw std::runtime_error("reference output lacks '" + key + "': " + json);
  return std::strtod(json.c_str() + at + needle.size(), nullptr);
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
