#include "connection.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <new>

#include "handlers.h"
#include "net.h"
#include "server_impl.h"

namespace psrt {

namespace {

std::string FormatSeconds(double s) {
  char buf[32];
  snprintf(buf, sizeof buf, "%g", s);
  return buf;
}

}  // namespace

Status Connection::ReadFrameBytes(void* buf, size_t n) {
  const ServerOptions& options = server->options;
  Status st;
  if (!authenticated && options.hello_timeout_s > 0) {
    const auto deadline = accepted_at + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                            std::chrono::duration<double>(options.hello_timeout_s));
    st = ReadFullBy(fd, buf, n, peer, options.stall_timeout_s, deadline,
                    options.secret.empty() ? "HELLO" : "HELLO and AUTH", options.hello_timeout_s);
    if (st.code() == Code::kDeadlineExceeded) server->events.Add("closed " + st.message());
  } else {
    st = ReadFullWithin(fd, buf, n, peer, options.stall_timeout_s);
    if (st.code() == Code::kDeadlineExceeded) server->events.Add("dropped " + st.message());
  }
  return st;
}

uint8_t* Connection::Small() {
  if (!small) small.reset(new (std::nothrow) uint8_t[kSmallPayload]);
  return small.get();
}

Status Connection::Discard(uint64_t n) {
  uint8_t scratch[65536];
  while (n > 0) {
    size_t k = n < sizeof scratch ? static_cast<size_t>(n) : sizeof scratch;
    PSRT_RETURN_IF_ERROR(ReadFrameBytes(scratch, k));
    n -= k;
  }
  return Status::Ok();
}

bool Connection::Reply(const Header& req, const Status& st, int64_t step, uint8_t flags,
                       uint32_t var_id, const void* payload, size_t len, uint32_t count,
                       uint8_t flags2) {
  if (mark_pending) {
    // Still inside the variable's replication section (Dispatch holds it until the handler
    // returns): a snapshot that sees this request's effect sees its mark too.
    if (st.ok()) server->repl.Complete(client_id, req.request_id, mark_var);
    mark_pending = false;
    mark_var = nullptr;
  }
  Header h;
  h.op = req.op;
  h.flags = static_cast<uint8_t>(kFlagReply | flags);
  h.request_id = req.request_id;
  h.var_id = var_id;
  h.dtype = req.dtype;
  h.slot = req.slot;
  h.flags2 = flags2;
  h.status = static_cast<uint8_t>(st.code());
  h.step = step;
  h.count = count;
  const std::string& msg = st.message();
  if (!st.ok()) {
    payload = msg.data();
    len = msg.size();
  }
  h.payload_len = len;
  uint8_t hb[kHeaderSize];
  EncodeHeader(h, hb);
  struct iovec iov[2] = {{hb, kHeaderSize}, {const_cast<void*>(payload), len}};
  return WriteFull(fd, iov, len ? 2 : 1, peer).ok();
}

bool Connection::AwaitFrame() {
  using Clock = std::chrono::steady_clock;
  const auto secs = [](double s) {
    return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
  };
  const ServerOptions& options = server->options;
  for (;;) {
    if (server->stopping.load()) return false;
    const auto now = Clock::now();
    if (!authenticated) {
      // A peer that connects and never completes HELLO (and AUTH) holds a thread: bounded.
      if (options.hello_timeout_s > 0 && now - accepted_at > secs(options.hello_timeout_s)) {
        server->events.Add("closed " + peer + ": no HELLO" +
                           std::string(options.secret.empty() ? "" : " and AUTH") + " within " +
                           FormatSeconds(options.hello_timeout_s) + " s");
        return false;
      }
    } else if (options.idle_timeout_s > 0 && now - last_frame > secs(options.idle_timeout_s) &&
               (channel == kChannelHeartbeat ||
                !server->heartbeats.SeenSince(job, task, now - secs(options.idle_timeout_s)))) {
      // Idle past the limit, and (a request connection) its task's heartbeat is silent too:
      // the task left or its host vanished.
      server->events.Add("closed idle connection of /job:" + job + "/task:" +
                         std::to_string(task) + " from " + peer + " after " +
                         FormatSeconds(options.idle_timeout_s) + " s");
      return false;
    }
    double wait_s = 1.0;
    if (options.hello_timeout_s > 0) wait_s = std::min(wait_s, options.hello_timeout_s / 4);
    if (options.idle_timeout_s > 0) wait_s = std::min(wait_s, options.idle_timeout_s / 4);
    struct pollfd pfd = {fd, POLLIN, 0};
    const int rc = poll(&pfd, 1, std::max(1, static_cast<int>(wait_s * 1000)));
    if (rc > 0) return true;
    if (rc < 0 && errno != EINTR) return false;
  }
}

void Connection::Serve() {
  const ServerOptions& options = server->options;
  while (!server->stopping.load()) {
    uint8_t hb[kHeaderSize];
    if (!AwaitFrame()) break;
    if (!ReadFrameBytes(hb, kHeaderSize).ok()) break;
    Header h = DecodeHeader(hb);
    // A frame the server may stream (a dense PUSH, an ASSIGN, a REGISTER with its initial
    // value) is bounded here only by the largest variable; Dispatch then checks it against its
    // variable exactly. Every other frame is read whole and must fit max_payload.
    const bool may_stream =
        (h.op == static_cast<uint8_t>(Op::kPush) &&
         !(h.flags & (kFlagSparse | kFlagStepTagged))) ||
        (h.op == static_cast<uint8_t>(Op::kAssign) && h.slot != kOptimizerStateSlot) ||
        (h.op == static_cast<uint8_t>(Op::kRegister) && (h.flags & kFlagInit));
    Status st = CheckHeader(h, may_stream ? kMaxStreamPayload : options.max_payload,
                            /*request=*/true);
    if (st.ok() && (h.flags & kFlagReply)) st = InvalidArgument("request frame has the reply flag");
    if (!st.ok()) {
      // The stream cannot be trusted past a bad fixed header: answer once, then close.
      Reply(h, st);
      break;
    }
    if (!hello_done && h.op != static_cast<uint8_t>(Op::kHello)) {
      Reply(h, FailedPrecondition("first frame must be HELLO, got " + OpName(h.op)));
      break;
    }
    if (!authenticated && h.op != static_cast<uint8_t>(Op::kHello) &&
        h.op != static_cast<uint8_t>(Op::kAuth)) {
      server->events.Add("refused " + OpName(h.op) + " from unauthenticated peer " + peer);
      Reply(h, Status(Code::kUnauthenticated,
                      "this ps task requires authentication (the job's shared secret) "
                      "before " + OpName(h.op)));
      break;
    }
    if (channel == kChannelHeartbeat && h.op != static_cast<uint8_t>(Op::kPing) &&
        h.op != static_cast<uint8_t>(Op::kHello) && h.op != static_cast<uint8_t>(Op::kAuth)) {
      Reply(h, FailedPrecondition("a heartbeat connection serves PING only; got " +
                                  OpName(h.op)));
      break;
    }
    if (!Dispatch(*server, this, h)) break;
    last_frame = std::chrono::steady_clock::now();
  }
  shutdown(fd, SHUT_RDWR);
  finished.store(true);
}

bool Connection::ReadChunks(uint64_t n, size_t elem,
                            const std::function<void(const uint8_t*, uint64_t, size_t)>& use) {
  const ServerOptions& options = server->options;
  const size_t chunk = static_cast<size_t>(options.chunk_bytes / elem * elem);
  ServerImpl* s = server;
  uint64_t done = 0;
  while (done < n) {
    const size_t len = static_cast<size_t>(std::min<uint64_t>(chunk, n - done));
    // One chunk-sized buffer from the pool at a time: with the budget used up, this waits
    // and stops reading the socket, so the sender blocks instead of the ps growing.
    uint8_t* buf = s->budget.Acquire(chunk, [s] { return s->stopping.load(); });
    if (buf == nullptr) return false;
    Status st = ReadFullWithin(fd, buf, len, peer, options.stall_timeout_s);
    if (st.ok()) use(buf, done, len);
    s->budget.Release(buf, chunk);
    if (!st.ok()) {
      if (st.code() == Code::kDeadlineExceeded) s->events.Add("dropped " + st.message());
      return false;
    }
    done += len;
  }
  return true;
}

}  // namespace psrt
