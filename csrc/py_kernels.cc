// The kernel test hooks of psrt._core: the fused optimizer kernels (kernels.h) applied to
// numpy arrays in place, the instruction-set targets and the slot names of each optimizer.
// Tests and benchmarks use them to hold every kernel to its numpy reference on every target.
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kernels.h"
#include "py_convert.h"
#include "py_register.h"

namespace psrt {

namespace {

// The scalar keyword arguments of apply_dense/apply_sparse, TF's kernel inputs by TF's names.
// rho and epsilon: None is TF1's default for the optimizer (rho: Adadelta 0.95, RMSProp's decay
// 0.9; epsilon: RMSProp 1e-10, otherwise 1e-8).
struct KernelKwargs {
  double learning_rate;
  double momentum;
  bool use_nesterov;
  double beta1;
  double beta2;
  std::optional<double> epsilon;
  double beta1_power;
  double beta2_power;
  std::optional<double> rho;
  double l1;
  double l2;
  double l2_shrinkage;
  double lr_power;
  int64_t global_step;
};

KernelArgs MakeKernelArgs(const std::string& optimizer, DType dtype, const KernelKwargs& k) {
  KernelArgs a;
  Check(ParseOptimizerName(optimizer, &a.optimizer));
  const bool rmsprop =
      a.optimizer == Optimizer::kRMSProp || a.optimizer == Optimizer::kCenteredRMSProp;
  a.dtype = dtype;
  a.learning_rate = k.learning_rate;
  a.momentum = k.momentum;
  a.use_nesterov = k.use_nesterov;
  a.beta1 = k.beta1;
  a.beta2 = k.beta2;
  a.epsilon = k.epsilon.value_or(rmsprop ? 1e-10 : 1e-8);
  a.beta1_power = k.beta1_power;
  a.beta2_power = k.beta2_power;
  a.rho = k.rho.value_or(rmsprop ? 0.9 : 0.95);
  a.l1 = k.l1;
  a.l2 = k.l2;
  a.l2_shrinkage = k.l2_shrinkage;
  a.lr_power = k.lr_power;
  a.global_step = k.global_step;
  return a;
}

void CheckKernelArray(const py::array& a, const char* what, DType dtype, size_t n) {
  if (ArrayDType(a) != dtype || !CContiguous(a) || static_cast<size_t>(a.size()) != n ||
      !a.writeable())
    Raise(InvalidArgument(std::string(what) + " must be a writable C-contiguous " +
                          DTypeName(dtype) + " array of " + std::to_string(n) +
                          " elements; got " + DTypeStr(a) + ShapeOf(a)));
}

// "RMSProp needs 2 slots (rms, momentum); got 3".
void CheckSlotCount(Optimizer opt, size_t given) {
  const int n = NumSlots(opt);
  if (static_cast<int>(given) == n) return;
  std::string names;
  for (int k = 0; k < n; ++k) names += std::string(k ? ", " : " (") + SlotName(opt, k);
  Raise(InvalidArgument(std::string(OptimizerName(opt)) + " needs " + std::to_string(n) +
                        " slots" + (n ? names + ")" : "") + "; got " + std::to_string(given)));
}

void ApplyDensePy(const std::string& optimizer, py::array var, std::vector<py::array> slots,
                  py::array grad, const KernelKwargs& kw) {
  DType dt = ArrayDType(var);
  if (dt != DType::kFloat32 && dt != DType::kFloat64)
    Raise(InvalidArgument("var dtype " + DTypeStr(var) + " not supported; expected float32 or float64"));
  size_t n = static_cast<size_t>(var.size());
  CheckKernelArray(var, "var", dt, n);
  KernelArgs a = MakeKernelArgs(optimizer, dt, kw);
  CheckSlotCount(a.optimizer, slots.size());
  void* sp[kMaxSlots] = {};
  for (size_t i = 0; i < slots.size(); ++i) {
    CheckKernelArray(slots[i], "slot", dt, n);
    sp[i] = slots[i].mutable_data();
  }
  if (ArrayDType(grad) != dt || !CContiguous(grad) || static_cast<size_t>(grad.size()) != n)
    Raise(InvalidArgument("grad must be a C-contiguous " + std::string(DTypeName(dt)) +
                          " array of " + std::to_string(n) + " elements; got " + DTypeStr(grad) +
                          ShapeOf(grad)));
  void* v = var.mutable_data();
  const void* g = grad.data();
  Check(WithoutGil([&] { return ApplyDense(a, v, sp, g, n); }));
}

void ApplySparsePy(const std::string& optimizer, py::array var, std::vector<py::array> slots,
                   py::array indices, py::array rows, const KernelKwargs& kw) {
  DType dt = ArrayDType(var);
  if ((dt != DType::kFloat32 && dt != DType::kFloat64) || var.ndim() < 1)
    Raise(InvalidArgument("var must be a float32 or float64 array of rank >= 1; got " +
                          DTypeStr(var) + ShapeOf(var)));
  size_t n = static_cast<size_t>(var.size());
  size_t num_rows = static_cast<size_t>(var.shape(0));
  size_t width = num_rows ? n / num_rows : 0;
  CheckKernelArray(var, "var", dt, n);
  KernelArgs a = MakeKernelArgs(optimizer, dt, kw);
  CheckSlotCount(a.optimizer, slots.size());
  void* sp[kMaxSlots] = {};
  for (size_t i = 0; i < slots.size(); ++i) {
    CheckKernelArray(slots[i], "slot", dt, n);
    sp[i] = slots[i].mutable_data();
  }
  if (ArrayDType(indices) != DType::kInt64 || indices.ndim() != 1 || !CContiguous(indices))
    Raise(InvalidArgument("indices must be a 1-D C-contiguous int64 array; got " +
                          DTypeStr(indices) + ShapeOf(indices)));
  size_t k = static_cast<size_t>(indices.size());
  if (ArrayDType(rows) != dt || !CContiguous(rows) || static_cast<size_t>(rows.size()) != k * width)
    Raise(InvalidArgument("rows must be a C-contiguous " + std::string(DTypeName(dt)) +
                          " array of " + std::to_string(k) + " x " + std::to_string(width) +
                          " elements; got " + DTypeStr(rows) + ShapeOf(rows)));
  void* v = var.mutable_data();
  const auto* idx = static_cast<const int64_t*>(indices.data());
  const void* r = rows.data();
  Check(WithoutGil([&] { return ApplySparse(a, v, sp, num_rows, width, idx, k, r); }));
}

}  // namespace

void RegisterKernels(py::module_& m) {
  m.def("compiled_kernel_targets", &CompiledKernelTargets);
  m.def("kernel_targets", &SupportedKernelTargets);
  m.def("kernel_target", &ActiveKernelTarget);
  m.def("set_kernel_target", [](const std::string& name) { Check(SetKernelTarget(name)); },
        py::arg("name"));
  m.def("apply_dense",
        [](const std::string& optimizer, py::array var, std::vector<py::array> slots,
           py::array grad, double learning_rate, double momentum, bool use_nesterov,
           double beta1, double beta2, std::optional<double> epsilon, double beta1_power,
           double beta2_power, std::optional<double> rho, double l1, double l2,
           double l2_shrinkage, double lr_power, int64_t global_step) {
          ApplyDensePy(optimizer, std::move(var), std::move(slots), std::move(grad),
                       {learning_rate, momentum, use_nesterov, beta1, beta2, epsilon,
                        beta1_power, beta2_power, rho, l1, l2, l2_shrinkage, lr_power,
                        global_step});
        },
        py::arg("optimizer"), py::arg("var"), py::arg("slots"), py::arg("grad"), py::kw_only(),
        py::arg("learning_rate"), py::arg("momentum") = 0.0, py::arg("use_nesterov") = false,
        py::arg("beta1") = 0.9, py::arg("beta2") = 0.999, py::arg("epsilon") = py::none(),
        py::arg("beta1_power") = 0.0, py::arg("beta2_power") = 0.0, py::arg("rho") = py::none(),
        py::arg("l1") = 0.0, py::arg("l2") = 0.0, py::arg("l2_shrinkage") = 0.0,
        py::arg("lr_power") = -0.5, py::arg("global_step") = 0);
  m.def("apply_sparse",
        [](const std::string& optimizer, py::array var, std::vector<py::array> slots,
           py::array indices, py::array rows, double learning_rate, double momentum,
           bool use_nesterov, double beta1, double beta2, std::optional<double> epsilon,
           double beta1_power, double beta2_power, std::optional<double> rho, double l1,
           double l2, double l2_shrinkage, double lr_power, int64_t global_step) {
          ApplySparsePy(optimizer, std::move(var), std::move(slots), std::move(indices),
                        std::move(rows),
                        {learning_rate, momentum, use_nesterov, beta1, beta2, epsilon,
                         beta1_power, beta2_power, rho, l1, l2, l2_shrinkage, lr_power,
                         global_step});
        },
        py::arg("optimizer"), py::arg("var"), py::arg("slots"), py::arg("indices"),
        py::arg("rows"), py::kw_only(), py::arg("learning_rate"), py::arg("momentum") = 0.0,
        py::arg("use_nesterov") = false, py::arg("beta1") = 0.9, py::arg("beta2") = 0.999,
        py::arg("epsilon") = py::none(), py::arg("beta1_power") = 0.0,
        py::arg("beta2_power") = 0.0, py::arg("rho") = py::none(), py::arg("l1") = 0.0,
        py::arg("l2") = 0.0, py::arg("l2_shrinkage") = 0.0, py::arg("lr_power") = -0.5,
        py::arg("global_step") = 0);
  m.def("slot_names", [](const std::string& optimizer) {
    Optimizer o;
    Check(ParseOptimizerName(optimizer, &o));
    std::vector<std::string> out;
    for (int i = 0; i < NumSlots(o); ++i) out.push_back(SlotName(o, i));
    return out;
  }, py::arg("optimizer"));
}

}  // namespace psrt
