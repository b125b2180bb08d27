// ServerImpl: the state behind a Server (server.h), private to csrc/. One per ps task. The
// parts that serve it hold a pointer to it that outlives them: the Acceptor (acceptor.h),
// each Connection's thread (connection.h) and the op handlers it calls (handlers.h); Stop
// joins every one of those threads before a ServerImpl goes.
//
// Locks: `options` is fixed once Server::Create returns, except options.cluster_def
// (cluster_mu). store, budget, sync, events, heartbeats and acceptor lock themselves (see
// their headers), as does repl (replication.h). stopped_mu guards the stopped condition; stop_mu serializes Stop. None of
// these is held while another is taken, except sync's, held while it asks the store
// (sync_lifecycle.h).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>

#include "acceptor.h"
#include "auth_throttle.h"
#include "budget.h"
#include "events.h"
#include "heartbeats.h"
#include "replication.h"
#include "server.h"
#include "store.h"
#include "sync_lifecycle.h"

namespace psrt {

struct ServerImpl {
  // The task's name in sync's messages is built from options.job and options.task.
  explicit ServerImpl(const ServerOptions& options);

  ServerOptions options;           // chunk_bytes and max_payload normalized by Create
  int64_t incarnation = 0;         // random, nonzero: HELLO's answer, new on every start
  VariableStore store;
  Budget budget;
  std::atomic<bool> stopping{false};  // set first by Stop; every loop and wait polls it
  std::atomic<bool> stopped{false};
  SyncLifecycle sync;
  Replication repl;                // version 7: marks, awaiting variables, ReplicaState
  EventLog events{Server::kMaxEvents};
  Heartbeats heartbeats;
  AuthThrottle auth_throttle;      // failed authentications per peer address
  Acceptor acceptor;
  std::mutex cluster_mu;           // guards options.cluster_def and options.cluster_jobs
  std::mutex stopped_mu;           // guards the stopped condition
  std::condition_variable stopped_cv;
  std::mutex stop_mu;              // serializes Stop()
};

}  // namespace psrt
