// Server's public methods over ServerImpl: Create (options normalized, the port bound, the
// accept thread started), Stop, Wait, the accessors and the replication controls.
#include "server_impl.h"

#include <algorithm>
#include <chrono>
#include <random>

namespace psrt {

namespace {

constexpr size_t kMaxClusterDef = size_t{1} << 20;

Status ClusterDefTooBig(const std::string& def) {
  return InvalidArgument("cluster definition of " + std::to_string(def.size()) +
                         " bytes exceeds the maximum of 1048576 bytes");
}

}  // namespace

Status Server::SetClusterDef(const std::string& cluster_def) {
  if (cluster_def.size() > kMaxClusterDef) return ClusterDefTooBig(cluster_def);
  std::lock_guard<std::mutex> l(impl_->cluster_mu);
  impl_->options.cluster_def = cluster_def;
  return Status::Ok();
}

void Server::SetClusterJobs(const std::vector<ClusterJob>& jobs) {
  std::lock_guard<std::mutex> l(impl_->cluster_mu);
  impl_->options.cluster_jobs = jobs;
}

Status Server::Create(const ServerOptions& options, std::unique_ptr<Server>* out) {
  if (options.cluster_def.size() > kMaxClusterDef) return ClusterDefTooBig(options.cluster_def);
  std::unique_ptr<Server> s(new Server(options));
  ServerImpl* m = s->impl_.get();
  m->options.chunk_bytes = std::max<uint64_t>(m->options.chunk_bytes, 4096) / 8 * 8;
  // A frame read whole must fit the in-flight budget too.
  m->options.max_payload = std::min(m->options.max_payload,
                                    std::max(m->options.max_inflight_bytes,
                                             m->options.chunk_bytes));
  m->budget.Init(m->options.max_inflight_bytes, m->options.chunk_bytes);
  m->store.SetMemoryLimit(m->options.memory_limit_bytes);
  m->repl.SetEnabled(m->options.replication, &m->store);
  PSRT_RETURN_IF_ERROR(m->acceptor.Listen(options.host, options.port));
  std::random_device rd;
  m->incarnation = static_cast<int64_t>(
      ((static_cast<uint64_t>(rd()) << 32) ^ rd() ^
       static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count())) &
      0x7fffffffffffffffULL);
  if (m->incarnation == 0) m->incarnation = 1;
  PSRT_RETURN_IF_ERROR(m->acceptor.Start());
  *out = std::move(s);
  return Status::Ok();
}

ServerImpl::ServerImpl(const ServerOptions& o)
    : options(o),
      sync(&store, &stopping, "/job:" + o.job + "/task:" + std::to_string(o.task)),
      auth_throttle(o.auth_failures_per_s, o.auth_failure_burst, o.auth_summary_s),
      acceptor(this) {}

Server::Server(const ServerOptions& options) : impl_(std::make_unique<ServerImpl>(options)) {}

Server::~Server() { Stop(); }

int Server::port() const { return impl_->acceptor.port(); }
int64_t Server::incarnation() const { return impl_->incarnation; }
VariableStore* Server::store() { return &impl_->store; }
bool Server::stopped() const { return impl_->stopped.load(); }
uint64_t Server::PeakInflightBytes() const { return impl_->budget.peak(); }

void Server::Stop() {
  ServerImpl* m = impl_.get();
  std::lock_guard<std::mutex> stop_lock(m->stop_mu);
  if (m->stopped.load()) return;
  m->stopping.store(true);
  m->acceptor.Stop();
  {
    std::lock_guard<std::mutex> l(m->stopped_mu);
    m->stopped.store(true);
  }
  m->stopped_cv.notify_all();
}

bool Server::Wait(double timeout_s) {
  ServerImpl* m = impl_.get();
  std::unique_lock<std::mutex> l(m->stopped_mu);
  if (timeout_s < 0) {
    m->stopped_cv.wait(l, [m] { return m->stopped.load(); });
    return true;
  }
  return m->stopped_cv.wait_for(l, std::chrono::duration<double>(timeout_s),
                                [m] { return m->stopped.load(); });
}

std::vector<std::pair<std::string, int>> Server::DoneWorkers() const {
  return impl_->sync.DoneWorkers();
}

uint64_t Server::ReservedBytes() const { return impl_->store.memory().reserved(); }

int Server::NumConnections() const { return impl_->acceptor.NumOpen(); }

std::vector<std::string> Server::TakeEvents() { return impl_->events.Take(); }

void Server::SetReplication(bool on) { impl_->repl.SetEnabled(on, &impl_->store); }
bool Server::replication() const { return impl_->repl.enabled(); }
Status Server::SetReplicaWaitSeconds(double s) { return impl_->repl.SetWaitSeconds(s); }
double Server::replica_wait_s() const { return impl_->repl.wait_seconds(); }

std::vector<std::string> Server::AwaitingVariables() const {
  return impl_->repl.AwaitingNames(impl_->store);
}

Status Server::ReplicaInstall(const std::string& name, const uint8_t* state, size_t n) {
  Variable* var = nullptr;
  PSRT_RETURN_IF_ERROR(impl_->store.FindByName(name, &var));
  return impl_->repl.Install(var, state, n);
}

std::vector<std::pair<uint64_t, uint64_t>> Server::Marks() const { return impl_->repl.Marks(); }

}  // namespace psrt
