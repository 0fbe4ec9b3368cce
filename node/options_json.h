// A method's options as JSON, written the same way into `fednode simulate`'s report
// (docs/report.md, "parameters") and into a node's configuration record (node/configuration_record.h).
#pragma once

#include "methods/method.h"
#include "node/json.h"

namespace fednode {

// Writes the key `options.method` ("fedpft", "fedcgs" or "fedtc") and its object.
void write_method_options(JsonWriter& w, const MethodOptions& options);
// Writes the key "linear_head" and its object.
void write_linear_head_options(JsonWriter& w, const LinearTrainOptions& head);

}  // namespace fednode
