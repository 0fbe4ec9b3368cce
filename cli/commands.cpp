#include "cli/commands.h"
#include "cli/exit_status.h"

#include "core/options.h"
#include "core/types.h"

#include <algorithm>
#include <exception>
#include <iostream>
#include <new>

namespace fednode::cli {

const std::vector<Command>& commands() {
  static const std::vector<Command> table = {
      {"simulate", "run a whole federation in one process and write a JSON report", cmd_simulate},
      {"extract", "turn a dataset into features with a TorchScript backbone (.npy)", cmd_extract},
      {"train-generator", "train FGL's built-in image generator on a public image set (TorchScript + sidecar)", cmd_train_generator},
      {"train-vit", "pretrain FedMITR's ViT on a public image set (TorchScript for --vit-script)", cmd_train_vit},
      {"run", "run one node of a topology file (one process; the LAN case)", cmd_run},
      {"launch", "start every node of a topology file on this machine and print their results", cmd_launch},
      {"relay", "carry sealed frames between nodes that cannot reach each other (NAT, firewalls)", cmd_relay},
      {"keygen", "write a node's key pair (node.key, node.pub) and print its public key", cmd_keygen},
      {"topology", "write a linear, ring, star or graph topology file with a key pair per node; draw one (--dot, --svg)", cmd_topology},
      {"status", "show every node of a topology file: phase, whom it waits for, its result", cmd_status},
      {"report", "draw a simulate report as one self-contained HTML page (--html DIR)", cmd_report},
      {"predict", "classify images or features with a node's head; accuracy and confusion with labels", cmd_predict},
      {"export", "write a node's classifier (preprocessing, backbone, head) as one TorchScript module", cmd_export},
      {"head", "show what a head file holds: fednode head info FILE", cmd_head},
  };
  return table;
}

std::string split_positional(const std::vector<std::string>& argv, const std::vector<std::string>& valued,
                             std::vector<std::string>& rest) {
  std::string positional;
  for (size_t i = 0; i < argv.size(); ++i) {
    const bool option_value =
        i > 0 && std::find(valued.begin(), valued.end(), argv[i - 1]) != valued.end();
    if (positional.empty() && !option_value && !argv[i].empty() && argv[i][0] != '-') positional = argv[i];
    else rest.push_back(argv[i]);
  }
  return positional;
}

int run_guarded(const Command& c, const std::vector<std::string>& args) {
  try {
    return c.run(args);
  } catch (const UsageError& e) {
    std::cerr << "fednode " << c.name << ": " << e.what() << " (see 'fednode " << c.name << " --help')\n";
    return kExitUsage;
  } catch (const NetworkError& e) {
    std::cerr << "fednode " << c.name << ": " << e.what() << "\n";
    return kExitNetwork;
  } catch (const InputError& e) {
    std::cerr << "fednode " << c.name << ": " << e.what() << "\n";
    return kExitError;
  } catch (const std::bad_alloc&) {
    std::cerr << "fednode " << c.name << ": out of memory: the command as given needs more memory than this "
                 "machine gives it (less data, fewer nodes or threads, smaller heads)\n";
    return kExitError;
  } catch (const std::exception& e) {
    std::cerr << "fednode " << c.name << ": error: " << e.what() << "\n";
    return kExitError;
  }
}

}  // namespace fednode::cli
