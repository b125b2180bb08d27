// The conversions every bindings file shares: a non-OK Status raised as its psrt.errors
// class, the GIL released around a core call, and numpy arrays checked against what the core
// expects (dtype, shape, C-contiguity, writability) with messages naming both. Only the
// bindings files (bindings.cc, py_*.cc) include pybind11, every one of them through this
// header, so all of them see the same type casters (pybind11/stl.h among them).
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "status.h"
#include "wire.h"

namespace py = pybind11;

namespace psrt {

// Raises the psrt.errors class of st's code (exception_type_from_error_code) with its message.
[[noreturn]] void Raise(const Status& st);

inline void Check(const Status& st) {
  if (!st.ok()) Raise(st);
}

// Runs f() with the GIL released and returns its result. Used instead of pybind11's scoped
// release on purpose: at interpreter exit CPython ends a daemon thread that asks for the GIL
// back by calling pthread_exit inside PyEval_RestoreThread, and that forced unwind leaving a
// destructor (implicitly noexcept) calls std::terminate. That aborted a ps whose
// Server.stop() ran on a daemon thread while the main thread left join(). Here the GIL is
// taken back in ordinary code, so the unwind passes through (pybind11 rethrows it).
template <typename F>
auto WithoutGil(F&& f) -> decltype(f()) {
  PyThreadState* saved = PyEval_SaveThread();
  if constexpr (std::is_void_v<decltype(f())>) {
    try {
      f();
    } catch (...) {
      PyEval_RestoreThread(saved);
      throw;
    }
    PyEval_RestoreThread(saved);
  } else {
    std::optional<decltype(f())> result;
    try {
      result.emplace(f());
    } catch (...) {
      PyEval_RestoreThread(saved);
      throw;
    }
    PyEval_RestoreThread(saved);
    return std::move(*result);
  }
}

// The core dtype of a numpy array: float32, float64, int64, else kInvalid.
DType ArrayDType(const py::array& a);
// "[2,3]"
std::string ShapeOf(const py::array& a);
std::string ShapeOf(const std::vector<int64_t>& shape);
// numpy's name of a's dtype: "float32".
std::string DTypeStr(const py::array& a);

inline bool CContiguous(const py::array& a) {
  return (a.flags() & py::array::c_style) != 0;
}

// Checks that `a` is a C-contiguous array of `dtype` with `shape`; InvalidArgument naming
// the variable, the expected and the given dtype/shape otherwise.
void CheckArray(const py::array& a, const std::string& what, const std::string& name,
                DType dtype, const std::vector<int64_t>& shape, bool writable);

}  // namespace psrt
