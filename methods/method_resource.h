// Something a method's options name that the driver opens once, before any member runs, and hands
// to every member that runs the method (NodeContext::resource): FGL's generator. Opaque outside the
// method's folder; the method knows its own kind (dynamic_cast).
#pragma once

#include <string>

namespace fednode {

class MethodResource {
 public:
  virtual ~MethodResource() = default;
  // What it is, for progress lines and reports ("fednode label generator <sha256>").
  virtual std::string describe() const = 0;
};

}  // namespace fednode
