// FedMITR's command-line options (`fednode simulate --method fedmitr --help` lists them), their
// parsing into FedMitrOptions and their record in the JSON report: the registry entry's
// parse_options, help and write_options (methods/registry.h).
#pragma once

#include "methods/registry.h"
#include "methods/fedmitr/fedmitr_options.h"

#include <string>

namespace fednode {

// Throws UsageError naming the option and what is wrong with it.
void parse_fedmitr_options(const Args& a, MethodOptions& m);
std::string fedmitr_options_help();
void write_fedmitr_options(JsonWriter& w, const MethodOptions& m);

}  // namespace fednode
