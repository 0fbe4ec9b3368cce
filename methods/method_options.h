// Command-line options shared by every command that runs a method (simulate, run, launch).
#pragma once

#include "core/options.h"
#include "methods/method.h"

#include <set>
#include <string>

namespace fednode {

const std::set<std::string>& method_option_names();  // options that take a value
const std::set<std::string>& method_flag_names();    // options that do not
MethodOptions parse_method_options(const Args& args);
std::string method_options_help();

}  // namespace fednode
