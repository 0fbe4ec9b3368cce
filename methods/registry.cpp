// The one place that knows every method; kept apart from method.cpp so that code using one
// method does not link all of them.
#include "methods/fedcgs/fedcgs.h"
#include "methods/fedpft/fedpft.h"
#include "methods/fedtc/fedtc.h"
#include "methods/method.h"

namespace fednode {

std::unique_ptr<Method> make_method(const MethodOptions& options) {
  if (options.method == "fedpft") return make_fedpft(options.fedpft);
  if (options.method == "fedcgs") return make_fedcgs(options.fedcgs);
  if (options.method == "fedtc") return make_fedtc(options.fedtc);
  throw InputError("unknown method '" + options.method + "' (expected fedpft, fedcgs or fedtc)");
}

}  // namespace fednode
