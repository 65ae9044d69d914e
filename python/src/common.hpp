// Shared by the binding's translation units: tensors in and out through DLPack, and long engine
// calls run off the interpreter's thread so that the GIL is free and Ctrl+C can cancel them.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <future>
#include <string>

#include "castscope/cast.hpp"
#include "castscope/placed.hpp"
#include "castscope/tensor.hpp"

namespace castscope::py {

namespace nb = nanobind;

// Where a result goes: the framework of the input, so numpy in gives numpy out and a torch
// tensor gives torch tensors on its device.
enum class Framework { Numpy, Torch };

// A C-contiguous array handed in through DLPack or the buffer protocol. `as_dtype` overrides the
// element type for storage that numpy cannot describe (ml_dtypes bfloat16 arrives as uint16).
struct Input {
  nb::ndarray<nb::ro, nb::c_contig> array;
  DType dtype = DType::F32;
  Shape shape;
  bool cuda = false;
  int device_id = 0;
};
Input read_input(nb::ndarray<nb::ro, nb::c_contig> a, const std::string& as_dtype,
                 const char* what);
Tensor host_tensor(const Input& in);                // borrows the array's memory
exec::PlacedTensor device_tensor(const Input& in);  // borrows the array's device memory

nb::object to_python(const Tensor& t, Framework fw);
// A tensor where it is: host memory as above, device memory as a CUDA array on device_id.
nb::object to_python(const exec::PlacedTensor& t, Framework fw, int device_id);

// The engine thread: one long-lived thread that runs every long call, so that the GIL stays free
// and the CUDA backend's per-thread stream (and the memory it frees in stream order) outlives
// each call. post() queues a task; on_engine_thread() tells a nested call (an export's progress
// callback that casts) to run inline instead of waiting on itself.
void post(std::function<void()> task);
bool on_engine_thread();

// Runs fn on the engine thread while this thread, holding the GIL only briefly, polls for
// signals every 50 ms. A signal handler that raises (Ctrl+C) sets job.cancel; the engine then
// stops at its next check and the Python exception propagates. `progress` (a Python callable or
// None) is called with each new, larger fraction, under the GIL, from the engine thread that
// reports it; an exception from it cancels the job the same way.
template <class F>
auto run_job(JobControl& job, nb::handle progress, F&& fn) -> decltype(fn()) {
  using R = decltype(fn());
  if (on_engine_thread()) {
    nb::gil_scoped_release release;
    return fn();
  }
  auto task = std::make_shared<std::packaged_task<R()>>(std::forward<F>(fn));
  std::future<R> done = task->get_future();
  std::exception_ptr py_error;  // guarded by the GIL
  double reported = -1;         // guarded by the GIL
  const bool has_progress = progress.is_valid() && !progress.is_none();
  if (has_progress)
    job.on_progress = [&](double p) {
      nb::gil_scoped_acquire acquire;
      if (py_error || p <= reported) return;
      reported = p;
      try {
        progress(p);
      } catch (...) {
        py_error = std::current_exception();
        job.cancel = true;
      }
    };
  {
    nb::gil_scoped_release release;
    post([task] { (*task)(); });
    while (done.wait_for(std::chrono::milliseconds(50)) != std::future_status::ready) {
      nb::gil_scoped_acquire acquire;
      if (!py_error && PyErr_CheckSignals() != 0) {
        py_error = std::make_exception_ptr(nb::python_error());
        job.cancel = true;
      }
    }
  }
  job.on_progress = nullptr;
  if (py_error) std::rethrow_exception(py_error);
  R r = done.get();
  if (has_progress && reported < 1.0) progress(1.0);
  return r;
}

}  // namespace castscope::py
