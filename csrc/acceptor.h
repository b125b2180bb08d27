// Acceptor: a ps task's listening socket and the connections it admits. One thread polls the
// port (and a wake pipe Stop writes), admits each new peer up to max_connections with a
// thread of its own (Connection::Serve), refuses the rest with a reply naming why, and reaps
// the connections whose peer left. When descriptors run out it gives up a reserve one to
// accept and refuse a pending peer instead of spinning on it.
//
// Threads: Listen and Start run once, in Server::Create; Stop once, in Server::Stop (which
// sets server->stopping first). mu_ guards conns_; it is held to reap, admit and count, never
// while writing to a peer.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "status.h"

namespace psrt {

struct Connection;
struct ServerImpl;

class Acceptor {
 public:
  // `server` outlives the acceptor.
  explicit Acceptor(ServerImpl* server);
  ~Acceptor();  // after Stop (or when never started)

  // Binds and listens on host:port (port 0: the OS picks) and makes the wake pipe.
  // Unavailable "address H:P already in use" when the port is taken.
  Status Listen(const std::string& host, int port);
  // Takes the reserve descriptor and starts the accept thread. ResourceExhausted when no
  // thread can be started.
  Status Start();
  int port() const { return port_; }
  // Wakes and joins the accept thread, shuts every connection down, joins its thread, and
  // closes every descriptor (the port can be bound again at once).
  void Stop();
  // Connections whose thread is still serving.
  int NumOpen() const;

 private:
  void Loop();
  // accept() failed with `err` (EMFILE and the like): frees the reserve descriptor to accept
  // one pending peer, answers its HELLO with UNAVAILABLE naming the reason, closes it and
  // takes the reserve again.
  void ShedPending(int err);
  // Answers the HELLO a fresh peer is about to send with `code` and `msg`, and closes fd.
  static void Refuse(int fd, Code code, const std::string& msg);

  ServerImpl* const server_;
  int listen_fd_ = -1;
  int port_ = 0;
  int wake_pipe_[2] = {-1, -1};   // written by Stop() to wake the acceptor's poll
  int reserve_fd_ = -1;           // /dev/null, given up to shed a peer when fds run out
  std::thread thread_;
  mutable std::mutex mu_;         // guards conns_
  std::vector<std::unique_ptr<Connection>> conns_;
};

}  // namespace psrt
