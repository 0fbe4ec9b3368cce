// The fednode executable run as a user runs it, for tests: a real process, its exit status and
// its output (stdout and stderr together).
#pragma once

#include <cstdio>
#include <string>
#include <sys/wait.h>

namespace fednode::test {

struct CliRun {
  int code = -1;
  std::string output;
};

// `env` is prepended to the command line (e.g. "OMP_NUM_THREADS=1").
inline CliRun run_cli(const std::string& args, const std::string& env = "") {
  const std::string cmd = env + (env.empty() ? "" : " ") + std::string(FEDNODE_CLI) + " " + args + " 2>&1";
  CliRun r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  const int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// The data options of a simulate run on DIR/{train,test}_{X,y}.npy.
inline std::string npy_data_args(const std::string& dir) {
  return "--train-features " + dir + "/train_X.npy --train-labels " + dir + "/train_y.npy --test-features " + dir +
         "/test_X.npy --test-labels " + dir + "/test_y.npy";
}

}  // namespace fednode::test
