// The check behind every "bad input gets a clear error" test: the call must throw an InputError,
// and its message must name each of the given fragments (the file, the field, the value...).
#pragma once

#include "core/types.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace fednode::test {

template <class Fn>
void expect_input_error(Fn&& fn, const std::vector<std::string>& fragments) {
  try {
    fn();
    ADD_FAILURE() << "expected an InputError naming '" << (fragments.empty() ? "" : fragments.front()) << "'";
  } catch (const InputError& e) {
    const std::string message = e.what();
    for (const auto& fragment : fragments)
      EXPECT_NE(message.find(fragment), std::string::npos) << "message '" << message << "' lacks '" << fragment << "'";
  }
}

}  // namespace fednode::test
