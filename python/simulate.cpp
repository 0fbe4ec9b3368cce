// fednode.simulate: `fednode simulate` (cli/simulate_command.h) with its data lent as arrays.
#include "cli/simulate_command.h"
#include "python/arrays.h"
#include "python/bindings.h"
#include "python/interrupt.h"

#include <pybind11/stl.h>

namespace py = pybind11;

namespace fednode::python {
namespace {

std::string simulate(const std::vector<std::string>& argv, const std::optional<RowsArray>& train_X,
                     const std::optional<LabelsArray>& train_y, const std::optional<RowsArray>& test_X,
                     const std::optional<LabelsArray>& test_y, const std::vector<std::string>& class_names,
                     const py::object& progress) {
  cli::SimulateHooks hooks;
  if (train_X && train_y && test_X && test_y) {
    DataSettings::Lent lent;
    lent.train = lend(*train_X, *train_y, "train");
    lent.test = lend(*test_X, *test_y, "test");
    lent.class_names = class_names;
    hooks.lent = lent;
  }
  const PythonCallback say(progress);
  if (say) hooks.progress = [say](const std::string& line) { say(line); };
  std::atomic<bool> stop{false};
  hooks.stop = &stop;
  return run_interruptibly<std::string>(stop, [&] { return cli::simulate_command(argv, hooks); });
}

}  // namespace

void bind_simulate(py::module_& m) {
  m.def("simulate", &simulate, py::arg("argv"), py::arg("train_X"), py::arg("train_y"), py::arg("test_X"),
        py::arg("test_y"), py::arg("class_names"), py::arg("progress"),
        "fednode simulate ARGV with the data lent as arrays; returns the JSON report");
  m.def("simulate_options", [] { return py::make_tuple(cli::simulate_valued_options(), cli::simulate_flag_options()); },
        "the options fednode simulate takes with a value, and its flags");
}

}  // namespace fednode::python
