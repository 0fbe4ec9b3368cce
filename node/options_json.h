// A method's options as JSON, written the same way into `fednode simulate`'s report
// (docs/report.md, "parameters") and into a node's configuration record (node/configuration_record.h).
#pragma once

#include "methods/method.h"
#include "core/json_writer.h"

namespace fednode {

// Writes the key `options.method` and its object (the method's descriptor writes it).
void write_method_options(JsonWriter& w, const MethodOptions& options);
// Writes the key "linear_head" and its object.
void write_linear_head_options(JsonWriter& w, const LinearTrainOptions& head);

}  // namespace fednode
