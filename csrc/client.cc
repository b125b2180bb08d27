#include "client.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/uio.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <thread>

#include "net.h"

namespace psrt {

namespace {
using Clock = std::chrono::steady_clock;

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

Client::Client(std::string job, int task) : job_(std::move(job)), task_(task) {}
Client::~Client() { Close(); }

void Client::Close() {
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

Status Client::Connect(int shard, const std::string& address, double timeout_s) {
  if (shard < 0) return InvalidArgument("shard index " + std::to_string(shard) + " < 0");
  std::string host;
  int port = 0;
  PSRT_RETURN_IF_ERROR(ParseAddress(address, &host, &port));
  if (shard >= num_shards()) conns_.resize(shard + 1);
  auto conn = std::make_unique<Conn>();
  conn->shard = shard;
  conn->address = address;
  conn->name = "/job:ps/task:" + std::to_string(shard) + " at " + address;
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(timeout_s));
  double backoff = 0.01;
  Status st;
  int fd = -1;
  for (;;) {
    st = psrt::Connect(host, port, &fd);
    if (st.ok()) break;
    double left = SecondsLeft(deadline);
    if (left <= 0)
      return Unavailable("cannot reach " + conn->name + " within " + std::to_string(timeout_s) +
                         " s: " + st.message());
    std::this_thread::sleep_for(std::chrono::duration<double>(std::min(backoff, left)));
    backoff = std::min(backoff * 2, 0.5);
  }
  // HELLO: our version, job and task; the reply carries the ps task's incarnation. A peer
  // that accepts but never answers must not block past the deadline (at least 1 s is left
  // for the exchange itself): the socket is still blocking here, so bound it with timeouts.
  const double hello_s = std::max(SecondsLeft(deadline), 1.0);
  struct timeval tv;
  tv.tv_sec = static_cast<time_t>(hello_s);
  tv.tv_usec = static_cast<suseconds_t>((hello_s - static_cast<double>(tv.tv_sec)) * 1e6);
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  auto hello_failed = [&](const Status& io) {
    const int err = errno;  // EAGAIN: SO_RCVTIMEO/SO_SNDTIMEO expired (errno is 0 before I/O)
    CloseFd(fd);
    if (err == EAGAIN || err == EWOULDBLOCK)
      return Unavailable("no HELLO reply from " + conn->name + " within " +
                         std::to_string(hello_s) + " s");
    return io;
  };
  Header h;
  h.op = static_cast<uint8_t>(Op::kHello);
  h.request_id = 0;
  h.var_id = static_cast<uint32_t>(task_);
  h.payload_len = job_.size();
  uint8_t hb[kHeaderSize];
  EncodeHeader(h, hb);
  struct iovec iov[2] = {{hb, kHeaderSize}, {const_cast<char*>(job_.data()), job_.size()}};
  errno = 0;
  st = WriteFull(fd, iov, 2, conn->name);
  uint8_t rb[kHeaderSize];
  if (st.ok()) st = ReadFull(fd, rb, kHeaderSize, conn->name);
  if (!st.ok()) return hello_failed(st);
  Header r = DecodeHeader(rb);
  if (r.magic != kWireMagic) {
    CloseFd(fd);
    return Unavailable(conn->name + " is not a psrt ps task (bad magic in HELLO reply)");
  }
  if (r.version != kWireVersion) {
    CloseFd(fd);
    return FailedPrecondition("wire protocol version mismatch with " + conn->name +
                              ": this worker speaks version " + std::to_string(kWireVersion) +
                              ", the ps task speaks version " + std::to_string(r.version));
  }
  std::string payload(std::min<uint64_t>(r.payload_len, 4096), '\0');
  if (!payload.empty()) {
    st = ReadFull(fd, payload.data(), payload.size(), conn->name);
    if (!st.ok()) return hello_failed(st);
  }
  if (r.status != 0) {
    CloseFd(fd);
    return Status(static_cast<Code>(r.status), conn->name + " refused HELLO: " + payload);
  }
  conn->incarnation = r.step;
  tv.tv_sec = 0;
  tv.tv_usec = 0;
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  st = SetNonBlocking(fd, true);
  if (!st.ok()) {
    CloseFd(fd);
    return st;
  }
  conn->fd = fd;
  if (conns_[shard] && conns_[shard]->fd >= 0) CloseFd(conns_[shard]->fd);
  conns_[shard] = std::move(conn);
  return Status::Ok();
}

Status Client::Run(std::vector<Call>* calls, double timeout_s) {
  std::vector<Conn*> active;
  for (auto& c : *calls) {
    if (c.shard < 0 || c.shard >= num_shards() || !conns_[c.shard]) {
      c.status = FailedPrecondition("not connected to /job:ps/task:" + std::to_string(c.shard));
      continue;
    }
    Conn* conn = conns_[c.shard].get();
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

  auto fail = [](Conn* conn, const Status& st) {
    conn->Fail(st);
    for (size_t i = conn->replies; i < conn->calls.size(); ++i) conn->calls[i]->status = conn->error;
    conn->replies = conn->calls.size();
    conn->iov_pos = conn->iov.size();
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
        fail(conn, Unavailable(ErrnoMessage("send to", conn->name, errno)));
        return;
      }
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

  // Reads what has arrived; completes calls as their replies finish.
  auto do_recv = [&](Conn* conn) {
    while (conn->receiving()) {
      if (!conn->in_payload) {
        ssize_t r = recv(conn->fd, conn->hbuf + conn->hgot, kHeaderSize - conn->hgot, 0);
        if (r == 0) return fail(conn, Unavailable("connection to " + conn->name + " closed by the ps task"));
        if (r < 0) {
          if (errno == EINTR) continue;
          if (errno == EAGAIN || errno == EWOULDBLOCK) return;
          return fail(conn, Unavailable(ErrnoMessage("recv from", conn->name, errno)));
        }
        conn->hgot += static_cast<size_t>(r);
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
          return fail(conn, Unavailable(ErrnoMessage("recv from", conn->name, errno)));
        }
        conn->dst_got += static_cast<size_t>(r);
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
    if (inits[i] != nullptr) {
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
