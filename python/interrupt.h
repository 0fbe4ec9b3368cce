// Long C++ calls from Python: the GIL released, Ctrl-C still heard.
#pragma once

#include <pybind11/pybind11.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <thread>

namespace fednode::python {

// Runs `work` on a thread of its own with the GIL released, while this (Python's) thread looks for
// Ctrl-C every tenth of a second: a signal sets `stop`, the work ends at its next class, epoch or
// step (Interrupted, or a stopped node), and KeyboardInterrupt is raised here once it has. Python
// handles signals only on its main thread while it holds the GIL, which a call that simply
// released it would not give back until the work was done.
template <typename Result>
Result run_interruptibly(std::atomic<bool>& stop, const std::function<Result()>& work) {
  namespace py = pybind11;
  std::packaged_task<Result()> task(work);
  std::future<Result> done = task.get_future();
  std::thread worker;
  {
    py::gil_scoped_release release;
    worker = std::thread(std::move(task));
  }
  bool interrupted = false;
  for (;;) {
    std::future_status status;
    {
      py::gil_scoped_release release;
      status = done.wait_for(std::chrono::milliseconds(100));
    }
    if (status == std::future_status::ready) break;
    if (!interrupted && PyErr_CheckSignals() != 0) {
      interrupted = true;  // KeyboardInterrupt is pending; the work is told to end first
      stop = true;
    }
  }
  {
    py::gil_scoped_release release;
    worker.join();
  }
  if (interrupted) throw py::error_already_set();
  return done.get();
}

// A Python callable that C++ may copy and call from any thread: the GIL is taken to call it and
// to let it go, never to copy it.
class PythonCallback {
 public:
  PythonCallback() = default;
  explicit PythonCallback(pybind11::object f)
      : f_(f.is_none() ? nullptr : new pybind11::object(std::move(f)), [](pybind11::object* o) {
          pybind11::gil_scoped_acquire gil;
          delete o;
        }) {}
  explicit operator bool() const { return f_ != nullptr; }
  template <typename... Args>
  void operator()(Args&&... args) const {
    pybind11::gil_scoped_acquire gil;
    (*f_)(std::forward<Args>(args)...);
  }

 private:
  std::shared_ptr<pybind11::object> f_;
};

}  // namespace fednode::python
