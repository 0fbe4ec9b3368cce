// fednode's exit statuses: the class of a failure, for scripts (docs/cli.md, "Exit status").
#pragma once

namespace fednode {
struct NodeResult;
}

namespace fednode::cli {

enum ExitStatus : int {
  kExitSuccess = 0,
  // A file, setting, dataset or key that cannot be used (InputError), or any other failure; the
  // message on stderr names what and where.
  kExitError = 1,
  kExitUsage = 2,     // the command line itself (UsageError)
  // `run`: the node finished short of its plan because a deadline passed: a peer sent nothing in
  // time, a message was never acknowledged, or what reached it leaves out data the plan covers.
  kExitDeadline = 3,
  // `run`: a peer refused this node's message, or knowledge accepted from a peer could not be
  // merged. Said before kExitDeadline when both apply: waiting longer would not mend it.
  kExitRefused = 4,
  kExitNetwork = 5,   // an address this machine cannot listen on (NetworkError)
  kExitStopped = 130, // SIGINT or SIGTERM, as shells report a process they interrupted
};

// The status `fednode run` exits with for a node's final result.
int exit_status_of(const NodeResult& result);

}  // namespace fednode::cli
