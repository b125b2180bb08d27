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
}  // namespace

struct Client::Conn {
  int fd = -1;
  int shard = 0;
  std::string address;
  std::string name;        // "/job:ps/task:K at host:port"
  int64_t incarnation = 0;
  Status error;            // sticky: the first failure of this connection
  uint64_t next_id = 1;

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
      heartbeat_timeout_s_(heartbeat_timeout_s) {}

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
  return conns_[shard]->error;
}

void Client::SetCluster(std::vector<JobDigest> jobs, std::string description) {
  cluster_jobs_ = std::move(jobs);
  cluster_description_ = std::move(description);
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
  hello.jobs = cluster_jobs_;
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
      cluster_description_.empty() ? "" : "; this worker's cluster: " + cluster_description_;
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
  conn->name = (expect_job.empty() ? "/job:ps/task:" + std::to_string(shard)
                                    : "/job:" + expect_job + "/task:" + std::to_string(expect_task)) +
               " at " + address;
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(timeout_s));
  double backoff = 0.01;
  Status st;
  int fd = -1;
  for (;;) {
    st = psrt::Connect(host, port, &fd, std::max(SecondsLeft(deadline), 0.01));
    if (st.ok()) break;
    double left = SecondsLeft(deadline);
    if (left <= 0)
      return Unavailable("cannot reach " + conn->name + " within " + std::to_string(timeout_s) +
                         " s: " + st.message());
    std::this_thread::sleep_for(std::chrono::duration<double>(std::min(backoff, left)));
    backoff = std::min(backoff * 2, 0.5);
  }
  st = Handshake(fd, conn->name, kChannelRequests, deadline, &conn->incarnation, expect_job,
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
      st = Handshake(hb_fd, conn->name, kChannelHeartbeat, deadline, nullptr, expect_job,
                     expect_task);
    if (!st.ok()) {
      CloseFd(fd);
      CloseFd(hb_fd);
      return Status(st.code(), "heartbeat connection: " + st.message());
    }
  }
  conn->fd = fd;
  const int old_fd = conns_[shard] ? conns_[shard]->fd : -1;
  conns_[shard] = std::move(conn);
  WatchShard(shard, fd, hb_fd, conns_[shard]->name);
  CloseFd(old_fd);
  return Status::Ok();
}

// ---- Heartbeats ----------------------------------------------------------------------------

void Client::WatchShard(int shard, int data_fd, int hb_fd, const std::string& name) {
  std::lock_guard<std::mutex> l(hb_mu_);
  if (static_cast<int>(hb_.size()) <= shard) hb_.resize(shard + 1);
  Watch& w = hb_[shard];
  if (w.fd >= 0) hb_retired_.push_back(w.fd);
  w = Watch();
  w.fd = hb_fd;
  w.data_fd = data_fd;
  w.name = name;
  w.last_answer = Clock::now();
  if (hb_fd >= 0 && !hb_thread_.joinable() && !hb_stop_) {
    if (pipe2(hb_wake_, O_CLOEXEC | O_NONBLOCK) == 0) {
      try {
        hb_thread_ = std::thread([this] { HeartbeatLoop(); });
      } catch (const std::system_error&) {
        CloseFd(hb_wake_[0]);
        CloseFd(hb_wake_[1]);
        hb_wake_[0] = hb_wake_[1] = -1;
      }
    }
  }
  if (hb_wake_[1] >= 0) {
    char b = 1;
    ssize_t ignored = write(hb_wake_[1], &b, 1);
    (void)ignored;
  }
}

Status Client::HeartbeatVerdict(int shard) {
  std::lock_guard<std::mutex> l(hb_mu_);
  if (shard < 0 || shard >= static_cast<int>(hb_.size())) return Status::Ok();
  return hb_[shard].verdict;
}

void Client::HeartbeatLoop() {
  const double timeout = heartbeat_timeout_s_;
  // A PING every quarter of the timeout (at most every second), so a reply is awaited several
  // times before the verdict.
  const double interval = std::min(1.0, std::max(0.01, timeout / 4));
  std::vector<struct pollfd> pfds;
  std::vector<int> shards;
  for (;;) {
    pfds.clear();
    shards.clear();
    {
      std::lock_guard<std::mutex> l(hb_mu_);
      if (hb_stop_) break;
      for (int fd : hb_retired_) CloseFd(fd);
      hb_retired_.clear();
      const auto now = Clock::now();
      for (size_t i = 0; i < hb_.size(); ++i) {
        Watch& w = hb_[i];
        if (w.fd < 0 || !w.verdict.ok()) continue;
        const double silent = std::chrono::duration<double>(now - w.last_answer).count();
        if (w.waiting && silent > timeout) {
          char buf[96];
          snprintf(buf, sizeof buf, "did not answer a heartbeat within %g s (silent for %.1f s)",
                   timeout, silent);
          Condemn(&w, w.name + " " + buf);
          continue;
        }
        if (!w.waiting &&
            std::chrono::duration<double>(now - w.last_sent).count() >= interval) {
          Header h;
          h.op = static_cast<uint8_t>(Op::kPing);
          h.request_id = ++w.next_id;
          uint8_t hb[kHeaderSize];
          EncodeHeader(h, hb);
          const ssize_t n = send(w.fd, hb, kHeaderSize, MSG_DONTWAIT | MSG_NOSIGNAL);
          if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
            Condemn(&w, errno == EPIPE || errno == ECONNRESET
                            ? "connection to " + w.name + " closed by the ps task"
                            : ErrnoMessage("send to", w.name, errno));
            continue;
          }
          if (n == static_cast<ssize_t>(kHeaderSize)) {
            w.waiting = true;
            w.last_answer = now;  // the silence is counted from the first unanswered PING
            w.last_sent = now;
          }
          // A partial or refused send (full buffer) is retried next time; a ps that stopped
          // reading is caught by the silence above once a PING went out.
        }
        pfds.push_back({w.fd, POLLIN, 0});
        shards.push_back(static_cast<int>(i));
      }
      pfds.push_back({hb_wake_[0], POLLIN, 0});
    }
    const int rc = poll(pfds.data(), pfds.size(), static_cast<int>(interval * 1000) + 1);
    if (rc < 0 && errno != EINTR) break;
    if (pfds.back().revents & POLLIN) {
      char drain[64];
      while (read(hb_wake_[0], drain, sizeof drain) > 0) {
      }
    }
    std::lock_guard<std::mutex> l(hb_mu_);
    for (size_t k = 0; k + 1 < pfds.size(); ++k) {
      if (pfds[k].revents == 0) continue;
      Watch& w = hb_[shards[k]];
      if (w.fd != pfds[k].fd || !w.verdict.ok()) continue;  // replaced meanwhile
      for (;;) {
        const ssize_t r = recv(w.fd, w.buf + w.got, kHeaderSize - w.got, MSG_DONTWAIT);
        if (r > 0) {
          w.got += static_cast<size_t>(r);
          if (w.got < kHeaderSize) continue;
          w.got = 0;
          const Header reply = DecodeHeader(w.buf);
          if (reply.magic != kWireMagic || reply.status != 0 || reply.payload_len != 0 ||
              !(reply.flags & kFlagReply)) {
            Condemn(&w, w.name + ": bad heartbeat reply");
            break;
          }
          w.waiting = false;
          w.last_answer = Clock::now();
          continue;
        }
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        if (r < 0 && errno == EINTR) continue;
        // The ps task closed or lost the connection (it exited, or its host reset it): the
        // same words the request connection would use when it sees the end of stream.
        const int err = errno;
        Condemn(&w, r == 0 || err == ECONNRESET
                        ? "connection to " + w.name + " closed by the ps task"
                        : ErrnoMessage("recv from", w.name, err));
        break;
      }
    }
  }
}

void Client::Condemn(Watch* w, const std::string& why) {
  // Requires hb_mu_. The request connection is shut down so a call blocked on it ends now and
  // reports `why` (Run asks HeartbeatVerdict when its connection fails).
  w->verdict = Unavailable(why);
  if (w->data_fd >= 0) shutdown(w->data_fd, SHUT_RDWR);
  hb_retired_.push_back(w->fd);
  w->fd = -1;
}

Status Client::Run(std::vector<Call>* calls, double timeout_s) {
  std::vector<Conn*> active;
  for (auto& c : *calls) {
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
      h.request_id = conn->next_id++;
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
        if (st.ok() && (!(h.flags & kFlagReply) || h.request_id != conn->next_id - conn->calls.size() + conn->replies))
          st = Internal("reply out of order from " + conn->name);
        if (!st.ok()) return fail(conn, Status(st.code(), conn->name + ": " + st.message()));
        conn->reply = h;
        conn->in_payload = true;
        conn->dst_got = 0;
        conn->msg.clear();
        if (h.status != 0) {
          conn->msg.resize(h.payload_len);
          conn->dst = reinterpret_cast<uint8_t*>(conn->msg.data());
        } else if ((c->flags & kFlagWaitStep) && (h.flags & kFlagNotReady) &&
                   h.payload_len == 0) {
          conn->dst = nullptr;  // a wait that timed out: no value, the caller's array untouched
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
  for (auto& c : *calls)
    if (!c.status.ok()) return c.status;
  return Status::Ok();
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
    vars_.push_back(std::move(v));
    handles->push_back(static_cast<int>(vars_.size()) - 1);
  }
  return st;
}

}  // namespace psrt
