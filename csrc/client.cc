#include "client.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/uio.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <system_error>
#include <thread>

#include "auth.h"
#include "net.h"

namespace psrt {

namespace {

double SecondsLeft(Clock::time_point deadline) {
  return std::chrono::duration<double>(deadline - Clock::now()).count();
}

// A random non-zero client id from the OS random source (auth.h); without one, the clock and
// the process id, so two Clients still differ.
uint64_t NewClientId() {
  uint8_t nonce[kNonceSize];
  uint64_t id = 0;
  if (RandomNonce(nonce)) std::memcpy(&id, nonce, sizeof id);
  if (id == 0)
    id = static_cast<uint64_t>(Clock::now().time_since_epoch().count()) * 0x9E3779B97F4A7C15ull ^
         static_cast<uint64_t>(getpid());
  return id == 0 ? 1 : id;
}
}  // namespace

struct Client::Conn {
  int fd = -1;
  int shard = 0;
  std::string address;
  std::string name;        // "/job:ps/task:K at host:port"
  std::string expect_job;  // Connect's expectation, kept for a reconnect
  int expect_task = -1;
  int64_t incarnation = 0;
  Status error;            // sticky: the first failure of this connection

  // Per-batch state.
  std::vector<Call*> calls;            // in send order
  std::vector<std::array<uint8_t, kHeaderSize>> headers;
  std::vector<struct iovec> iov;
  size_t iov_pos = 0;
  size_t replies = 0;                  // replies fully received
  uint8_t hbuf[kHeaderSize];
  size_t hgot = 0;
  bool in_payload = false;
  Header reply;
  uint8_t* dst = nullptr;
  size_t dst_len = 0, dst_got = 0;
  std::string msg;

  void Fail(const Status& st) {
    if (error.ok()) error = st;
    shutdown(fd, SHUT_RDWR);
  }
  bool sending() const { return iov_pos < iov.size(); }
  bool receiving() const { return replies < calls.size(); }
};

Client::Client(std::string job, int task, std::string secret, double heartbeat_timeout_s)
    : job_(std::move(job)),
      task_(task),
      secret_(std::move(secret)),
      heartbeat_timeout_s_(heartbeat_timeout_s),
      client_id_(NewClientId()),
      replicas_([this](const ReplicaSet::Target& t, ReplicaSet::Dialed* d) {
        return Redial(t, d);
      }) {}

Client::~Client() {
  Close();
  {
    std::lock_guard<std::mutex> l(hb_mu_);
    hb_stop_ = true;
    if (hb_wake_[1] >= 0) {
      char b = 1;
      ssize_t ignored = write(hb_wake_[1], &b, 1);
      (void)ignored;
    }
  }
  if (hb_thread_.joinable()) hb_thread_.join();
  for (int fd : hb_retired_) CloseFd(fd);
  CloseFd(hb_wake_[0]);
  CloseFd(hb_wake_[1]);
}

void Client::Close() {
  replicas_.Stop();  // no reconnect after this
  closed_ = true;
  {
    std::lock_guard<std::mutex> l(hb_mu_);
    for (Watch& w : hb_) {
      if (w.fd >= 0) hb_retired_.push_back(w.fd);
      w.fd = -1;
      w.data_fd = -1;
    }
  }
  for (auto& c : conns_) {
    if (c && c->fd >= 0) {
      CloseFd(c->fd);
      c->fd = -1;
      if (c->error.ok()) c->error = Status(Code::kCancelled, "connection to " + c->name + " closed");
    }
  }
}

std::string Client::ShardName(int shard) const {
  if (shard < 0 || shard >= num_shards() || !conns_[shard])
    return "/job:ps/task:" + std::to_string(shard);
  return conns_[shard]->name;
}

int64_t Client::Incarnation(int shard) const {
  return shard >= 0 && shard < num_shards() && conns_[shard] ? conns_[shard]->incarnation : 0;
}

Status Client::ShardStatus(int shard) const {
  if (shard < 0 || shard >= num_shards() || !conns_[shard])
    return FailedPrecondition("not connected to /job:ps/task:" + std::to_string(shard));
  if (replicas_.Members(shard) != nullptr && !closed_) return replicas_.GroupStatus(shard);
  return conns_[shard]->error;
}

void Client::SetCluster(std::vector<JobDigest> jobs, std::string description) {
  std::lock_guard<std::mutex> l(hello_mu_);
  cluster_jobs_ = std::move(jobs);
  cluster_description_ = std::move(description);
}

ReplicaSet::Target Client::TargetOf(int shard) const {
  const Conn& c = *conns_[shard];
  ReplicaSet::Target t;
  t.shard = shard;
  t.address = c.address;
  t.name = c.name;
  t.expect_job = c.expect_job;
  t.expect_task = c.expect_task;
  return t;
}

const Status& Client::ConnError(int shard) const { return conns_[shard]->error; }

void Client::FailConn(int shard, const Status& st) { conns_[shard]->Fail(st); }

bool Client::Replace(const ReplicaSet::Dialed& d, int64_t* old_incarnation) {
  std::unique_ptr<Conn>& slot = conns_[d.shard];
  auto conn = std::make_unique<Conn>();
  conn->shard = d.shard;
  conn->address = slot->address;
  conn->name = slot->name;
  conn->expect_job = slot->expect_job;
  conn->expect_task = slot->expect_task;
  conn->incarnation = d.incarnation;
  conn->fd = d.fd;
  *old_incarnation = slot->incarnation;
  const int old_fd = slot->fd;
  slot = std::move(conn);
  WatchShard(d.shard, d.fd, d.hb_fd, slot->name);
  CloseFd(old_fd);
  return *old_incarnation == d.incarnation;
}

Status Client::Handshake(int fd, const std::string& name, uint32_t channel,
                         Clock::time_point deadline, int64_t* incarnation,
                         const std::string& expect_job, int expect_task) {
  // HELLO (and AUTH): a peer that accepts but never answers must not block past the deadline
  // (at least 1 s is left for the exchange itself): the socket is still blocking here, so
  // bound it with timeouts.
  const double hello_s = std::max(SecondsLeft(deadline), 1.0);
  struct timeval tv;
  tv.tv_sec = static_cast<time_t>(hello_s);
  tv.tv_usec = static_cast<suseconds_t>((hello_s - static_cast<double>(tv.tv_sec)) * 1e6);
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  auto io_failed = [&](const Status& io) {
    const int err = errno;  // EAGAIN: SO_RCVTIMEO/SO_SNDTIMEO expired (errno is 0 before I/O)
    if (err == EAGAIN || err == EWOULDBLOCK)
      return Unavailable("no HELLO reply from " + name + " within " + std::to_string(hello_s) +
                         " s");
    return io;
  };
  // One request frame, then its reply (header checked, payload of at most 4096 bytes).
  auto exchange = [&](const Header& h, const void* payload, size_t len, Header* r,
                      std::string* reply) -> Status {
    uint8_t hb[kHeaderSize];
    EncodeHeader(h, hb);
    struct iovec iov[2] = {{hb, kHeaderSize}, {const_cast<void*>(payload), len}};
    errno = 0;
    Status st = WriteFull(fd, iov, len ? 2 : 1, name);
    uint8_t rb[kHeaderSize];
    if (st.ok()) st = ReadFull(fd, rb, kHeaderSize, name);
    if (!st.ok()) return io_failed(st);
    *r = DecodeHeader(rb);
    if (r->magic != kWireMagic)
      return Unavailable(name + " is not a psrt ps task (bad magic in HELLO reply)");
    if (r->version != kWireVersion)
      return FailedPrecondition("wire protocol version mismatch with " + name +
                                ": this worker speaks version " + std::to_string(kWireVersion) +
                                ", the ps task speaks version " + std::to_string(r->version));
    if (r->payload_len > 4096)
      return Unavailable(name + " sent a " + std::to_string(r->payload_len) +
                         "-byte HELLO reply; not a psrt ps task");
    reply->assign(static_cast<size_t>(r->payload_len), '\0');
    if (!reply->empty()) {
      st = ReadFull(fd, reply->data(), reply->size(), name);
      if (!st.ok()) return io_failed(st);
    }
    if (r->status > kMaxCode) return Unavailable(name + " replied with an unknown status code");
    if (r->status != 0)
      return Status(static_cast<Code>(r->status), name + " refused HELLO: " + *reply);
    return Status::Ok();
  };

  // Version 6: who this is, which task it means to reach, and its cluster's job digests.
  HelloRecord hello;
  hello.job = job_;
  hello.expect_job = expect_job;
  hello.expect_task = expect_job.empty() ? kAnyTask : static_cast<uint32_t>(expect_task);
  std::string cluster_description;
  {
    std::lock_guard<std::mutex> l(hello_mu_);
    hello.jobs = cluster_jobs_;
    cluster_description = cluster_description_;
  }
  hello.client_id = client_id_;
  Writer hw;
  hello.Encode(&hw);
  const std::vector<uint8_t>& hp = hw.buffer();
  Header h;
  h.op = static_cast<uint8_t>(Op::kHello);
  h.var_id = static_cast<uint32_t>(task_);
  h.count = channel;
  h.payload_len = hp.size();
  Header r;
  std::string reply;
  const std::string mine =
      cluster_description.empty() ? "" : "; this worker's cluster: " + cluster_description;
  Status hs = exchange(h, hp.data(), hp.size(), &r, &reply);
  if (hs.code() == Code::kFailedPrecondition && r.magic == kWireMagic &&
      r.version == kWireVersion)
    return FailedPrecondition(hs.message() + mine);
  PSRT_RETURN_IF_ERROR(hs);
  const bool challenged = (r.flags & kFlagAuthRequired) != 0;
  if (!expect_job.empty()) {
    // The ps task says which task it is; a worker given another cluster reaches another one.
    const size_t skip = challenged ? std::min<size_t>(r.count, reply.size()) : 0;
    const std::string their_job = reply.substr(skip);
    if (their_job != expect_job || r.var_id != static_cast<uint32_t>(expect_task))
      return FailedPrecondition(
          "/job:" + job_ + "/task:" + std::to_string(task_) + " expected /job:" + expect_job +
          "/task:" + std::to_string(expect_task) + " at " + name + ", but that task is /job:" +
          their_job + "/task:" + std::to_string(r.var_id) +
          ": the two tasks were given different clusters (the ps tasks in another order in "
          "--ps_hosts?); give every task the same cluster" + mine);
  }
  if (!challenged && !secret_.empty())
    return Status(Code::kUnauthenticated,
                  name + " does not ask for authentication, but this worker has the job's "
                         "secret: the ps task was started without it (PSRT_AUTH_SECRET), or it "
                         "is not a task of this job");
  if (challenged) {
    if (secret_.empty())
      return Status(Code::kUnauthenticated,
                    name + " requires the job's shared secret: set PSRT_AUTH_SECRET (or "
                           "PSRT_AUTH_SECRET_FILE) for this task as for the ps tasks");
    if (r.count != kNonceSize || reply.size() < kNonceSize)
      return Unavailable(name + " sent a malformed authentication challenge");
    uint8_t body[2 * kNonceSize];
    if (!RandomNonce(body)) return Internal("no random source for an authentication nonce");
    const auto* server_nonce = reinterpret_cast<const uint8_t*>(reply.data());
    const Digest proof = WorkerProof(secret_, server_nonce, body, job_,
                                     static_cast<uint32_t>(task_));
    std::memcpy(body + kNonceSize, proof.data(), proof.size());
    const Digest expect_back = ServerProof(secret_, server_nonce, body);
    Header a;
    a.op = static_cast<uint8_t>(Op::kAuth);
    a.request_id = 1;
    a.payload_len = sizeof body;
    Header ar;
    std::string back;
    PSRT_RETURN_IF_ERROR(exchange(a, body, sizeof body, &ar, &back));
    Digest got;
    if (back.size() != got.size())
      return Status(Code::kUnauthenticated, name + " did not prove it knows the job's secret");
    std::memcpy(got.data(), back.data(), got.size());
    if (!DigestEqual(got, expect_back))
      return Status(Code::kUnauthenticated,
                    name + " failed to prove it knows the job's secret: it is not a task of "
                           "this job, or its secret differs");
  }
  if (incarnation != nullptr) *incarnation = r.step;
  tv.tv_sec = 0;
  tv.tv_usec = 0;
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  return SetNonBlocking(fd, true);
}

Status Client::Dial(const std::string& address, const std::string& name, double timeout_s,
                    bool retry, const std::string& expect_job, int expect_task,
                    ReplicaSet::Dialed* out) {
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(timeout_s));
  std::string host;
  int port = 0;
  PSRT_RETURN_IF_ERROR(ParseAddress(address, &host, &port));
  double backoff = 0.01;
  Status st;
  int fd = -1;
  for (;;) {
    st = psrt::Connect(host, port, &fd, std::max(SecondsLeft(deadline), 0.01));
    if (st.ok()) break;
    double left = SecondsLeft(deadline);
    if (left <= 0 || !retry)
      return Unavailable("cannot reach " + name + " within " + std::to_string(timeout_s) +
                         " s: " + st.message());
    std::this_thread::sleep_for(std::chrono::duration<double>(std::min(backoff, left)));
    backoff = std::min(backoff * 2, 0.5);
  }
  st = Handshake(fd, name, kChannelRequests, deadline, &out->incarnation, expect_job,
                 expect_task);
  if (!st.ok()) {
    CloseFd(fd);
    return st;
  }
  // The heartbeat connection: the ps task just answered, so it connects at once.
  int hb_fd = -1;
  if (heartbeat_timeout_s_ > 0) {
    st = psrt::Connect(host, port, &hb_fd, std::max(SecondsLeft(deadline), 1.0));
    if (st.ok())
      st = Handshake(hb_fd, name, kChannelHeartbeat, deadline, nullptr, expect_job,
                     expect_task);
    if (!st.ok()) {
      CloseFd(fd);
      CloseFd(hb_fd);
      return Status(st.code(), "heartbeat connection: " + st.message());
    }
  }
  out->fd = fd;
  out->hb_fd = hb_fd;
  return Status::Ok();
}

Status Client::Connect(int shard, const std::string& address, double timeout_s,
                       const std::string& expect_job, int expect_task) {
  if (shard < 0) return InvalidArgument("shard index " + std::to_string(shard) + " < 0");
  std::string host;
  int port = 0;
  PSRT_RETURN_IF_ERROR(ParseAddress(address, &host, &port));
  if (shard >= num_shards()) conns_.resize(shard + 1);
  auto conn = std::make_unique<Conn>();
  conn->shard = shard;
  conn->address = address;
  conn->expect_job = expect_job;
  conn->expect_task = expect_task;
  conn->name = (expect_job.empty() ? "/job:ps/task:" + std::to_string(shard)
                                    : "/job:" + expect_job + "/task:" + std::to_string(expect_task)) +
               " at " + address;
  ReplicaSet::Dialed d;
  PSRT_RETURN_IF_ERROR(Dial(address, conn->name, timeout_s, true, expect_job, expect_task, &d));
  conn->fd = d.fd;
  conn->incarnation = d.incarnation;
  const int old_fd = conns_[shard] ? conns_[shard]->fd : -1;
  conns_[shard] = std::move(conn);
  WatchShard(shard, d.fd, d.hb_fd, conns_[shard]->name);
  CloseFd(old_fd);
  return Status::Ok();
}

Status Client::Run(std::vector<Call>* calls, double timeout_s) {
  for (Call& c : *calls) c.request_id = 0;  // ids are the Client's to give
  if (!replicas_.empty() && !closed_) return RunReplicated(calls, timeout_s);
  std::vector<Call*> batch;
  batch.reserve(calls->size());
  for (Call& c : *calls) batch.push_back(&c);
  RunBatch(batch, timeout_s);
  for (Call& c : *calls) FinishAwaiting(&c);
  for (auto& c : *calls)
    if (!c.status.ok()) return c.status;
  return Status::Ok();
}

void Client::FinishAwaiting(Call* c) const {
  // A REGISTER reply's AWAITING only says the variable holds no value yet (the chief's INIT or
  // a copy gives it one); IS_INITIALIZED answers "no" with it. Other reads got no value.
  if (!c->status.ok() || !(c->flags2_out & kFlag2Awaiting) || c->op == Op::kIsInitialized ||
      c->op == Op::kRegister)
    return;
  const std::string name = c->handle >= 0 && c->handle < num_vars()
                               ? vars_[c->handle].spec.name
                               : "variable id " + std::to_string(c->var_id);
  c->status = FailedPrecondition("Attempting to use uninitialized value " + name +
                                 " (its ps task awaits a copy of it)");
}

void Client::RunBatch(const std::vector<Call*>& calls, double timeout_s) {
  std::vector<Conn*> active;
  for (Call* cp : calls) {
    Call& c = *cp;
    if (c.shard < 0 || c.shard >= num_shards() || !conns_[c.shard]) {
      c.status = FailedPrecondition("not connected to /job:ps/task:" + std::to_string(c.shard));
      continue;
    }
    Conn* conn = conns_[c.shard].get();
    if (conn->error.ok()) {
      // The heartbeat may have found the ps task unresponsive since the last batch.
      Status verdict = HeartbeatVerdict(c.shard);
      if (!verdict.ok()) conn->Fail(verdict);
    }
    if (!conn->error.ok()) {
      c.status = conn->error;
      continue;
    }
    if (conn->calls.empty()) active.push_back(conn);
    conn->calls.push_back(&c);
  }
  // Encode every header, then lay out one iovec list per shard: header, payload parts.
  for (Conn* conn : active) {
    conn->headers.resize(conn->calls.size());
    conn->iov.clear();
    conn->iov_pos = 0;
    conn->replies = 0;
    conn->hgot = 0;
    conn->in_payload = false;
    for (size_t i = 0; i < conn->calls.size(); ++i) {
      Call* c = conn->calls[i];
      Header h;
      h.op = static_cast<uint8_t>(c->op);
      h.flags = c->flags;
      h.flags2 = c->flags2;
      if (c->request_id == 0) c->request_id = next_request_id_++;
      h.request_id = c->request_id;
      h.var_id = c->var_id;
      h.dtype = static_cast<uint8_t>(c->dtype);
      h.slot = c->slot;
      h.payload_len = c->send_len[0] + c->send_len[1];
      h.step = c->step;
      h.arg0 = c->arg0;
      h.arg1 = c->arg1;
      h.count = c->count;
      EncodeHeader(h, conn->headers[i].data());
      conn->iov.push_back({conn->headers[i].data(), kHeaderSize});
      for (int k = 0; k < 2; ++k)
        if (c->send_len[k]) conn->iov.push_back({const_cast<void*>(c->send[k]), c->send_len[k]});
    }
  }
  const bool has_deadline = timeout_s >= 0;
  const auto deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(has_deadline ? timeout_s : 0));

  auto fail = [this](Conn* conn, const Status& st) {
    // A connection the heartbeat shut down reports why (the ps stopped answering), not the
    // EOF that the shutdown caused.
    Status verdict = HeartbeatVerdict(conn->shard);
    conn->Fail(verdict.ok() ? st : verdict);
    for (size_t i = conn->replies; i < conn->calls.size(); ++i) conn->calls[i]->status = conn->error;
    conn->replies = conn->calls.size();
    conn->iov_pos = conn->iov.size();
  };

  // Reads what has arrived; completes calls as their replies finish.
  auto do_recv = [&](Conn* conn) {
    while (conn->receiving()) {
      if (!conn->in_payload) {
        ssize_t r = recv(conn->fd, conn->hbuf + conn->hgot, kHeaderSize - conn->hgot, 0);
        if (r == 0) return fail(conn, Unavailable("connection to " + conn->name + " closed by the ps task"));
        if (r < 0) {
          if (errno == EINTR) continue;
          if (errno == EAGAIN || errno == EWOULDBLOCK) return;
          if (errno == ECONNRESET)  // the ps task died with bytes unread: as an end of stream
            return fail(conn, Unavailable("connection to " + conn->name + " closed by the ps task"));
          return fail(conn, Unavailable(ErrnoMessage("recv from", conn->name, errno)));
        }
        conn->hgot += static_cast<size_t>(r);
        bytes_received_.fetch_add(static_cast<uint64_t>(r), std::memory_order_relaxed);
        if (conn->hgot < kHeaderSize) continue;
        conn->hgot = 0;
        Header h = DecodeHeader(conn->hbuf);
        Call* c = conn->calls[conn->replies];
        Status st = CheckHeader(h, uint64_t{1} << 40);
        // Each reply answers the request sent for its own call (ids are shared by all of
        // this Client's connections, so they are not consecutive on one).
        if (st.ok() && (!(h.flags & kFlagReply) || h.request_id != c->request_id))
          st = Internal("reply out of order from " + conn->name + ": request id " +
                        std::to_string(h.request_id) + ", expected " +
                        std::to_string(c->request_id));
        if (!st.ok()) return fail(conn, Status(st.code(), conn->name + ": " + st.message()));
        conn->reply = h;
        conn->in_payload = true;
        conn->dst_got = 0;
        conn->msg.clear();
        if (h.status != 0) {
          conn->msg.resize(h.payload_len);
          conn->dst = reinterpret_cast<uint8_t*>(conn->msg.data());
        } else if (((c->flags & kFlagWaitStep) && (h.flags & kFlagNotReady) &&
                    h.payload_len == 0) ||
                   ((h.flags2 & kFlag2Awaiting) && h.payload_len == 0)) {
          // A wait that timed out, or a replica awaiting a copy: no value, the caller's
          // array untouched.
          conn->dst = nullptr;
        } else if (c->recv != nullptr) {
          if (h.payload_len != c->recv_len)
            return fail(conn, Internal("reply from " + conn->name + " carries " +
                                       std::to_string(h.payload_len) + " bytes; expected " +
                                       std::to_string(c->recv_len)));
          conn->dst = static_cast<uint8_t*>(c->recv);
        } else {
          c->recv_vec.resize(h.payload_len);
          conn->dst = c->recv_vec.data();
        }
        conn->dst_len = h.payload_len;
      }
      if (conn->dst_got < conn->dst_len) {
        ssize_t r = recv(conn->fd, conn->dst + conn->dst_got, conn->dst_len - conn->dst_got, 0);
        if (r == 0) return fail(conn, Unavailable("connection to " + conn->name + " closed by the ps task"));
        if (r < 0) {
          if (errno == EINTR) continue;
          if (errno == EAGAIN || errno == EWOULDBLOCK) return;
          if (errno == ECONNRESET)  // the ps task died with bytes unread: as an end of stream
            return fail(conn, Unavailable("connection to " + conn->name + " closed by the ps task"));
          return fail(conn, Unavailable(ErrnoMessage("recv from", conn->name, errno)));
        }
        conn->dst_got += static_cast<size_t>(r);
        bytes_received_.fetch_add(static_cast<uint64_t>(r), std::memory_order_relaxed);
        if (conn->dst_got < conn->dst_len) continue;
      }
      Call* c = conn->calls[conn->replies++];
      conn->in_payload = false;
      const Header& h = conn->reply;
      c->status = h.status == 0 ? Status::Ok() : Status(static_cast<Code>(h.status), conn->msg);
      c->step_out = h.step;
      c->flags_out = h.flags;
      c->flags2_out = h.flags2;
      c->var_id_out = h.var_id;
      c->count_out = h.count;
    }
  };

  // Sends what the socket takes now; false on a hard error.
  auto do_send = [&](Conn* conn) {
    while (conn->sending()) {
      struct msghdr m;
      std::memset(&m, 0, sizeof m);
      m.msg_iov = &conn->iov[conn->iov_pos];
      m.msg_iovlen = std::min<size_t>(conn->iov.size() - conn->iov_pos, IOV_MAX);
      ssize_t w = sendmsg(conn->fd, &m, MSG_NOSIGNAL);
      if (w < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return;
        const int err = errno;
        if (err == EPIPE || err == ECONNRESET) {
          // The ps task refused a frame and closed: its error reply (RESOURCE_EXHAUSTED for
          // a frame it will not read, say) is waiting to be read and is the real reason,
          // not the broken pipe; the calls it answers get it.
          do_recv(conn);
          if (!conn->error.ok()) return;
        }
        fail(conn, Unavailable(ErrnoMessage("send to", conn->name, err)));
        return;
      }
      bytes_sent_.fetch_add(static_cast<uint64_t>(w), std::memory_order_relaxed);
      auto left = static_cast<size_t>(w);
      while (conn->iov_pos < conn->iov.size() && left >= conn->iov[conn->iov_pos].iov_len) {
        left -= conn->iov[conn->iov_pos].iov_len;
        ++conn->iov_pos;
      }
      if (conn->iov_pos < conn->iov.size()) {
        auto& v = conn->iov[conn->iov_pos];
        v.iov_base = static_cast<uint8_t*>(v.iov_base) + left;
        v.iov_len -= left;
      }
    }
  };

  for (Conn* conn : active) do_send(conn);
  std::vector<struct pollfd> pfds;
  std::vector<Conn*> polled;
  for (;;) {
    pfds.clear();
    polled.clear();
    for (Conn* conn : active) {
      if (!conn->sending() && !conn->receiving()) continue;
      short ev = POLLIN;
      if (conn->sending()) ev |= POLLOUT;
      pfds.push_back({conn->fd, ev, 0});
      polled.push_back(conn);
    }
    if (pfds.empty()) break;
    int wait_ms = -1;
    if (has_deadline) {
      double left = SecondsLeft(deadline);
      if (left <= 0) {
        for (Conn* conn : polled) {
          char secs[32];
          snprintf(secs, sizeof secs, "%g", timeout_s);
          // The stream is out of step once a reply is abandoned, so the connection is
          // dropped: this call reports the deadline, later calls UnavailableError (which the
          // monitored session recovers from by reconnecting).
          fail(conn, Unavailable("connection to " + conn->name + " dropped after no reply "
                                 "within " + secs + " s"));
          for (Call* c : conn->calls)
            if (c->status.code() == Code::kUnavailable)
              c->status = Status(Code::kDeadlineExceeded,
                                 "no reply from " + conn->name + " within " + secs + " s");
        }
        break;
      }
      wait_ms = static_cast<int>(left * 1000) + 1;
    }
    int rc = poll(pfds.data(), pfds.size(), wait_ms);
    if (rc < 0) {
      if (errno == EINTR) continue;
      for (Conn* conn : polled) fail(conn, Internal(ErrnoMessage("poll", conn->name, errno)));
      break;
    }
    for (size_t i = 0; i < pfds.size(); ++i) {
      if (pfds[i].revents == 0) continue;
      if (pfds[i].revents & POLLOUT) do_send(polled[i]);
      if (pfds[i].revents & (POLLIN | POLLERR | POLLHUP)) do_recv(polled[i]);
    }
  }
  for (Conn* conn : active) {
    conn->calls.clear();
    conn->iov.clear();
  }
}

Status Client::Register(const std::vector<VarSpec>& specs, const std::vector<int>& shards,
                        const std::vector<const void*>& inits, std::vector<int>* handles) {
  std::vector<Writer> bodies(specs.size());
  std::vector<Call> calls(specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    specs[i].Encode(&bodies[i]);
    Call& c = calls[i];
    c.op = Op::kRegister;
    c.shard = shards[i];
    c.dtype = specs[i].dtype;
    c.send[0] = bodies[i].buffer().data();
    c.send_len[0] = bodies[i].buffer().size();
    if (specs[i].is_table()) {
      // A table's init spec is always sent (rows are made from it on first use); a non-null
      // `inits` entry asks to (re)initialize the table, i.e. to empty it.
      if (inits[i] != nullptr) c.flags |= kFlagInit;
    } else if (specs[i].init.kind != InitKind::kNone) {
      c.flags |= kFlagInit;  // the ps runs the initializer: no value bytes
    } else if (inits[i] != nullptr) {
      c.flags |= kFlagInit;
      c.send[1] = inits[i];
      c.send_len[1] = static_cast<size_t>(specs[i].NumElements()) * DTypeSize(specs[i].dtype);
    }
  }
  Status st = Run(&calls, timeout_s_);
  handles->clear();
  for (size_t i = 0; i < specs.size(); ++i) {
    if (!calls[i].status.ok()) {
      handles->push_back(-1);
      continue;
    }
    RemoteVar v;
    v.shard = shards[i];
    v.id = calls[i].var_id_out;
    v.spec = specs[i];
    v.nbytes = static_cast<size_t>(specs[i].NumElements()) * DTypeSize(specs[i].dtype);
    v.initialized = (calls[i].flags_out & kFlagInitialized) != 0;
    if (const std::vector<int>* members = replicas_.Members(shards[i])) {
      // Its place on every replica; one not reached registers it when it rejoins.
      for (int m : *members) {
        ReplicaVar r;
        r.shard = m;
        for (const auto& [shard, id] : calls[i].replica_ids)
          if (shard == m) {
            r.id = id;
            r.registered = true;
          }
        v.replicas.push_back(r);
      }
    }
    v.handle = num_vars();
    vars_.push_back(std::move(v));
    handles->push_back(static_cast<int>(vars_.size()) - 1);
    replicas_.AddVar(shards[i], handles->back());
  }
  return st;
}

}  // namespace psrt
