#include "net.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <poll.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace psrt {

std::string ErrnoMessage(const char* what, const std::string& peer, int err) {
  return std::string(what) + (peer.empty() ? "" : " " + peer) + ": " + std::strerror(err) +
         " (errno " + std::to_string(err) + ")";
}

Status ParseAddress(const std::string& address, std::string* host, int* port) {
  std::string h, p;
  if (!address.empty() && address[0] == '[') {
    size_t close = address.find(']');
    if (close == std::string::npos)
      return InvalidArgument("address '" + address + "': unterminated '[' in IPv6 host");
    h = address.substr(1, close - 1);
    if (close + 1 >= address.size() || address[close + 1] != ':')
      return InvalidArgument("address '" + address + "' has no port; expected host:port");
    p = address.substr(close + 2);
  } else {
    size_t colon = address.rfind(':');
    if (colon == std::string::npos)
      return InvalidArgument("address '" + address + "' has no port; expected host:port");
    h = address.substr(0, colon);
    p = address.substr(colon + 1);
  }
  if (p.empty() || p.size() > 5 || p.find_first_not_of("0123456789") != std::string::npos)
    return InvalidArgument("address '" + address + "': port '" + p +
                           "' is not a number in [0, 65535]");
  int v = std::stoi(p);
  if (v > 65535)
    return InvalidArgument("address '" + address + "': port " + p + " is not in [0, 65535]");
  *host = h.empty() ? "0.0.0.0" : h;
  *port = v;
  return Status::Ok();
}

namespace {

Status Resolve(const std::string& host, int port, bool passive, struct addrinfo** out) {
  struct addrinfo hints;
  std::memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  if (passive) hints.ai_flags = AI_PASSIVE;
  std::string service = std::to_string(port);
  const char* node = host.empty() ? nullptr : host.c_str();
  int rc = getaddrinfo(node, service.c_str(), &hints, out);
  if (rc != 0)
    return Unavailable("cannot resolve " + host + ":" + service + ": " + gai_strerror(rc));
  return Status::Ok();
}

}  // namespace

Status Listen(const std::string& host, int port, int* fd_out, int* bound_port) {
  struct addrinfo* res = nullptr;
  PSRT_RETURN_IF_ERROR(Resolve(host, port, true, &res));
  std::string where = host + ":" + std::to_string(port);
  Status last = Unavailable("no address to listen on for " + where);
  for (struct addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      last = Unavailable(ErrnoMessage("socket for", where, errno));
      continue;
    }
    // SO_REUSEADDR lets a stopped server's port be bound again at once (TIME_WAIT); it
    // does not let two live listeners share a port on Linux, so "in use" is still detected.
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
      int err = errno;
      CloseFd(fd);
      if (err == EADDRINUSE) {
        freeaddrinfo(res);
        return Unavailable("address " + where + " already in use");
      }
      last = Unavailable(ErrnoMessage("bind", where, err));
      continue;
    }
    if (listen(fd, 512) != 0) {
      last = Unavailable(ErrnoMessage("listen", where, errno));
      CloseFd(fd);
      continue;
    }
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    getsockname(fd, reinterpret_cast<struct sockaddr*>(&ss), &len);
    *bound_port = ss.ss_family == AF_INET6
                      ? ntohs(reinterpret_cast<struct sockaddr_in6*>(&ss)->sin6_port)
                      : ntohs(reinterpret_cast<struct sockaddr_in*>(&ss)->sin_port);
    *fd_out = fd;
    freeaddrinfo(res);
    return Status::Ok();
  }
  freeaddrinfo(res);
  return last;
}

Status Connect(const std::string& host, int port, int* fd_out, double timeout_s) {
  struct addrinfo* res = nullptr;
  PSRT_RETURN_IF_ERROR(Resolve(host, port, false, &res));
  std::string where = host + ":" + std::to_string(port);
  Status last = Unavailable("no address to connect to for " + where);
  for (struct addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      last = Unavailable(ErrnoMessage("socket for", where, errno));
      continue;
    }
    int rc;
    if (timeout_s > 0) {
      // Non-blocking connect bounded by poll, then the socket is blocking again.
      const int flags = fcntl(fd, F_GETFL, 0);
      fcntl(fd, F_SETFL, flags | O_NONBLOCK);
      rc = connect(fd, ai->ai_addr, ai->ai_addrlen);
      if (rc != 0 && (errno == EINPROGRESS || errno == EINTR)) {
        struct pollfd p = {fd, POLLOUT, 0};
        int ready;
        do {
          ready = poll(&p, 1, static_cast<int>(timeout_s * 1000) + 1);
        } while (ready < 0 && errno == EINTR);
        if (ready == 0) {
          rc = -1;
          errno = ETIMEDOUT;
        } else {
          int err = 0;
          socklen_t len = sizeof err;
          getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
          rc = err == 0 && ready > 0 ? 0 : -1;
          errno = err != 0 ? err : (ready < 0 ? errno : 0);
        }
      }
      const int saved = errno;
      fcntl(fd, F_SETFL, flags);
      errno = saved;
    } else {
      do {
        rc = connect(fd, ai->ai_addr, ai->ai_addrlen);
      } while (rc != 0 && errno == EINTR);
    }
    if (rc != 0) {
      last = Unavailable(ErrnoMessage("connect to", where, errno));
      CloseFd(fd);
      continue;
    }
    SetNoDelay(fd);
    *fd_out = fd;
    freeaddrinfo(res);
    return Status::Ok();
  }
  freeaddrinfo(res);
  return last;
}

Status ReadFull(int fd, void* buf, size_t n, const std::string& peer, bool* eof_at_start) {
  auto* p = static_cast<uint8_t*>(buf);
  size_t got = 0;
  if (eof_at_start) *eof_at_start = false;
  while (got < n) {
    ssize_t r = recv(fd, p + got, n - got, 0);
    if (r > 0) {
      got += static_cast<size_t>(r);
      continue;
    }
    if (r == 0) {
      if (got == 0 && eof_at_start) *eof_at_start = true;
      return Unavailable("connection closed by " + peer);
    }
    if (errno == EINTR) continue;
    return Unavailable(ErrnoMessage("recv from", peer, errno));
  }
  return Status::Ok();
}

Status ReadFullWithin(int fd, void* buf, size_t n, const std::string& peer, double stall_s) {
  if (stall_s <= 0) return ReadFull(fd, buf, n, peer);
  auto* p = static_cast<uint8_t*>(buf);
  size_t got = 0;
  const int wait_ms = std::max(1, static_cast<int>(stall_s * 1000));
  while (got < n) {
    struct pollfd pfd = {fd, POLLIN, 0};
    const int rc = poll(&pfd, 1, wait_ms);
    if (rc < 0) {
      if (errno == EINTR) continue;
      return Unavailable(ErrnoMessage("poll for", peer, errno));
    }
    if (rc == 0) {
      char secs[32];
      snprintf(secs, sizeof secs, "%g", stall_s);
      return Status(Code::kDeadlineExceeded, "no data from " + peer + " for " + secs +
                                                 " s in the middle of a frame");
    }
    const ssize_t r = recv(fd, p + got, n - got, MSG_DONTWAIT);
    if (r > 0) {
      got += static_cast<size_t>(r);
    } else if (r == 0) {
      return Unavailable("connection closed by " + peer);
    } else if (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK) {
      return Unavailable(ErrnoMessage("recv from", peer, errno));
    }
  }
  return Status::Ok();
}

Status ReadFullBy(int fd, void* buf, size_t n, const std::string& peer, double stall_s,
                  std::chrono::steady_clock::time_point deadline, const std::string& what,
                  double limit_s) {
  using Clock = std::chrono::steady_clock;
  auto* p = static_cast<uint8_t*>(buf);
  size_t got = 0;
  Clock::time_point stall_at = Clock::time_point::max();
  const auto stall = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(stall_s > 0 ? stall_s : 0));
  if (stall_s > 0) stall_at = Clock::now() + stall;
  while (got < n) {
    const auto now = Clock::now();
    const auto until = std::min(deadline, stall_at);
    if (now >= until) {
      char secs[32];
      snprintf(secs, sizeof secs, "%g", now >= deadline ? limit_s : stall_s);
      if (now >= deadline)
        return Status(Code::kDeadlineExceeded,
                      peer + " did not complete its " + what + " within " + secs + " s");
      return Status(Code::kDeadlineExceeded, "no data from " + peer + " for " + secs +
                                                 " s in the middle of a frame");
    }
    const auto left_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(until - now).count() + 1;
    struct pollfd pfd = {fd, POLLIN, 0};
    const int rc = poll(&pfd, 1, static_cast<int>(std::min<int64_t>(left_ms, 1000)));
    if (rc < 0) {
      if (errno == EINTR) continue;
      return Unavailable(ErrnoMessage("poll for", peer, errno));
    }
    if (rc == 0) continue;
    const ssize_t r = recv(fd, p + got, n - got, MSG_DONTWAIT);
    if (r > 0) {
      got += static_cast<size_t>(r);
      if (stall_s > 0) stall_at = Clock::now() + stall;
    } else if (r == 0) {
      return Unavailable("connection closed by " + peer);
    } else if (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK) {
      return Unavailable(ErrnoMessage("recv from", peer, errno));
    }
  }
  return Status::Ok();
}

Status WriteFull(int fd, struct iovec* iov, int iovcnt, const std::string& peer) {
  while (iovcnt > 0) {
    struct msghdr msg;
    std::memset(&msg, 0, sizeof msg);
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<size_t>(iovcnt);
    ssize_t w = sendmsg(fd, &msg, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EINTR) continue;
      return Unavailable(ErrnoMessage("send to", peer, errno));
    }
    // Resume after a short write: drop fully written iovecs, trim the partial one.
    auto left = static_cast<size_t>(w);
    while (iovcnt > 0 && left >= iov->iov_len) {
      left -= iov->iov_len;
      ++iov;
      --iovcnt;
    }
    if (iovcnt > 0) {
      iov->iov_base = static_cast<uint8_t*>(iov->iov_base) + left;
      iov->iov_len -= left;
    }
  }
  return Status::Ok();
}

void SetNoDelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

Status SetNonBlocking(int fd, bool on) {
  int flags = fcntl(fd, F_GETFL, 0);
  if (flags < 0) return Internal(ErrnoMessage("fcntl", "", errno));
  flags = on ? (flags | O_NONBLOCK) : (flags & ~O_NONBLOCK);
  if (fcntl(fd, F_SETFL, flags) != 0) return Internal(ErrnoMessage("fcntl", "", errno));
  return Status::Ok();
}

void CloseFd(int fd) {
  if (fd >= 0) close(fd);
}

}  // namespace psrt
