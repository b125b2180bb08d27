#include "acceptor.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cerrno>
#include <cstring>
#include <system_error>

#include "connection.h"
#include "net.h"
#include "server_impl.h"

namespace psrt {

Acceptor::Acceptor(ServerImpl* server) : server_(server) {}

Acceptor::~Acceptor() = default;

Status Acceptor::Listen(const std::string& host, int port) {
  PSRT_RETURN_IF_ERROR(psrt::Listen(host, port, &listen_fd_, &port_));
  if (pipe2(wake_pipe_, O_CLOEXEC) != 0) {
    CloseFd(listen_fd_);
    return Internal(ErrnoMessage("pipe", "", errno));
  }
  return Status::Ok();
}

Status Acceptor::Start() {
  // Kept to be closed when descriptors run out, so a pending peer can still be accepted and
  // told why it is refused (ShedPending).
  reserve_fd_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
  try {
    thread_ = std::thread([this] { Loop(); });
  } catch (const std::system_error& e) {
    return Status(Code::kResourceExhausted, std::string("cannot start the accept thread: ") +
                                                e.what());
  }
  return Status::Ok();
}

void Acceptor::Stop() {
  char b = 1;
  ssize_t ignored = write(wake_pipe_[1], &b, 1);
  (void)ignored;
  if (thread_.joinable()) thread_.join();
  std::vector<std::unique_ptr<Connection>> conns;
  {
    std::lock_guard<std::mutex> l(mu_);
    for (auto& c : conns_) shutdown(c->fd, SHUT_RDWR);
    conns.swap(conns_);
  }
  for (auto& c : conns) {
    if (c->thread.joinable()) c->thread.join();
    CloseFd(c->fd);
  }
  CloseFd(listen_fd_);
  CloseFd(reserve_fd_);
  reserve_fd_ = -1;
  CloseFd(wake_pipe_[0]);
  CloseFd(wake_pipe_[1]);
  listen_fd_ = wake_pipe_[0] = wake_pipe_[1] = -1;
}

int Acceptor::NumOpen() const {
  std::lock_guard<std::mutex> l(mu_);
  int n = 0;
  for (auto& c : conns_) n += c->finished.load() ? 0 : 1;
  return n;
}

void Acceptor::ShedPending(int err) {
  const ServerOptions& options = server_->options;
  if (reserve_fd_ >= 0) {
    CloseFd(reserve_fd_);
    reserve_fd_ = -1;
  }
  int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
  if (fd >= 0) {
    Refuse(fd, Code::kUnavailable,
           "/job:" + options.job + "/task:" + std::to_string(options.task) +
               " cannot take another connection now (accept: " + std::strerror(err) +
               "); retry later");
  }
  reserve_fd_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
}

void Acceptor::Refuse(int fd, Code code, const std::string& msg) {
  // One reply to the HELLO the peer is about to send, so it learns why; never blocks.
  Header h;
  h.op = static_cast<uint8_t>(Op::kHello);
  h.flags = kFlagReply;
  h.status = static_cast<uint8_t>(code);
  h.payload_len = msg.size();
  uint8_t frame[kHeaderSize + 512];
  EncodeHeader(h, frame);
  if (msg.size() <= sizeof frame - kHeaderSize) {
    std::memcpy(frame + kHeaderSize, msg.data(), msg.size());
    ssize_t ignored = send(fd, frame, kHeaderSize + msg.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    (void)ignored;
  }
  shutdown(fd, SHUT_WR);
  CloseFd(fd);
}

void Acceptor::Loop() {
  const ServerOptions& options = server_->options;
  int backoff_ms = 0;
  auto last_summaries = std::chrono::steady_clock::now();
  while (!server_->stopping.load()) {
    struct pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_pipe_[0], POLLIN, 0}};
    int rc = poll(fds, 2, 1000);
    if (rc < 0 && errno != EINTR) break;
    if (server_->stopping.load()) break;
    {
      // Reap connections whose peer went away so threads and fds do not pile up.
      std::lock_guard<std::mutex> l(mu_);
      for (auto it = conns_.begin(); it != conns_.end();) {
        if ((*it)->finished.load()) {
          (*it)->thread.join();
          CloseFd((*it)->fd);
          it = conns_.erase(it);
        } else {
          ++it;
        }
      }
    }
    // The failed-authentication summaries that are due (at most every 200 ms: a flood
    // accepts thousands of connections a second, and each look walks every tracked host).
    const auto now = std::chrono::steady_clock::now();
    if (now - last_summaries >= std::chrono::milliseconds(200)) {
      last_summaries = now;
      for (std::string& line : server_->auth_throttle.TakeSummaries(now))
        server_->events.Add(line);
    }
    if (rc <= 0 || !(fds[0].revents & POLLIN)) continue;
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    int fd = accept4(listen_fd_, reinterpret_cast<struct sockaddr*>(&ss), &len, SOCK_CLOEXEC);
    if (fd < 0) {
      const int err = errno;
      if (err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM) {
        // Out of descriptors (or kernel memory): the peer stays in the backlog and poll would
        // report it again at once, a busy loop. Refuse it with the reserve descriptor, then
        // back off (10 ms doubling to 1 s) while the connections already open are served.
        ShedPending(err);
        backoff_ms = backoff_ms == 0 ? 10 : std::min(backoff_ms * 2, 1000);
        struct pollfd wake = {wake_pipe_[0], POLLIN, 0};
        poll(&wake, 1, backoff_ms);
      }
      continue;
    }
    backoff_ms = 0;
    SetNoDelay(fd);
    auto conn = std::make_unique<Connection>(server_, fd);
    char host[128] = "?";
    int port = 0;
    if (ss.ss_family == AF_INET) {
      auto* a = reinterpret_cast<struct sockaddr_in*>(&ss);
      inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
      port = ntohs(a->sin_port);
    } else if (ss.ss_family == AF_INET6) {
      auto* a = reinterpret_cast<struct sockaddr_in6*>(&ss);
      inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
      port = ntohs(a->sin6_port);
    }
    conn->peer = std::string(host) + ":" + std::to_string(port);
    conn->peer_host = host;
    double retry_s = 0;
    if (!options.secret.empty() &&
        !server_->auth_throttle.Admit(conn->peer_host, std::chrono::steady_clock::now(),
                                      &retry_s)) {
      // Too many failed authentications from this address: refused before a thread or a
      // challenge is spent on it (summarized in the events once per auth_summary_s).
      char buf[160];
      snprintf(buf, sizeof buf, "; retry in %.1f s (at most %g per s after a burst of %g)",
               retry_s, server_->auth_throttle.rate_per_s(), server_->auth_throttle.burst());
      Refuse(fd, Code::kUnavailable,
             "/job:" + options.job + "/task:" + std::to_string(options.task) +
                 " refuses connections from " + conn->peer_host +
                 " for now: too many failed authentications from it" + buf);
      continue;
    }
    Connection* raw = conn.get();
    std::unique_lock<std::mutex> l(mu_);
    if (server_->stopping.load()) {
      CloseFd(fd);
      break;
    }
    if (options.max_connections > 0) {
      int open_conns = 0;
      for (auto& c : conns_) open_conns += c->finished.load() ? 0 : 1;
      if (open_conns >= options.max_connections) {
        l.unlock();
        server_->events.Add("refused " + conn->peer + ": " + std::to_string(open_conns) +
                            " connections open, the maximum (max_connections)");
        Refuse(fd, Code::kResourceExhausted,
               "/job:" + options.job + "/task:" + std::to_string(options.task) +
                   " already serves the maximum of " + std::to_string(options.max_connections) +
                   " connections (max_connections); close idle clients or raise the limit");
        continue;
      }
    }
    try {
      conn->thread = std::thread([raw] {
        // Backstop: no exception (e.g. std::bad_alloc from a message string) may leave a
        // connection thread, or std::terminate would end the whole ps process.
        try {
          raw->Serve();
        } catch (...) {
          shutdown(raw->fd, SHUT_RDWR);
          raw->finished.store(true);
        }
      });
    } catch (const std::system_error&) {
      CloseFd(fd);  // no thread for this peer (resource limit): refuse it, keep serving others
      continue;
    }
    conns_.push_back(std::move(conn));
  }
}

}  // namespace psrt
