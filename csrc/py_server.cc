// psrt._core.Server: a ps task's Server (server.h) owned by a Python object. Create, Stop and
// Wait run with the GIL released; the accessors only read.
#include <cstdint>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "py_convert.h"
#include "py_register.h"
#include "server.h"
#include "store.h"

namespace psrt {

namespace {

class PyServer {
 public:
  PyServer(const std::string& host, int port, const std::string& job, int task,
           uint64_t max_payload, const py::bytes& secret, double hello_timeout,
           double idle_timeout, int max_connections, uint64_t chunk_bytes,
           uint64_t max_inflight_bytes, double stall_timeout, const std::string& cluster_def,
           double auth_failures_per_s, double auth_failure_burst, double auth_summary_s,
           uint64_t memory_limit_bytes) {
    ServerOptions o;
    o.auth_failures_per_s = auth_failures_per_s;
    o.auth_failure_burst = auth_failure_burst;
    o.auth_summary_s = auth_summary_s;
    o.memory_limit_bytes = memory_limit_bytes;
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
  uint64_t reserved_bytes() const { return server_->ReservedBytes(); }
  void set_cluster_def(const std::string& def) { Check(server_->SetClusterDef(def)); }
  // jobs: (job, digest, "addr, addr") of the jobs of this task's cluster known in full.
  void set_cluster_jobs(const std::vector<std::tuple<std::string, uint64_t, std::string>>& jobs) {
    std::vector<ClusterJob> js;
    for (const auto& [job, digest, tasks] : jobs) js.push_back({job, digest, tasks});
    server_->SetClusterJobs(js);
  }
  // Replication (version 7, replication.h).
  void set_replication(bool on) { server_->SetReplication(on); }
  bool replication() const { return server_->replication(); }
  double replica_wait_s() const { return server_->replica_wait_s(); }
  void set_replica_wait_s(double s) { Check(server_->SetReplicaWaitSeconds(s)); }
  std::vector<std::string> awaiting_variables() const { return server_->AwaitingVariables(); }
  std::vector<std::pair<uint64_t, uint64_t>> marks() const { return server_->Marks(); }
  void replica_install(const std::string& name, const py::bytes& state) {
    // The bytes object stays alive (the caller holds it) while the GIL is released.
    char* data = nullptr;
    py::ssize_t len = 0;
    if (PYBIND11_BYTES_AS_STRING_AND_SIZE(state.ptr(), &data, &len) != 0)
      throw py::error_already_set();
    Check(WithoutGil([&] {
      return server_->ReplicaInstall(name, reinterpret_cast<const uint8_t*>(data),
                                     static_cast<size_t>(len));
    }));
  }

 private:
  std::unique_ptr<Server> server_;
};

}  // namespace

void RegisterServer(py::module_& m) {
  py::class_<PyServer>(m, "Server")
      .def(py::init<const std::string&, int, const std::string&, int, uint64_t, const py::bytes&,
                    double, double, int, uint64_t, uint64_t, double, const std::string&, double,
                    double, double, uint64_t>(),
           py::arg("host"), py::arg("port"), py::arg("job") = "ps", py::arg("task") = 0,
           py::arg("max_payload") = kDefaultMaxPayload, py::arg("secret") = py::bytes(),
           py::arg("hello_timeout") = 10.0, py::arg("idle_timeout") = 600.0,
           py::arg("max_connections") = 1024, py::arg("chunk_bytes") = uint64_t{512} << 10,
           py::arg("max_inflight_bytes") = uint64_t{256} << 20, py::arg("stall_timeout") = 60.0,
           py::arg("cluster_def") = std::string(), py::arg("auth_failures_per_s") = 1.0,
           py::arg("auth_failure_burst") = 10.0, py::arg("auth_summary_s") = 10.0,
           py::arg("memory_limit_bytes") = uint64_t{0})
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
      .def("reserved_bytes", &PyServer::reserved_bytes)
      .def("set_cluster_def", &PyServer::set_cluster_def, py::arg("cluster_def"))
      .def("set_cluster_jobs", &PyServer::set_cluster_jobs, py::arg("jobs"))
      .def("set_replication", &PyServer::set_replication, py::arg("on"))
      .def_property_readonly("replication", &PyServer::replication)
      .def_property("replica_wait_s", &PyServer::replica_wait_s, &PyServer::set_replica_wait_s)
      .def("awaiting_variables", &PyServer::awaiting_variables)
      .def("marks", &PyServer::marks)
      .def("replica_install", &PyServer::replica_install, py::arg("name"), py::arg("state"));
}

}  // namespace psrt
