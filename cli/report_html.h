// A report (report_model.h) as one self-contained HTML page: charts as inline SVG written here,
// no script, no external file (docs/cli.md, "fednode report"). Every number a test may check
// carries the exact value in a data-value attribute (%.17g, which reads back as the same
// double) beside its printed form (4 decimals for accuracies, whole bytes), and a stable id:
// centralized-linear, centralized-lda, local-only-mean, node-<id>-accuracy, -local-only,
// -bytes-sent, -bytes-received; chart marks carry data-node (and data-class in the heatmap).
#pragma once

#include "cli/report_model.h"

#include <string>

namespace fednode::cli {

// `topology_svg`: the drawing of the federation to inline (Graphviz's or fednode's own, the
// caller's choice), "" for none; `drawn_by` says which, for the page.
std::string report_html(const ReportModel& report, const std::string& topology_svg, const std::string& drawn_by);

// The printed forms, shared with the tests' expectations.
std::string accuracy_text(double accuracy);  // 4 decimals
std::string exact_text(double value);        // %.17g

}  // namespace fednode::cli
