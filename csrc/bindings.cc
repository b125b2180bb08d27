// pybind11 bindings: the only file that knows Python. Arguments are converted and checked
// with the GIL held; every blocking or long core call then runs with the GIL released (safe
// because the core keeps no Python object and no numpy pointer past the call, and the arrays
// stay referenced by the caller's frame for the call's duration). A non-OK Status becomes
// the psrt.errors class of its code.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cmath>
#include <cstring>
#include <mutex>
#include <optional>
#include <type_traits>
#include <utility>

#include "auth.h"
#include "client.h"
#include "kernels.h"
#include "server.h"
#include "wire.h"

namespace py = pybind11;

namespace psrt {
namespace {

[[noreturn]] void Raise(const Status& st) {
  py::object errors = py::module_::import("psrt.errors");
  py::object cls = errors.attr("exception_type_from_error_code")(static_cast<int>(st.code()));
  py::object exc = cls(py::none(), py::none(), st.message());
  PyErr_SetObject(cls.ptr(), exc.ptr());
  throw py::error_already_set();
}

void Check(const Status& st) {
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

DType ParseDType(const std::string& s) {
  if (s == "float32") return DType::kFloat32;
  if (s == "float64") return DType::kFloat64;
  if (s == "int64") return DType::kInt64;
  Raise(InvalidArgument("dtype " + s + " not supported; expected float32, float64 or int64"));
}

Optimizer ParseOptimizer(const std::string& s) {
  if (s.empty() || s == "None") return Optimizer::kNone;
  if (s == "GradientDescent") return Optimizer::kGradientDescent;
  if (s == "Adagrad") return Optimizer::kAdagrad;
  if (s == "Momentum") return Optimizer::kMomentum;
  if (s == "Adam") return Optimizer::kAdam;
  if (s == "Adadelta") return Optimizer::kAdadelta;
  if (s == "AdagradDA") return Optimizer::kAdagradDA;
  if (s == "Ftrl") return Optimizer::kFtrl;
  if (s == "ProximalGradientDescent") return Optimizer::kProximalGradientDescent;
  if (s == "ProximalAdagrad") return Optimizer::kProximalAdagrad;
  if (s == "RMSProp") return Optimizer::kRMSProp;
  if (s == "CenteredRMSProp") return Optimizer::kCenteredRMSProp;
  Raise(InvalidArgument("optimizer '" + s +
                        "' not supported; expected GradientDescent, Adagrad, Momentum, Adam, "
                        "Adadelta, AdagradDA, Ftrl, ProximalGradientDescent, ProximalAdagrad, "
                        "RMSProp or CenteredRMSProp"));
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

bool CContiguous(const py::array& a) {
  return (a.flags() & py::array::c_style) != 0;
}

// Checks that `a` is a C-contiguous array of `dtype` with `shape`; InvalidArgument naming
// the variable, the expected and the given dtype/shape otherwise.
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

// ---- Kernels ----------------------------------------------------------------------------

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

// An initializer run on the ps: {"kind": "zeros" | "ones" | "constant" | "random_uniform" |
// "random_normal" | "truncated_normal" | "variance_scaling", "a", "b", "fan_mode", "distribution",
// "seed", "offset", "full_shape"} (wire.h InitSpec; a and b as the kind defines them).
InitSpec ParseInitSpec(const std::string& var, const py::dict& d) {
  static const std::pair<const char*, InitKind> kKinds[] = {
      {"zeros", InitKind::kZeros}, {"ones", InitKind::kOnes}, {"constant", InitKind::kConstant},
      {"random_uniform", InitKind::kRandomUniform}, {"random_normal", InitKind::kRandomNormal},
      {"truncated_normal", InitKind::kTruncatedNormal},
      {"variance_scaling", InitKind::kVarianceScaling}};
  InitSpec spec;
  const std::string kind = d.contains("kind") ? d["kind"].cast<std::string>() : "";
  bool found = false;
  for (const auto& k : kKinds)
    if (kind == k.first) {
      spec.kind = k.second;
      found = true;
    }
  if (!found)
    Raise(InvalidArgument("variable '" + var + "': initializer kind '" + kind +
                          "' not supported; expected zeros, ones, constant, random_uniform, "
                          "random_normal, truncated_normal or variance_scaling"));
  auto num = [&](const char* k, double dflt) {
    return d.contains(k) ? d[k].cast<double>() : dflt;
  };
  spec.a = num("a", 0.0);
  spec.b = num("b", 0.0);
  static const char* kModes[] = {"fan_in", "fan_out", "fan_avg"};
  static const char* kDists[] = {"truncated_normal", "untruncated_normal", "uniform"};
  auto pick = [&](const char* k, const char* const* names, const char* dflt) -> uint8_t {
    const std::string v = d.contains(k) ? d[k].cast<std::string>() : dflt;
    for (uint8_t i = 0; i < 3; ++i)
      if (v == names[i]) return i;
    Raise(InvalidArgument("variable '" + var + "': " + k + " '" + v + "' not supported; expected " +
                          names[0] + ", " + names[1] + " or " + names[2]));
  };
  spec.fan_mode = pick("fan_mode", kModes, "fan_in");
  spec.distribution = pick("distribution", kDists, "truncated_normal");
  spec.seed = d.contains("seed") ? d["seed"].cast<uint64_t>() : 0;
  spec.offset = d.contains("offset") ? d["offset"].cast<uint64_t>() : 0;
  if (d.contains("full_shape")) spec.full_shape = d["full_shape"].cast<std::vector<int64_t>>();
  return spec;
}

// ---- Server -----------------------------------------------------------------------------

class PyServer {
 public:
  PyServer(const std::string& host, int port, const std::string& job, int task,
           uint64_t max_payload, const py::bytes& secret, double hello_timeout,
           double idle_timeout, int max_connections, uint64_t chunk_bytes,
           uint64_t max_inflight_bytes, double stall_timeout, const std::string& cluster_def) {
    ServerOptions o;
    o.cluster_def = cluster_def;
    o.host = host;
    o.port = port;
    o.job = job;
    o.task = task;
    o.max_payload = max_payload;
    o.secret = secret;
    o.hello_timeout_s = hello_timeout;
    o.idle_timeout_s = idle_timeout;
    o.max_connections = max_connections;
    o.chunk_bytes = chunk_bytes;
    o.max_inflight_bytes = max_inflight_bytes;
    o.stall_timeout_s = stall_timeout;
    Check(WithoutGil([&] { return Server::Create(o, &server_); }));
  }
  int port() const { return server_->port(); }
  int64_t incarnation() const { return server_->incarnation(); }
  void stop() {
    WithoutGil([&] { server_->Stop(); });
  }
  bool wait(double timeout_s) {
    return WithoutGil([&] { return server_->Wait(timeout_s); });
  }
  bool stopped() const { return server_->stopped(); }
  std::vector<std::pair<std::string, int>> done_workers() const { return server_->DoneWorkers(); }
  int num_connections() const { return server_->NumConnections(); }
  size_t num_variables() const { return server_->store()->size(); }
  std::vector<std::string> take_events() { return server_->TakeEvents(); }
  uint64_t peak_inflight_bytes() const { return server_->PeakInflightBytes(); }
  void set_cluster_def(const std::string& def) { Check(server_->SetClusterDef(def)); }

 private:
  std::unique_ptr<Server> server_;
};

// ---- Client -----------------------------------------------------------------------------

class PyClient {
 public:
  PyClient(const std::string& job, int task, const py::bytes& secret, double heartbeat_timeout)
      : client_(job, task, secret, heartbeat_timeout) {}

  void connect(int shard, const std::string& address, double timeout_s) {
    Check(WithoutGil([&] {
      std::lock_guard<std::mutex> l(mu_);
      return client_.Connect(shard, address, timeout_s);
    }));
  }

  // specs: (shard, name, dtype, shape, optimizer, hyper-parameters dict, init or None)
  std::vector<std::pair<int, bool>> register_vars(const py::list& specs) {
    std::vector<VarSpec> vs;
    std::vector<int> shards;
    std::vector<const void*> inits;
    std::vector<py::array> keep;
    for (py::handle item : specs) {
      auto t = item.cast<py::tuple>();
      if (t.size() != 7)
        Raise(InvalidArgument("register entry must be (shard, name, dtype, shape, optimizer, "
                              "params, init)"));
      VarSpec s;
      int shard = t[0].cast<int>();
      s.name = t[1].cast<std::string>();
      s.dtype = ParseDType(t[2].cast<std::string>());
      s.shape = t[3].cast<std::vector<int64_t>>();
      s.optimizer = ParseOptimizer(t[4].cast<std::string>());
      py::dict p = t[5].cast<py::dict>();
      auto get = [&](const char* k, double d) {
        return p.contains(k) ? p[k].cast<double>() : d;
      };
      s.learning_rate = get("learning_rate", 0.0);
      s.momentum = get("momentum", 0.0);
      s.beta1 = get("beta1", 0.9);
      s.beta2 = get("beta2", 0.999);
      s.epsilon = get("epsilon", 1e-8);
      s.slot_init = get("slot_init", 0.0);
      s.use_locking = get("use_locking", 0.0) != 0.0;
      s.use_nesterov = get("use_nesterov", 0.0) != 0.0;
      const double reps = get("replicas_to_aggregate", 0.0);
      const double total = get("total_num_replicas", reps);
      if (!(reps >= 0 && reps <= 1e6 && reps == static_cast<uint32_t>(reps)) ||
          !(total >= 0 && total <= 1e6 && total == static_cast<uint32_t>(total)) ||
          ((reps == 0) != (total == 0)))
        Raise(InvalidArgument("variable '" + s.name + "': replicas_to_aggregate " +
                              std::to_string(reps) + " and total_num_replicas " +
                              std::to_string(total) +
                              " must be whole numbers, both 0 (asynchronous) or both >= 1"));
      s.replicas_to_aggregate = static_cast<uint32_t>(reps);
      s.total_num_replicas = static_cast<uint32_t>(total);
      s.rho = get("rho", 0.0);
      s.l1 = get("l1", 0.0);
      s.l2 = get("l2", 0.0);
      s.l2_shrinkage = get("l2_shrinkage", 0.0);
      s.lr_power = get("lr_power", -0.5);
      s.slot_init2 = get("slot_init2", 0.0);
      s.slot_init3 = get("slot_init3", 0.0);
      const void* init = nullptr;
      const double table = get("table", 0.0);
      const double max_rows = get("max_rows", 0.0);
      if (!(table == 0.0 || table == 1.0) ||
          !(max_rows >= 0 && max_rows <= 9e15 && max_rows == std::floor(max_rows)))
        Raise(InvalidArgument("variable '" + s.name + "': table " + std::to_string(table) +
                              " and max_rows " + std::to_string(max_rows) +
                              " must be 0 or 1 and a whole number >= 0"));
      s.table = static_cast<uint8_t>(table);
      s.max_rows = static_cast<uint64_t>(max_rows);
      if (s.table) {
        // A table's initializer (a dict, or None for zeros) always travels with it;
        // params["initialize"] asks the ps task to empty (initialize) it.
        if (py::isinstance<py::dict>(t[6])) s.init = ParseInitSpec(s.name, t[6].cast<py::dict>());
        else if (!t[6].is_none())
          Raise(InvalidArgument("hash table '" + s.name + "': the initializer must be a spec "
                                "dict or None (zeros), not an array"));
        static const char kInitialize = 0;
        if (get("initialize", 0.0) != 0.0) init = &kInitialize;
      } else if (py::isinstance<py::dict>(t[6])) {
        s.init = ParseInitSpec(s.name, t[6].cast<py::dict>());
      } else if (!t[6].is_none()) {
        py::array a = t[6].cast<py::array>();
        CheckArray(a, "initial value", s.name, s.dtype, s.shape, false);
        keep.push_back(a);
        init = a.data();
      }
      vs.push_back(std::move(s));
      shards.push_back(shard);
      inits.push_back(init);
    }
    std::vector<int> handles;
    Check(WithoutGil([&] {
      std::lock_guard<std::mutex> l(mu_);
      return client_.Register(vs, shards, inits, &handles);
    }));
    std::vector<std::pair<int, bool>> out;
    for (int h : handles) out.emplace_back(h, client_.var(h).initialized);
    return out;
  }

  const RemoteVar& Var(int h) const {
    if (h < 0 || h >= client_.num_vars())
      Raise(InvalidArgument("unknown variable handle " + std::to_string(h)));
    return client_.var(h);
  }

  Call MakeCall(Op op, const RemoteVar& v) const {
    Call c;
    c.op = op;
    c.shard = v.shard;
    c.var_id = v.id;
    c.dtype = v.spec.dtype;
    return c;
  }

  // A PUSH of a dense gradient (checked against the variable), with `lr` when given.
  Call DensePush(const RemoteVar& v, const py::array& grad, std::optional<double> lr) const {
    CheckArray(grad, "gradient", v.spec.name, v.spec.dtype, v.spec.shape, false);
    Call c = MakeCall(Op::kPush, v);
    c.send[0] = grad.data();
    c.send_len[0] = v.nbytes;
    if (lr) {
      c.flags |= kFlagHasLr;
      c.arg0 = *lr;
    }
    return c;
  }

  Status RunLocked(std::vector<Call>* calls) {
    return WithoutGil([&] {
      std::lock_guard<std::mutex> l(mu_);
      return client_.Run(calls, client_.timeout());
    });
  }

  void pull(const std::vector<int>& handles, const std::vector<py::array>& outs, int slot) {
    if (handles.size() != outs.size())
      Raise(InvalidArgument("pull: " + std::to_string(handles.size()) + " variables but " +
                            std::to_string(outs.size()) + " output arrays"));
    std::vector<Call> calls;
    calls.reserve(handles.size());
    for (size_t i = 0; i < handles.size(); ++i) {
      const RemoteVar& v = Var(handles[i]);
      CheckArray(outs[i], "pull output", v.spec.name, v.spec.dtype, v.spec.shape, true);
      Call c = MakeCall(Op::kPull, v);
      c.slot = static_cast<uint8_t>(slot);
      c.recv = const_cast<void*>(outs[i].data());
      c.recv_len = v.nbytes;
      calls.push_back(std::move(c));
    }
    Check(RunLocked(&calls));
  }

  // A row request of `indices` (1-D C-contiguous int64) to variable v: a PULL into `rows` or
  // a PUSH of `rows` (count x the variable's row shape, its dtype), both checked first.
  Call RowCall(Op op, const RemoteVar& v, const py::array& indices, const py::array& rows) const {
    const bool pull = op == Op::kPull;
    if (v.spec.shape.empty())
      Raise(InvalidArgument(std::string(pull ? "row pull from" : "row-sparse push to") +
                            " scalar variable '" + v.spec.name + "'"));
    if (ArrayDType(indices) != DType::kInt64 || indices.ndim() != 1 || !CContiguous(indices))
      Raise(InvalidArgument("indices for variable '" + v.spec.name +
                            "' must be a 1-D C-contiguous int64 array; got " +
                            DTypeStr(indices) + ShapeOf(indices)));
    std::vector<int64_t> row_shape = v.spec.shape;
    row_shape[0] = indices.size();
    CheckArray(rows, pull ? "row output" : "gradient rows", v.spec.name, v.spec.dtype,
               row_shape, pull);
    Call c = MakeCall(op, v);
    c.flags |= kFlagSparse;
    c.count = static_cast<uint32_t>(indices.size());
    c.send[0] = indices.data();
    c.send_len[0] = static_cast<size_t>(indices.size()) * 8;
    if (pull) {
      c.recv = const_cast<void*>(rows.data());
      c.recv_len = static_cast<size_t>(rows.nbytes());
    } else {
      c.send[1] = rows.data();
      c.send_len[1] = static_cast<size_t>(rows.nbytes());
    }
    return c;
  }

  // A row-sparse PUSH of `indices` and `rows`, with `lr` when given.
  Call SparsePush(const RemoteVar& v, const py::array& indices, const py::array& rows,
                  std::optional<double> lr) const {
    Call c = RowCall(Op::kPush, v, indices, rows);
    if (lr) {
      c.flags |= kFlagHasLr;
      c.arg0 = *lr;
    }
    return c;
  }

  // Pushes dense gradients (and row-sparse ones) and, when step_handle >= 0, increments that
  // int64 variable by step_delta in the same batch. Returns the new step (or -1).
  int64_t push(const std::vector<int>& handles, const std::vector<py::array>& grads,
               std::optional<double> lr, int step_handle, int64_t step_delta,
               std::optional<std::vector<py::array>> return_values,
               const std::vector<int>& sparse_handles,
               const std::vector<py::array>& sparse_indices,
               const std::vector<py::array>& sparse_rows) {
    if (handles.size() != grads.size())
      Raise(InvalidArgument("push: " + std::to_string(handles.size()) + " variables but " +
                            std::to_string(grads.size()) + " gradients"));
    if (return_values && return_values->size() != handles.size())
      Raise(InvalidArgument("push: return_values must have one array per variable"));
    if (sparse_handles.size() != sparse_indices.size() ||
        sparse_handles.size() != sparse_rows.size())
      Raise(InvalidArgument("push: sparse_handles, sparse_indices and sparse_rows must have "
                            "the same length"));
    std::vector<Call> calls;
    calls.reserve(handles.size() + sparse_handles.size() + 1);
    // Row-sparse gradients go in the same batch, so every shard gets its dense and sparse
    // updates in one parallel round trip.
    for (size_t i = 0; i < sparse_handles.size(); ++i)
      calls.push_back(SparsePush(Var(sparse_handles[i]), sparse_indices[i], sparse_rows[i], lr));
    for (size_t i = 0; i < handles.size(); ++i) {
      const RemoteVar& v = Var(handles[i]);
      Call c = DensePush(v, grads[i], lr);
      if (return_values) {
        CheckArray((*return_values)[i], "return value", v.spec.name, v.spec.dtype, v.spec.shape,
                   true);
        c.flags |= kFlagReturnValue;
        c.recv = const_cast<void*>((*return_values)[i].data());
        c.recv_len = v.nbytes;
      }
      calls.push_back(std::move(c));
    }
    if (step_handle >= 0) {
      Call c = MakeCall(Op::kStepIncrement, Var(step_handle));
      c.step = step_delta;
      calls.push_back(std::move(c));
    }
    Check(RunLocked(&calls));
    return step_handle >= 0 ? calls.back().step_out : -1;
  }

  // One synchronous training step in one parallel round trip: the tagged pushes (dense, then
  // row-sparse), the global step's tagged increment, then the waits. See _core.pyi.
  py::tuple sync_step(const std::vector<int>& push_handles, const std::vector<py::array>& grads,
                      const std::vector<int>& sparse_handles,
                      const std::vector<py::array>& sparse_indices,
                      const std::vector<py::array>& sparse_rows, std::optional<double> lr,
                      int64_t tag, int step_handle, bool increment,
                      const std::vector<int>& wait_handles, const std::vector<py::array>& outs,
                      const std::vector<int64_t>& needs, int64_t step_need, double wait_secs) {
    if (push_handles.size() != grads.size())
      Raise(InvalidArgument("sync_step: " + std::to_string(push_handles.size()) +
                            " variables but " + std::to_string(grads.size()) + " gradients"));
    if (sparse_handles.size() != sparse_indices.size() ||
        sparse_handles.size() != sparse_rows.size())
      Raise(InvalidArgument("sync_step: sparse_handles, sparse_indices and sparse_rows must "
                            "have the same length"));
    if (wait_handles.size() != outs.size() || wait_handles.size() != needs.size())
      Raise(InvalidArgument("sync_step: wait_handles, outs and needs must have the same "
                            "length"));
    if (!(wait_secs >= 0.0 && wait_secs <= kMaxWaitSeconds))
      Raise(InvalidArgument("sync_step: wait_secs must be in [0, 60]; got " +
                            std::to_string(wait_secs)));
    std::vector<Call> calls;
    calls.reserve(push_handles.size() + sparse_handles.size() + wait_handles.size() + 2);
    auto tagged = [&](Call* c) {
      c->flags |= kFlagStepTagged;
      c->step = tag;
      if (lr) {
        c->flags |= kFlagHasLr;
        c->arg0 = *lr;
      }
    };
    for (size_t i = 0; i < push_handles.size(); ++i) {
      Call c = DensePush(Var(push_handles[i]), grads[i], std::nullopt);
      tagged(&c);
      calls.push_back(std::move(c));
    }
    for (size_t i = 0; i < sparse_handles.size(); ++i) {
      Call c = SparsePush(Var(sparse_handles[i]), sparse_indices[i], sparse_rows[i],
                          std::nullopt);
      tagged(&c);
      calls.push_back(std::move(c));
    }
    const size_t num_pushes = calls.size();
    if (step_handle >= 0 && increment) {
      Call c = MakeCall(Op::kStepIncrement, Var(step_handle));
      c.flags |= kFlagStepTagged;
      c.step = tag;
      calls.push_back(std::move(c));
    }
    const size_t first_wait = calls.size();
    for (size_t i = 0; i < wait_handles.size(); ++i) {
      const RemoteVar& v = Var(wait_handles[i]);
      CheckArray(outs[i], "pull output", v.spec.name, v.spec.dtype, v.spec.shape, true);
      Call c = MakeCall(Op::kPull, v);
      c.flags |= kFlagWaitStep;
      c.step = needs[i];
      c.arg1 = wait_secs;
      c.recv = const_cast<void*>(outs[i].data());
      c.recv_len = v.nbytes;
      calls.push_back(std::move(c));
    }
    if (step_handle >= 0) {
      Call c = MakeCall(Op::kStepRead, Var(step_handle));
      c.flags |= kFlagWaitStep;
      c.step = step_need;
      c.arg1 = wait_secs;
      calls.push_back(std::move(c));
    }
    // A synchronous step is sent whole or not at all: gradients counted on some shards while
    // another shard's connection is already lost would land in a step the session abandons.
    for (const Call& c : calls) Check(client_.ShardStatus(c.shard));
    Check(RunLocked(&calls));
    py::list accepted, waits;
    for (size_t i = 0; i < num_pushes; ++i)
      accepted.append((calls[i].flags_out & kFlagAccepted) != 0);
    for (size_t i = 0; i < wait_handles.size(); ++i) {
      const Call& c = calls[first_wait + i];
      waits.append(py::make_tuple(!(c.flags_out & kFlagNotReady), c.step_out, c.count_out));
    }
    py::tuple step = py::make_tuple(true, -1, 0);
    if (step_handle >= 0) {
      const Call& c = calls.back();
      step = py::make_tuple(!(c.flags_out & kFlagNotReady), c.step_out, c.count_out);
    }
    return py::make_tuple(accepted, waits, step);
  }

  int64_t push_sparse(int handle, py::array indices, py::array rows, std::optional<double> lr,
                      int step_handle, int64_t step_delta) {
    Call c = SparsePush(Var(handle), indices, rows, lr);
    std::vector<Call> calls;
    calls.push_back(std::move(c));
    if (step_handle >= 0) {
      Call s = MakeCall(Op::kStepIncrement, Var(step_handle));
      s.step = step_delta;
      calls.push_back(std::move(s));
    }
    Check(RunLocked(&calls));
    return step_handle >= 0 ? calls.back().step_out : -1;
  }

  // Rows of several variables in one parallel round trip (one request per variable).
  void pull_rows_batch(const std::vector<int>& handles, const std::vector<py::array>& indices,
                       const std::vector<py::array>& outs) {
    if (handles.size() != indices.size() || handles.size() != outs.size())
      Raise(InvalidArgument("pull_rows_batch: handles, indices and outs must have the same "
                            "length"));
    std::vector<Call> calls;
    calls.reserve(handles.size());
    for (size_t i = 0; i < handles.size(); ++i) calls.push_back(RowPull(handles[i], indices[i], outs[i]));
    Check(RunLocked(&calls));
  }

  Call RowPull(int handle, const py::array& indices, const py::array& out) {
    return RowCall(Op::kPull, Var(handle), indices, out);
  }

  void pull_rows(int handle, py::array indices, py::array out) {
    std::vector<Call> calls;
    calls.push_back(RowPull(handle, indices, out));
    Check(RunLocked(&calls));
  }

  void assign(const std::vector<int>& handles, const std::vector<py::array>& values, int slot,
              bool add, bool restore = false) {
    if (handles.size() != values.size())
      Raise(InvalidArgument("assign: " + std::to_string(handles.size()) + " variables but " +
                            std::to_string(values.size()) + " values"));
    std::vector<Call> calls;
    for (size_t i = 0; i < handles.size(); ++i) {
      const RemoteVar& v = Var(handles[i]);
      Call c = MakeCall(add ? Op::kAssignAdd : Op::kAssign, v);
      c.slot = static_cast<uint8_t>(slot);
      if (restore && !add && slot == 0) c.flags |= kFlagInit;
      if (slot == kOptimizerStateSlot) {
        CheckArray(values[i], "optimizer state", v.spec.name, DType::kFloat64, {2}, false);
        c.dtype = v.spec.dtype;
        c.send_len[0] = 16;
      } else {
        CheckArray(values[i], "value", v.spec.name, v.spec.dtype, v.spec.shape, false);
        c.send_len[0] = v.nbytes;
      }
      c.send[0] = values[i].data();
      calls.push_back(std::move(c));
    }
    Check(RunLocked(&calls));
  }

  int64_t step(int handle, int64_t delta, bool increment) {
    Call c = MakeCall(increment ? Op::kStepIncrement : Op::kStepRead, Var(handle));
    c.step = delta;
    std::vector<Call> calls;
    calls.push_back(std::move(c));
    Check(RunLocked(&calls));
    return calls[0].step_out;
  }

  std::vector<bool> is_initialized(const std::vector<int>& handles) {
    std::vector<Call> calls;
    for (int h : handles) calls.push_back(MakeCall(Op::kIsInitialized, Var(h)));
    Check(RunLocked(&calls));
    std::vector<bool> out;
    for (auto& c : calls) out.push_back((c.flags_out & kFlagInitialized) != 0);
    return out;
  }

  py::list list_variables(int shard) {
    Call c;
    c.op = Op::kList;
    c.shard = shard;
    std::vector<Call> calls;
    calls.push_back(std::move(c));
    Check(RunLocked(&calls));
    py::list out;
    const auto& b = calls[0].recv_vec;
    Reader r(b.data(), b.size());
    while (r.remaining() > 0) {
      uint32_t id;
      uint8_t dt, init, opt, rank;
      if (!r.Get(&id) || !r.Get(&dt) || !r.Get(&init) || !r.Get(&opt) || !r.Get(&rank))
        Raise(Status(Code::kDataLoss, "truncated LIST reply"));
      py::list shape;
      for (int i = 0; i < rank; ++i) {
        int64_t d;
        if (!r.Get(&d)) Raise(Status(Code::kDataLoss, "truncated LIST reply"));
        shape.append(d);
      }
      std::string name;
      uint8_t table;
      uint64_t rows, bytes;
      if (!r.GetString(&name, kMaxNameLength) || !r.Get(&table) || !r.Get(&rows) ||
          !r.Get(&bytes))
        Raise(Status(Code::kDataLoss, "truncated LIST reply"));
      py::dict d;
      d["table"] = table != 0;
      d["rows"] = rows;
      d["bytes"] = bytes;
      d["id"] = id;
      d["name"] = name;
      d["dtype"] = DTypeName(static_cast<DType>(dt));
      d["shape"] = py::tuple(shape);
      d["initialized"] = init != 0;
      d["optimizer"] = OptimizerName(static_cast<Optimizer>(opt <= kMaxOptimizer ? opt : 0));
      out.append(d);
    }
    return out;
  }

  void ping(const std::vector<int>& shards) {
    std::vector<Call> calls;
    for (int s : shards) {
      Call c;
      c.op = Op::kPing;
      c.shard = s;
      calls.push_back(std::move(c));
    }
    Check(RunLocked(&calls));
  }

  void worker_done(const std::string& job, int task) {
    std::vector<Call> calls;
    for (int s = 0; s < client_.num_shards(); ++s) {
      Call c;
      c.op = Op::kWorkerDone;
      c.shard = s;
      c.var_id = static_cast<uint32_t>(task);
      c.send[0] = job.data();
      c.send_len[0] = job.size();
      calls.push_back(std::move(c));
    }
    Check(RunLocked(&calls));
  }

  // A page of a hash table's rows: (ids int64[n], counts int64[n], values [n, row...],
  // [slot arrays], next cursor or -1).
  py::tuple table_export(int handle, int64_t cursor, uint32_t max_rows) {
    const RemoteVar& v = Var(handle);
    if (!v.spec.is_table())
      Raise(InvalidArgument("table_export: '" + v.spec.name + "' is not a hash table"));
    Call c = MakeCall(Op::kTableExport, v);
    c.step = cursor;
    c.count = max_rows;
    std::vector<Call> calls;
    calls.push_back(std::move(c));
    Check(RunLocked(&calls));
    const Call& r = calls[0];
    const size_t n = r.count_out;
    const size_t width = static_cast<size_t>(v.spec.RowElements());
    const size_t dsize = DTypeSize(v.spec.dtype);
    const int slots = NumSlots(v.spec.optimizer);
    if (r.recv_vec.size() != n * (16 + width * dsize * (1 + slots)))
      Raise(Status(Code::kDataLoss, "TABLE_EXPORT reply of " + std::to_string(r.recv_vec.size()) +
                                        " bytes does not hold " + std::to_string(n) + " rows"));
    std::vector<int64_t> row_shape = v.spec.shape;
    row_shape[0] = static_cast<int64_t>(n);
    const uint8_t* b = r.recv_vec.data();
    py::array_t<int64_t> ids(static_cast<py::ssize_t>(n)), counts(static_cast<py::ssize_t>(n));
    if (n) {
      std::memcpy(ids.mutable_data(), b, n * 8);
      std::memcpy(counts.mutable_data(), b + n * 8, n * 8);
    }
    b += n * 16;
    auto column = [&]() {
      py::array a(v.spec.dtype == DType::kFloat32 ? py::dtype("float32") : py::dtype("float64"),
                  row_shape);
      if (n) std::memcpy(a.mutable_data(), b, n * width * dsize);
      b += n * width * dsize;
      return a;
    };
    py::array values = column();
    py::list slot_arrays;
    for (int k = 0; k < slots; ++k) slot_arrays.append(column());
    return py::make_tuple(ids, counts, values, slot_arrays, r.step_out);
  }

  void table_import(int handle, py::array ids, py::array counts, py::array values,
                    const std::vector<py::array>& slots, bool clear) {
    const RemoteVar& v = Var(handle);
    if (!v.spec.is_table())
      Raise(InvalidArgument("table_import: '" + v.spec.name + "' is not a hash table"));
    if (ArrayDType(ids) != DType::kInt64 || ids.ndim() != 1 || !CContiguous(ids) ||
        ArrayDType(counts) != DType::kInt64 || counts.ndim() != 1 || !CContiguous(counts) ||
        counts.size() != ids.size())
      Raise(InvalidArgument("table_import of '" + v.spec.name + "': ids and counts must be 1-D "
                            "C-contiguous int64 arrays of one length; got " + DTypeStr(ids) +
                            ShapeOf(ids) + " and " + DTypeStr(counts) + ShapeOf(counts)));
    const int num_slots = NumSlots(v.spec.optimizer);
    if (static_cast<int>(slots.size()) != num_slots)
      Raise(InvalidArgument("table_import of '" + v.spec.name + "': " +
                            std::to_string(slots.size()) + " slot arrays; its optimizer " +
                            OptimizerName(v.spec.optimizer) + " keeps " +
                            std::to_string(num_slots)));
    std::vector<int64_t> row_shape = v.spec.shape;
    row_shape[0] = ids.size();
    CheckArray(values, "values", v.spec.name, v.spec.dtype, row_shape, false);
    for (const auto& a : slots) CheckArray(a, "slot values", v.spec.name, v.spec.dtype, row_shape, false);
    // One frame of column blocks (docs/protocol.md, TableRows).
    std::vector<uint8_t> body;
    const size_t n = static_cast<size_t>(ids.size());
    const size_t col = static_cast<size_t>(values.nbytes());
    body.resize(n * 16 + col * (1 + slots.size()));
    uint8_t* w = body.data();
    if (n) {
      std::memcpy(w, ids.data(), n * 8);
      std::memcpy(w + n * 8, counts.data(), n * 8);
      std::memcpy(w + n * 16, values.data(), col);
      for (size_t k = 0; k < slots.size(); ++k)
        std::memcpy(w + n * 16 + col * (1 + k), slots[k].data(), col);
    }
    Call c = MakeCall(Op::kTableImport, v);
    c.count = static_cast<uint32_t>(n);
    if (clear) c.flags |= kFlagInit;
    c.send[0] = body.data();
    c.send_len[0] = body.size();
    std::vector<Call> calls;
    calls.push_back(std::move(c));
    Check(RunLocked(&calls));
  }

  // (rows evicted, rows left)
  std::pair<uint32_t, int64_t> table_evict(int handle, uint64_t unseen, uint64_t min_count) {
    const RemoteVar& v = Var(handle);
    Call c = MakeCall(Op::kTableEvict, v);
    c.arg0 = static_cast<double>(unseen);
    c.arg1 = static_cast<double>(min_count);
    std::vector<Call> calls;
    calls.push_back(std::move(c));
    Check(RunLocked(&calls));
    return {calls[0].count_out, calls[0].step_out};
  }

  py::bytes cluster_info(int shard) {
    Call c;
    c.op = Op::kClusterInfo;
    c.shard = shard;
    std::vector<Call> calls;
    calls.push_back(std::move(c));
    Check(RunLocked(&calls));
    const auto& b = calls[0].recv_vec;
    return py::bytes(reinterpret_cast<const char*>(b.data()), b.size());
  }

  py::tuple var_info(int handle) const {
    const RemoteVar& v = Var(handle);
    return py::make_tuple(v.shard, v.id, v.spec.name, DTypeName(v.spec.dtype),
                          py::tuple(py::cast(v.spec.shape)));
  }

  void close() {
    WithoutGil([&] {
      std::lock_guard<std::mutex> l(mu_);
      client_.Close();
    });
  }

  int num_shards() const { return client_.num_shards(); }
  // Lock-free: read by a progress thread while another thread is inside a call.
  uint64_t bytes_sent() const { return client_.bytes_sent(); }
  uint64_t bytes_received() const { return client_.bytes_received(); }
  std::string shard_name(int s) const { return client_.ShardName(s); }
  int64_t incarnation(int s) const { return client_.Incarnation(s); }
  double timeout() const { return client_.timeout(); }
  void set_timeout(double t) { client_.set_timeout(t); }

 private:
  Client client_;
  std::mutex mu_;  // one batch at a time; taken only with the GIL released
};

}  // namespace
}  // namespace psrt

PYBIND11_MODULE(_core, m) {
  using namespace psrt;
  m.doc() = "psrt's C++ core: wire protocol, TCP transport, variable store, fused kernels.";
  m.attr("WIRE_VERSION") = kWireVersion;
  m.attr("HEADER_SIZE") = kHeaderSize;
  m.attr("DEFAULT_MAX_PAYLOAD") = kDefaultMaxPayload;
  m.attr("OPTIMIZER_STATE_SLOT") = kOptimizerStateSlot;

  m.def("sha256", [](const py::bytes& data) {
    const std::string d = data;
    const Digest h = Sha256(d.data(), d.size());
    return py::bytes(reinterpret_cast<const char*>(h.data()), h.size());
  }, py::arg("data"));
  m.def("hmac_sha256", [](const py::bytes& key, const py::bytes& msg) {
    const std::string m = msg;
    const Digest h = HmacSha256(key, m.data(), m.size());
    return py::bytes(reinterpret_cast<const char*>(h.data()), h.size());
  }, py::arg("key"), py::arg("msg"));
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

  py::class_<PyServer>(m, "Server")
      .def(py::init<const std::string&, int, const std::string&, int, uint64_t, const py::bytes&,
                    double, double, int, uint64_t, uint64_t, double, const std::string&>(),
           py::arg("host"), py::arg("port"), py::arg("job") = "ps", py::arg("task") = 0,
           py::arg("max_payload") = kDefaultMaxPayload, py::arg("secret") = py::bytes(),
           py::arg("hello_timeout") = 10.0, py::arg("idle_timeout") = 600.0,
           py::arg("max_connections") = 1024, py::arg("chunk_bytes") = uint64_t{512} << 10,
           py::arg("max_inflight_bytes") = uint64_t{256} << 20, py::arg("stall_timeout") = 60.0,
           py::arg("cluster_def") = std::string())
      .def_property_readonly("port", &PyServer::port)
      .def_property_readonly("incarnation", &PyServer::incarnation)
      .def_property_readonly("stopped", &PyServer::stopped)
      .def("stop", &PyServer::stop)
      .def("wait", &PyServer::wait, py::arg("timeout"))
      .def("done_workers", &PyServer::done_workers)
      .def("num_connections", &PyServer::num_connections)
      .def("num_variables", &PyServer::num_variables)
      .def("take_events", &PyServer::take_events)
      .def("peak_inflight_bytes", &PyServer::peak_inflight_bytes)
      .def("set_cluster_def", &PyServer::set_cluster_def, py::arg("cluster_def"));

  py::class_<PyClient>(m, "Client")
      .def(py::init<const std::string&, int, const py::bytes&, double>(), py::arg("job"),
           py::arg("task"), py::arg("secret") = py::bytes(), py::arg("heartbeat_timeout") = 0.0)
      .def("connect", &PyClient::connect, py::arg("shard"), py::arg("address"),
           py::arg("timeout"))
      .def_property_readonly("num_shards", &PyClient::num_shards)
      .def_property_readonly("bytes_sent", &PyClient::bytes_sent)
      .def_property_readonly("bytes_received", &PyClient::bytes_received)
      .def("shard_name", &PyClient::shard_name, py::arg("shard"))
      .def("incarnation", &PyClient::incarnation, py::arg("shard"))
      .def_property("timeout", &PyClient::timeout, &PyClient::set_timeout)
      .def("register", &PyClient::register_vars, py::arg("specs"))
      .def("var_info", &PyClient::var_info, py::arg("handle"))
      .def("pull", &PyClient::pull, py::arg("handles"), py::arg("outs"), py::arg("slot") = 0)
      .def("push", &PyClient::push, py::arg("handles"), py::arg("grads"),
           py::arg("learning_rate") = py::none(), py::arg("step_handle") = -1,
           py::arg("step_delta") = 1, py::arg("return_values") = py::none(),
           py::arg("sparse_handles") = std::vector<int>(),
           py::arg("sparse_indices") = std::vector<py::array>(),
           py::arg("sparse_rows") = std::vector<py::array>())
      .def("pull_rows_batch", &PyClient::pull_rows_batch, py::arg("handles"),
           py::arg("indices"), py::arg("outs"))
      .def("push_sparse", &PyClient::push_sparse, py::arg("handle"), py::arg("indices"),
           py::arg("rows"), py::arg("learning_rate") = py::none(), py::arg("step_handle") = -1,
           py::arg("step_delta") = 1)
      .def("pull_rows", &PyClient::pull_rows, py::arg("handle"), py::arg("indices"),
           py::arg("out"))
      .def("assign", [](PyClient& c, const std::vector<int>& h, const std::vector<py::array>& v,
                        int slot, bool restore) { c.assign(h, v, slot, false, restore); },
           py::arg("handles"), py::arg("values"), py::arg("slot") = 0,
           py::arg("restore") = false)
      .def("sync_step", &PyClient::sync_step, py::arg("push_handles"), py::arg("grads"),
           py::arg("sparse_handles"), py::arg("sparse_indices"), py::arg("sparse_rows"),
           py::arg("lr"), py::arg("tag"), py::arg("step_handle"), py::arg("increment"),
           py::arg("wait_handles"), py::arg("outs"), py::arg("needs"), py::arg("step_need"),
           py::arg("wait_secs"))
      .def("assign_add", [](PyClient& c, const std::vector<int>& h,
                            const std::vector<py::array>& v) { c.assign(h, v, 0, true); },
           py::arg("handles"), py::arg("values"))
      .def("step_read", [](PyClient& c, int h) { return c.step(h, 0, false); }, py::arg("handle"))
      .def("step_increment", [](PyClient& c, int h, int64_t d) { return c.step(h, d, true); },
           py::arg("handle"), py::arg("delta") = 1)
      .def("is_initialized", &PyClient::is_initialized, py::arg("handles"))
      .def("list_variables", &PyClient::list_variables, py::arg("shard"))
      .def("table_export", &PyClient::table_export, py::arg("handle"), py::arg("cursor"),
           py::arg("max_rows"))
      .def("table_import", &PyClient::table_import, py::arg("handle"), py::arg("ids"),
           py::arg("counts"), py::arg("values"), py::arg("slots"), py::arg("clear"))
      .def("table_evict", &PyClient::table_evict, py::arg("handle"), py::arg("unseen"),
           py::arg("min_count"))
      .def("cluster_info", &PyClient::cluster_info, py::arg("shard"))
      .def("ping", &PyClient::ping, py::arg("shards"))
      .def("worker_done", &PyClient::worker_done, py::arg("job"), py::arg("task"))
      .def("close", &PyClient::close);
}
