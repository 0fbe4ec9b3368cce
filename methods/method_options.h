// Command-line options shared by every command that runs a method (simulate, run, launch).
#pragma once

#include "core/json_writer.h"
#include "core/options.h"
#include "methods/heads/train.h"
#include "methods/method.h"

#include <optional>
#include <set>
#include <string>

namespace fednode {

const std::set<std::string>& method_option_names();  // options that take a value
const std::set<std::string>& method_flag_names();    // options that do not
MethodOptions parse_method_options(const Args& args);
// A learning-rate option: "auto" (chosen on a validation split) or a number in [1e-12, 10].
std::optional<double> learning_rate_option(const Args& args, const std::string& name,
                                           const std::optional<double>& fallback);
// Writes "lr": the number, or "auto" with "lr_candidates" and "validation_fraction".
void write_learning_rate(JsonWriter& w, const std::optional<double>& lr, const ValidationChoice& choice);
std::string method_options_help();

}  // namespace fednode
