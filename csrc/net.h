// Sockets: listen, connect, full reads and writes. Blocking helpers retry EINTR and resume
// short transfers; every error names the syscall, errno text and the peer address.
// Thread-compatible: functions keep no state; an fd must not be written by two threads at once.
#pragma once

#include <sys/uio.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include "status.h"

namespace psrt {

// Splits "host:port" (or "[v6]:port"). InvalidArgument when the port is missing or not a
// number in [0, 65535]; the message names the address and mentions "port".
Status ParseAddress(const std::string& address, std::string* host, int* port);

// Binds and listens on host:port (port 0: the OS picks). On success *fd is the listening
// socket and *bound_port the port bound. A port in use fails at once with Unavailable
// "address H:P already in use".
Status Listen(const std::string& host, int port, int* fd, int* bound_port);

// One connection attempt to host:port with TCP_NODELAY set. Unavailable on refusal.
// timeout_s > 0: a connect not completed within it (a peer whose SYNs are dropped, e.g. a
// partition) is Unavailable "timed out" instead of waiting out the kernel's SYN retries, so
// the caller's next attempt sends a fresh SYN at once when the peer is reachable again.
Status Connect(const std::string& host, int port, int* fd, double timeout_s = 0);

// Blocking full transfers on a blocking fd. EOF before `n` bytes is Unavailable
// ("connection closed by <peer>"). `*eof_at_start` (if given) is set when the peer closed
// before the first byte: a clean end of stream.
Status ReadFull(int fd, void* buf, size_t n, const std::string& peer, bool* eof_at_start = nullptr);
Status WriteFull(int fd, struct iovec* iov, int iovcnt, const std::string& peer);
// ReadFull that gives up on a silent peer: DeadlineExceeded ("no data from PEER for S s in
// the middle of a frame") when no byte arrives for stall_s seconds; stall_s <= 0: no bound.
Status ReadFullWithin(int fd, void* buf, size_t n, const std::string& peer, double stall_s);
// ReadFullWithin that also ends at `deadline`, however steadily the peer trickles bytes in
// (a connection that must complete HELLO by then): DeadlineExceeded ("PEER did not complete
// its WHAT within S s") once it passes.
Status ReadFullBy(int fd, void* buf, size_t n, const std::string& peer, double stall_s,
                  std::chrono::steady_clock::time_point deadline, const std::string& what,
                  double limit_s);

void SetNoDelay(int fd);
Status SetNonBlocking(int fd, bool on);
void CloseFd(int fd);

// "recv from 127.0.0.1:5000: Connection reset by peer (errno 104)"
std::string ErrnoMessage(const char* what, const std::string& peer, int err);

}  // namespace psrt
