// Connection: one peer of a ps task, served by a thread of its own. It waits for a frame
// (bounded by hello_timeout_s before HELLO/AUTH and idle_timeout_s after), checks the fixed
// header and what this connection may send (HELLO first, AUTH before anything else when the
// job has a secret, PING only on a heartbeat connection), hands the frame to the op handlers
// (Dispatch, handlers.h) and writes their replies, in request order.
//
// Threads: every method runs on the connection's own thread. The acceptor and Server::Stop
// only read fd, finished and thread, and shut fd down to end the loop. The fields below are
// the handlers' per-connection state; only this connection's thread touches them.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "auth.h"
#include "kernels.h"
#include "status.h"
#include "sync_lifecycle.h"
#include "wire.h"

namespace psrt {

struct ServerImpl;
struct VarReplication;

// Frames up to this size are read into the connection's own buffer, outside the budget: the
// requests of a training step (pulls, small pushes, step reads) never wait for big pushes.
constexpr size_t kSmallPayload = size_t{64} << 10;

struct Connection {
  // `server` outlives the connection (Server::Stop joins its thread first).
  Connection(ServerImpl* server, int fd) : server(server), fd(fd) {}

  // The frame loop: until the peer leaves, a frame is refused for good, a handler asks to
  // close, or the server stops. Then fd is shut down and `finished` set (the acceptor reaps).
  void Serve();
  // Sends the reply to `req`: its op, request id, dtype and slot echoed; a non-OK status
  // carries its message as the payload instead of `payload`. False when the write failed.
  // An OK reply to a SEQUENCED request (mark_pending) first completes its mark (replication.h).
  bool Reply(const Header& req, const Status& st, int64_t step = 0, uint8_t flags = 0,
             uint32_t var_id = 0, const void* payload = nullptr, size_t len = 0,
             uint32_t count = 0, uint8_t flags2 = 0);
  // Reads `n` payload bytes through the budget in chunks of at most chunk_bytes (whole
  // elements of `elem` bytes) and calls use(chunk, byte offset, length) for each. False when
  // the connection must close (the server stops, the peer vanished or stalled mid-frame).
  bool ReadChunks(uint64_t n, size_t elem,
                  const std::function<void(const uint8_t*, uint64_t, size_t)>& use);
  // Reads and drops n payload bytes so the stream stays in step after a refused frame.
  Status Discard(uint64_t n);
  // Reads n bytes of a frame: bounded by stall_timeout_s between bytes and, until HELLO (and
  // AUTH) completed, by what is left of hello_timeout_s in all (a peer that sends part of a
  // HELLO is closed at hello_timeout_s, not at the stall timeout). A deadline that passes is
  // recorded as an event naming the peer.
  Status ReadFrameBytes(void* buf, size_t n);
  // The small-payload buffer, allocated at first use; null when out of memory.
  uint8_t* Small();

  ServerImpl* const server;
  const int fd;
  std::string peer;                 // "host:port"
  std::string peer_host;            // the host alone (the failed-authentication limit's key)
  std::thread thread;
  std::atomic<bool> finished{false};
  bool hello_done = false;
  bool authenticated = false;       // true once AUTH succeeded, or at HELLO when no secret
  uint32_t channel = kChannelRequests;
  uint8_t nonce[kNonceSize] = {};   // this connection's challenge (a secret is set)
  std::chrono::steady_clock::time_point accepted_at = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point last_frame = accepted_at;
  std::string job;
  int task = -1;
  uint64_t client_id = 0;           // its HELLO's client id (version 7; 0: none)
  bool mark_pending = false;        // the request served is SEQUENCED and not a duplicate
  VarReplication* mark_var = nullptr;  // ... and applies to this variable (its `applied`)
  SyncSession sync;                 // its place in synchronous training
  std::unique_ptr<uint8_t[]> small;  // payloads of at most kSmallPayload bytes
  std::vector<uint8_t> out;         // reply payload that is not a variable's memory
  KernelArgs stream_args;           // a streamed PUSH's optimizer arguments (beta powers)

 private:
  // Waits until a frame starts arriving; false when the connection must close (the server
  // stops, HELLO/AUTH took too long, or it idled past idle_timeout_s).
  bool AwaitFrame();
};

}  // namespace psrt
