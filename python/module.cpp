// The `fednode._fednode` extension: bindings only (docs/python.md). Each call is the one the CLI
// makes -- fednode.simulate is `fednode simulate` (cli/simulate_command.h) with its data lent as
// arrays, fednode.Node is `fednode run`'s node -- so that Python and the command line cannot give
// different results. The Pythonic surface (keywords, dicts, tensors) is python/fednode/*.py.
#include "core/options.h"
#include "core/types.h"
#include "crypto/errors.h"
#include "python/bindings.h"

#include <exception>

namespace py = pybind11;

PYBIND11_MODULE(_fednode, m) {
  using namespace fednode;
  m.doc() = "fednode's C++ core; use the fednode package, not this module";
  // The exception classes are Python's (fednode/_errors.py: each a fednode.Error and, for bad
  // input, a ValueError, with its exit status), raised here by the C++ type thrown.
  py::register_exception_translator([](std::exception_ptr p) {
    const auto raise = [](const char* name, const char* message) {
      const py::object type = py::module_::import("fednode._errors").attr(name);
      PyErr_SetString(type.ptr(), message);
    };
    try {
      if (p) std::rethrow_exception(p);
    } catch (const Interrupted&) {
      PyErr_SetString(PyExc_KeyboardInterrupt, "interrupted: asked to stop");
    } catch (const NetworkError& e) {
      raise("NetworkError", e.what());
    } catch (const SecurityError& e) {
      raise("SecurityError", e.what());
    } catch (const InputError& e) {
      raise("InputError", e.what());
    } catch (const UsageError& e) {
      raise("UsageError", e.what());
    }
  });
  python::bind_simulate(m);
  python::bind_classifier(m);
  python::bind_node(m);
  python::bind_tools(m);
}
