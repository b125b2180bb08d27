// Client: its heartbeats. Connect hands each ps task's heartbeat connection to one thread per
// Client, which PINGs every interval and condemns a ps task that leaves a PING unanswered for
// the timeout (client.h, "Liveness"). The watches are guarded by hb_mu_, never held across
// blocking I/O.
#include <errno.h>
#include <poll.h>
#include <sys/socket.h>

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "client.h"
#include "net.h"

namespace psrt {

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

}  // namespace psrt
