// The subcommands of the fednode executable. Each lives in its own cli/cmd_*.cpp.
#pragma once

#include <string>
#include <vector>

namespace fednode {
class Args;
}

namespace fednode::cli {

struct Command {
  const char* name;
  const char* summary;
  int (*run)(const std::vector<std::string>& args);
};

const std::vector<Command>& commands();

// A command's one positional argument (launch's and status's FILE), and the rest for Args: the
// first word that is neither an option nor the value of one of the options in `valued`.
std::string split_positional(const std::vector<std::string>& argv, const std::vector<std::string>& valued,
                             std::vector<std::string>& rest);

// The head file that --state DIR, --topology FILE --id ID or --head FILE names (predict, export):
// DIR/head, or DIR/personal_head with `personal`. Throws UsageError for a wrong combination and
// InputError for a state directory without that head.
std::string head_file_argument(const Args& a, bool personal);

// What `fednode --version` prints: the version, the protocol versions spoken, the libraries.
std::string version_text();

// Runs a command, turning exceptions into one clear line on stderr and exit code 1
// (2 for command-line mistakes).
int run_guarded(const Command& c, const std::vector<std::string>& args);

int cmd_simulate(const std::vector<std::string>& args);
int cmd_extract(const std::vector<std::string>& args);
int cmd_train_generator(const std::vector<std::string>& args);
int cmd_train_vit(const std::vector<std::string>& args);
int cmd_run(const std::vector<std::string>& args);
int cmd_launch(const std::vector<std::string>& args);
int cmd_keygen(const std::vector<std::string>& args);
int cmd_relay(const std::vector<std::string>& args);
int cmd_topology(const std::vector<std::string>& args);
int cmd_status(const std::vector<std::string>& args);
int cmd_report(const std::vector<std::string>& args);
int cmd_predict(const std::vector<std::string>& args);
int cmd_export(const std::vector<std::string>& args);
int cmd_head(const std::vector<std::string>& args);
// `fednode topology FILE --dot|--svg` (cmd_topology_draw.cpp): cmd_topology hands it every
// command line whose first word is not a mode name.
int cmd_topology_draw(const std::vector<std::string>& args);
bool is_topology_mode_word(const std::string& word);

}  // namespace fednode::cli
