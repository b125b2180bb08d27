// psrt._core.Client: its setup and session requests (connect, register, LIST, PING,
// WORKER_DONE, CLUSTER_INFO, close) and RegisterClient, which binds every method.
#include <cmath>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "py_client.h"
#include "py_convert.h"
#include "py_register.h"
#include "store.h"

namespace psrt {

namespace {

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

}  // namespace

void PyClient::connect(int shard, const std::string& address, double timeout_s,
                       const std::string& expect_job, int expect_task) {
  if (!expect_job.empty() && expect_task < 0)
    Raise(InvalidArgument("connect: expect_task " + std::to_string(expect_task) +
                          " must be >= 0 with expect_job '" + expect_job + "'"));
  Check(WithoutGil([&] {
    std::lock_guard<std::mutex> l(mu_);
    return client_.Connect(shard, address, timeout_s, expect_job, expect_task);
  }));
}

void PyClient::set_cluster(const std::vector<std::pair<std::string, uint64_t>>& jobs,
                           const std::string& description) {
  if (jobs.size() > kMaxHelloJobs)
    Raise(InvalidArgument("set_cluster: " + std::to_string(jobs.size()) + " jobs; a HELLO "
                          "carries at most " + std::to_string(kMaxHelloJobs)));
  std::vector<JobDigest> js;
  for (const auto& [job, digest] : jobs) {
    if (job.empty() || job.size() > kMaxJobName)
      Raise(InvalidArgument("set_cluster: job name '" + job + "' must be 1.." +
                            std::to_string(kMaxJobName) + " bytes"));
    js.push_back({job, digest});
  }
  std::lock_guard<std::mutex> l(mu_);
  client_.SetCluster(std::move(js), description);
}

std::vector<std::pair<int, bool>> PyClient::register_vars(const py::list& specs) {
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
  Status st = WithoutGil([&] {
    std::lock_guard<std::mutex> l(mu_);
    return client_.Register(vs, shards, inits, &handles);
  });
  LogReplicaEvents();
  Check(st);
  std::vector<std::pair<int, bool>> out;
  for (int h : handles) out.emplace_back(h, client_.var(h).initialized);
  return out;
}

const RemoteVar& PyClient::Var(int h) const {
  if (h < 0 || h >= client_.num_vars())
    Raise(InvalidArgument("unknown variable handle " + std::to_string(h)));
  return client_.var(h);
}

Call PyClient::MakeCall(Op op, const RemoteVar& v) const {
  Call c;
  c.op = op;
  c.shard = v.shard;
  c.handle = v.handle;
  c.var_id = v.id;
  c.dtype = v.spec.dtype;
  return c;
}

Status PyClient::RunLocked(std::vector<Call>* calls) {
  Status st = WithoutGil([&] {
    std::lock_guard<std::mutex> l(mu_);
    return client_.Run(calls, client_.timeout());
  });
  LogReplicaEvents();
  return st;
}

void PyClient::LogReplicaEvents() {
  std::vector<std::string> lines = client_.TakeReplicaEvents();
  if (lines.empty()) return;
  py::object logger = py::module_::import("logging").attr("getLogger")("psrt");
  for (const std::string& line : lines)
    logger.attr(line[0] == 'W' ? "warning" : "info")("%s", line.substr(1));
}

void PyClient::set_replicas(int shard, const std::vector<int>& replicas) {
  Check(WithoutGil([&] {
    std::lock_guard<std::mutex> l(mu_);
    return client_.SetReplicas(shard, replicas);
  }));
}

std::vector<std::pair<int, std::string>> PyClient::replica_status() {
  std::vector<std::pair<int, ReplicaState>> states = WithoutGil([&] {
    std::lock_guard<std::mutex> l(mu_);
    return client_.ReplicaStatus();
  });
  std::vector<std::pair<int, std::string>> out;
  for (const auto& [shard, state] : states) out.emplace_back(shard, ReplicaStateName(state));
  return out;
}

py::bytes PyClient::replica_read(int shard, uint32_t var_id) {
  Call c;
  c.op = Op::kReplicaRead;
  c.shard = shard;
  c.var_id = var_id;
  std::vector<Call> calls;
  calls.push_back(std::move(c));
  Check(RunLocked(&calls));
  const auto& b = calls[0].recv_vec;
  return py::bytes(reinterpret_cast<const char*>(b.data()), b.size());
}

py::tuple PyClient::var_info(int handle) const {
  const RemoteVar& v = Var(handle);
  return py::make_tuple(v.shard, v.id, v.spec.name, DTypeName(v.spec.dtype),
                        py::tuple(py::cast(v.spec.shape)));
}

py::list PyClient::list_variables(int shard) {
  Call c;
  c.op = Op::kList;
  // A replicated shard's variables are listed by the replica its reads go to (the groups'
  // state is the calling thread's: read under mu_).
  const int read = WithoutGil([&] {
    std::lock_guard<std::mutex> l(mu_);
    return client_.ReadShard(shard);
  });
  c.shard = read >= 0 ? read : shard;
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

void PyClient::ping(const std::vector<int>& shards) {
  std::vector<Call> calls;
  for (int s : shards) {
    Call c;
    c.op = Op::kPing;
    c.shard = s;
    calls.push_back(std::move(c));
  }
  Check(RunLocked(&calls));
}

void PyClient::worker_done(const std::string& job, int task) {
  std::vector<Call> calls;
  const std::vector<bool> down = WithoutGil([&] {
    std::lock_guard<std::mutex> l(mu_);
    std::vector<bool> out;
    for (int s = 0; s < client_.num_shards(); ++s) out.push_back(client_.ShardDown(s));
    return out;
  });
  for (int s = 0; s < client_.num_shards(); ++s) {
    if (down[s]) continue;  // a lost replica: nothing to tell it
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

py::bytes PyClient::cluster_info(int shard) {
  Call c;
  c.op = Op::kClusterInfo;
  c.shard = shard;
  std::vector<Call> calls;
  calls.push_back(std::move(c));
  Check(RunLocked(&calls));
  const auto& b = calls[0].recv_vec;
  return py::bytes(reinterpret_cast<const char*>(b.data()), b.size());
}

void PyClient::close() {
  WithoutGil([&] {
    std::lock_guard<std::mutex> l(mu_);
    client_.Close();
  });
}

void RegisterClient(py::module_& m) {
  py::class_<PyClient>(m, "Client")
      .def(py::init<const std::string&, int, const py::bytes&, double>(), py::arg("job"),
           py::arg("task"), py::arg("secret") = py::bytes(), py::arg("heartbeat_timeout") = 0.0)
      .def("connect", &PyClient::connect, py::arg("shard"), py::arg("address"),
           py::arg("timeout"), py::arg("expect_job") = std::string(), py::arg("expect_task") = -1)
      .def("set_cluster", &PyClient::set_cluster, py::arg("jobs"), py::arg("description"))
      .def_property("atomic_pushes", &PyClient::atomic_pushes, &PyClient::set_atomic_pushes)
      .def_property_readonly("num_shards", &PyClient::num_shards)
      .def_property_readonly("bytes_sent", &PyClient::bytes_sent)
      .def_property_readonly("bytes_received", &PyClient::bytes_received)
      .def_property_readonly("client_id", &PyClient::client_id)
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
      .def("replica_read", &PyClient::replica_read, py::arg("shard"), py::arg("var_id"))
      .def("ping", &PyClient::ping, py::arg("shards"))
      .def("worker_done", &PyClient::worker_done, py::arg("job"), py::arg("task"))
      .def("set_replicas", &PyClient::set_replicas, py::arg("shard"), py::arg("replicas"))
      .def("replica_status", &PyClient::replica_status)
      .def("failovers", &PyClient::failovers)
      .def("close", &PyClient::close);
}

}  // namespace psrt
