// What the node machine (node/machine.h) is handed besides knowledge, in its own terms: wire-free,
// as the machine is (node/admission.h turns a message into it).
#pragma once

#include "core/contributors.h"
#include "methods/method.h"

#include <memory>

namespace fednode {

// A hub's head as a star leaf takes it: the head, whose data it saw, and (personalised runs)
// the class means of what it was trained on.
struct HeadOffer {
  std::shared_ptr<const Head> head;
  Contributors contributors;
  std::shared_ptr<const ClassMeans> class_means;
};

}  // namespace fednode
