#include "features/classifier_export.h"

#include "core/torch_library.h"

#include <algorithm>

extern "C" void fednode_torch_export_classifier(const fednode::ExportPlan& plan, std::string* error);

namespace fednode {

void export_torchscript(const ExportPlan& plan) {
  if (plan.images) plan.preprocessing.validate("export");
  std::string error;
  torch_function<decltype(fednode_torch_export_classifier)>("fednode_torch_export_classifier")(plan, &error);
  if (!error.empty()) {
    // LibTorch's messages carry a C++ backtrace after the reason; TorchScript's compiler a
    // source excerpt. Up to 12 lines say enough.
    std::string reason;
    size_t at = 0;
    for (int lines = 0; lines < 12 && at < error.size(); ++lines) {
      const size_t end = std::min(error.find('\n', at), error.size());
      reason += (reason.empty() ? "" : "\n  ") + error.substr(at, end - at);
      at = end + 1;
    }
    throw InputError(plan.out + ": cannot build or save the TorchScript module: " + reason);
  }
}

}  // namespace fednode
