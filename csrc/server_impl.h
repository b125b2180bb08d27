// ServerImpl: the state behind a Server (server.h), private to csrc/. One per ps task; every
// part that serves it (the accept loop, each connection's thread, the op handlers) reaches it
// through a pointer that outlives them (Server::Stop joins every thread before it goes).
//
// Locks: options is fixed once Create returns, except options.cluster_def (cluster_mu);
// store, budget, events, heartbeats and sync lock themselves (their headers); mu guards conns
// and the stopped condition; stop_mu serializes Stop. No lock is held while taking another
// of these, except sync's, which is held while asking the store (sync_lifecycle.h).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "acceptor.h"
#include "budget.h"
#include "connection.h"
#include "events.h"
#include "heartbeats.h"
#include "server.h"
#include "status.h"
#include "store.h"
#include "sync_lifecycle.h"
#include "wire.h"

namespace psrt {

// "PULL", "TABLE_EXPORT", ...: an op code's name in messages ("op N" past the last).
std::string OpName(uint8_t op);

struct ServerImpl {
  explicit ServerImpl(const ServerOptions& options);

  // After HELLO (no secret) or AUTH: a request connection starts a session of its task.
  void Admit(Connection* conn);
  // Handles one validated frame; returns false when the connection must close.
  bool Handle(Connection* conn, const Header& h);
  // Sizes conn->out for the reply of a row PULL of h.count rows; ResourceExhausted past
  // max_payload or memory.
  Status RowReplyBuffer(Connection* conn, const Header& h, const Variable* var,
                        size_t row_bytes);
  // A row-sparse PULL of a hash table (rows created on first use); ids: h.count int64s.
  bool PullTableRows(Connection* conn, const Header& h, Variable* var, const int64_t* ids);
  // Streamed frames (larger than one chunk); each returns false when the connection must
  // close (the peer vanished or stalled mid-frame: the chunks applied so far stay applied).
  bool StreamPush(Connection* conn, const Header& h, Variable* var);
  bool StreamAssign(Connection* conn, const Header& h, Variable* var);
  bool StreamRegister(Connection* conn, const Header& h);
  ServerOptions options;
  int64_t incarnation = 0;
  VariableStore store;
  Budget budget;
  std::atomic<bool> stopping{false};
  std::atomic<bool> stopped{false};
  SyncLifecycle sync;

  EventLog events{Server::kMaxEvents};
  Heartbeats heartbeats;
  Acceptor acceptor;
  std::mutex cluster_mu;           // guards options.cluster_def
  std::mutex stopped_mu;           // guards the stopped condition
  std::condition_variable stopped_cv;
  std::mutex stop_mu;              // serializes Stop()
};

}  // namespace psrt
