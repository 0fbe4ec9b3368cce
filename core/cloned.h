// A polymorphic object held with value semantics: copying the holder copies the object
// (Base::clone), so that a struct holding one copies as plainly as one holding a value.
#pragma once

#include <memory>
#include <utility>

namespace fednode {

template <class Base>
class Cloned {
 public:
  Cloned() = default;
  explicit Cloned(std::unique_ptr<Base> p) : p_(std::move(p)) {}
  Cloned(const Cloned& o) : p_(o.p_ ? o.p_->clone() : nullptr) {}
  Cloned(Cloned&&) noexcept = default;
  Cloned& operator=(const Cloned& o) {
    p_ = o.p_ ? o.p_->clone() : nullptr;
    return *this;
  }
  Cloned& operator=(Cloned&&) noexcept = default;
  Base* get() const { return p_.get(); }

 private:
  std::unique_ptr<Base> p_;
};

}  // namespace fednode
