// The module's parts, one file each, registered by module.cpp.
#pragma once

#include <pybind11/pybind11.h>

namespace fednode::python {

void bind_simulate(pybind11::module_& m);    // simulate.cpp: fednode simulate
void bind_classifier(pybind11::module_& m);  // classifier.cpp: a head with its recipe; predict, export
void bind_node(pybind11::module_& m);        // node.cpp: fednode run
void bind_tools(pybind11::module_& m);       // tools.cpp: keygen, topologies, extract

}  // namespace fednode::python
