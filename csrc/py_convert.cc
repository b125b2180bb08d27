#include "py_convert.h"

namespace psrt {

[[noreturn]] void Raise(const Status& st) {
  py::object errors = py::module_::import("psrt.errors");
  py::object cls = errors.attr("exception_type_from_error_code")(static_cast<int>(st.code()));
  py::object exc = cls(py::none(), py::none(), st.message());
  PyErr_SetObject(cls.ptr(), exc.ptr());
  throw py::error_already_set();
}

DType ArrayDType(const py::array& a) {
  if (a.dtype().is(py::dtype::of<float>())) return DType::kFloat32;
  if (a.dtype().is(py::dtype::of<double>())) return DType::kFloat64;
  if (a.dtype().is(py::dtype::of<int64_t>())) return DType::kInt64;
  return DType::kInvalid;
}

std::string ShapeOf(const py::array& a) {
  std::string s = "[";
  for (py::ssize_t i = 0; i < a.ndim(); ++i) s += (i ? "," : "") + std::to_string(a.shape(i));
  return s + "]";
}

std::string ShapeOf(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string DTypeStr(const py::array& a) { return py::str(a.dtype()).cast<std::string>(); }

void CheckArray(const py::array& a, const std::string& what, const std::string& name,
                DType dtype, const std::vector<int64_t>& shape, bool writable) {
  bool shape_ok = a.ndim() == static_cast<py::ssize_t>(shape.size());
  for (size_t i = 0; shape_ok && i < shape.size(); ++i) shape_ok = a.shape(i) == shape[i];
  if (ArrayDType(a) != dtype || !shape_ok)
    Raise(InvalidArgument(what + " for variable '" + name + "' must be " + DTypeName(dtype) +
                          ShapeOf(shape) + "; got " + DTypeStr(a) + ShapeOf(a)));
  if (!CContiguous(a)) {
    std::string strides = "(";
    for (py::ssize_t i = 0; i < a.ndim(); ++i)
      strides += (i ? "," : "") + std::to_string(a.strides(i));
    Raise(InvalidArgument(what + " for variable '" + name + "' must be a C-contiguous " +
                          DTypeName(dtype) + ShapeOf(shape) + " array; got a non-contiguous " +
                          DTypeStr(a) + ShapeOf(a) + " array with strides " + strides +
                          ") (use numpy.ascontiguousarray)"));
  }
  if (writable && !a.writeable())
    Raise(InvalidArgument(what + " for variable '" + name + "' must be writable"));
}

}  // namespace psrt
