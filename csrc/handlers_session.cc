// Session ops: HELLO (and the AUTH challenge), CLUSTER_INFO, PING, WORKER_DONE, LIST.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "auth.h"
#include "connection.h"
#include "handlers.h"
#include "server_impl.h"

namespace psrt {

namespace {

// After HELLO (no secret) or AUTH: a request connection starts a session of its task
// (synchronous training's bookkeeping); a heartbeat connection does not.
void Admit(ServerImpl& s, Connection* conn) {
  if (conn->channel != kChannelRequests) return;
  s.sync.BeginSession(conn->job, conn->task, &conn->sync);
}

}  // namespace

namespace {

std::string Hex64(uint64_t v) {
  char buf[24];
  snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

// Version 6: the peer means to reach this task, and the jobs both sides know in full agree.
// FailedPrecondition naming both tasks otherwise (a ps task with a secret does not show its
// addresses to a peer that has not authenticated yet).
Status CheckIdentity(ServerImpl& s, const HelloRecord& hello, uint32_t peer_task) {
  const std::string me = "/job:" + s.options.job + "/task:" + std::to_string(s.options.task);
  const std::string peer = "/job:" + hello.job + "/task:" + std::to_string(peer_task);
  std::vector<ClusterJob> mine;
  {
    std::lock_guard<std::mutex> l(s.cluster_mu);
    mine = s.options.cluster_jobs;
  }
  const bool show = s.options.secret.empty();
  std::string cluster;
  for (const ClusterJob& j : mine) {
    if (!cluster.empty()) cluster += "; ";
    cluster += j.job + ": " + j.tasks;
  }
  if (cluster.size() > 2000) cluster = cluster.substr(0, 2000) + "...";
  const std::string spec = show && !cluster.empty() ? " (its cluster: " + cluster + ")" : "";
  if (!hello.expect_job.empty() &&
      (hello.expect_job != s.options.job ||
       hello.expect_task != static_cast<uint32_t>(s.options.task))) {
    return FailedPrecondition(
        peer + " meant to reach /job:" + hello.expect_job + "/task:" +
        (hello.expect_task == kAnyTask ? std::string("?") : std::to_string(hello.expect_task)) +
        ", but this is " + me + spec +
        ": the two tasks were given different clusters (the ps tasks in another order in "
        "--ps_hosts?); give every task the same cluster");
  }
  for (const JobDigest& theirs : hello.jobs) {
    for (const ClusterJob& j : mine) {
      if (j.job != theirs.job || j.digest == theirs.digest) continue;
      return FailedPrecondition(
          peer + " and " + me + " were given different clusters: job '" + j.job + "' is " +
          (show ? "[" + j.tasks + "] " : std::string()) + "(digest " + Hex64(j.digest) +
          ") on " + me + " and another list (digest " + Hex64(theirs.digest) + ") on " + peer +
          "; give every task the same cluster");
    }
  }
  return Status::Ok();
}

}  // namespace

bool HandleHello(ServerImpl& s, Connection* conn, const Request& r) {
  const Header& h = r.h;
  if (h.count > kChannelHeartbeat)
    return conn->Reply(h, InvalidArgument("HELLO: unknown channel " + std::to_string(h.count) +
                                          "; valid: 0 (requests), 1 (heartbeat)"));
  HelloRecord hello;
  Reader rd(r.p, h.payload_len);
  Status st = hello.Decode(&rd);
  if (!st.ok()) return conn->Reply(h, st);
  st = CheckIdentity(s, hello, h.var_id);
  if (!st.ok()) {
    s.events.Add("refused HELLO from " + conn->peer + ": " + st.message());
    conn->Reply(h, st);
    return false;
  }
  conn->job = hello.job;
  conn->task = static_cast<int>(h.var_id);
  conn->channel = h.count;
  conn->client_id = hello.client_id;
  conn->hello_done = true;
  const std::string& me = s.options.job;
  if (!s.options.secret.empty()) {
    // Challenge: the peer proves it knows the secret (AUTH) before anything else counts.
    conn->authenticated = false;
    if (!RandomNonce(conn->nonce)) {
      conn->Reply(h, Internal("no random source for an authentication challenge"));
      return false;
    }
    std::string payload(reinterpret_cast<const char*>(conn->nonce), kNonceSize);
    payload += me;
    return conn->Reply(h, Status::Ok(), s.incarnation, kFlagAuthRequired,
                       static_cast<uint32_t>(s.options.task), payload.data(), payload.size(),
                       static_cast<uint32_t>(kNonceSize));
  }
  conn->authenticated = true;
  Admit(s, conn);
  return conn->Reply(h, Status::Ok(), s.incarnation, 0, static_cast<uint32_t>(s.options.task),
                     me.data(), me.size());
}

bool HandleAuth(ServerImpl& s, Connection* conn, const Request& r) {
  const Header& h = r.h;
  if (s.options.secret.empty())
    return conn->Reply(h, FailedPrecondition("this ps task has no secret: AUTH is not used"));
  if (conn->authenticated)
    return conn->Reply(h, FailedPrecondition("AUTH answers the challenge of a HELLO; send "
                                             "HELLO first"));
  const Digest want = WorkerProof(s.options.secret, conn->nonce, r.p, conn->job,
                                  static_cast<uint32_t>(conn->task));
  Digest got;
  std::memcpy(got.data(), r.p + kNonceSize, got.size());
  if (!DigestEqual(want, got)) {
    // The first failures of an address are reported one by one, the rest summed up by the
    // throttle (auth_throttle.h), which also refuses the address at accept past its limit.
    if (s.auth_throttle.Failed(conn->peer_host, std::chrono::steady_clock::now()))
      s.events.Add("authentication failed for peer " + conn->peer + " (claiming /job:" +
                   conn->job + "/task:" + std::to_string(conn->task) + ")");
    conn->Reply(h, Status(Code::kUnauthenticated,
                          "authentication failed: the proof does not match this job's "
                          "secret (PSRT_AUTH_SECRET)"));
    return false;
  }
  conn->authenticated = true;
  Admit(s, conn);
  const Digest proof = ServerProof(s.options.secret, conn->nonce, r.p);
  return conn->Reply(h, Status::Ok(), 0, 0, static_cast<uint32_t>(s.options.task),
                     proof.data(), proof.size());
}

bool HandleClusterInfo(ServerImpl& s, Connection* conn, const Request& r) {
  std::string def;
  {
    std::lock_guard<std::mutex> l(s.cluster_mu);
    def = s.options.cluster_def;
  }
  return conn->Reply(r.h, Status::Ok(), 0, 0, 0, def.data(), def.size());
}

bool HandlePing(ServerImpl& s, Connection* conn, const Request& r) {
  if (conn->channel == kChannelHeartbeat) s.heartbeats.Note(conn->job, conn->task);
  return conn->Reply(r.h, Status::Ok());
}

bool HandleWorkerDone(ServerImpl& s, Connection* conn, const Request& r) {
  s.sync.WorkerDone(std::string(reinterpret_cast<const char*>(r.p), r.h.payload_len),
                    r.h.var_id);
  return conn->Reply(r.h, Status::Ok());
}

bool HandleList(ServerImpl& s, Connection* conn, const Request& r) {
  Writer w;
  try {
    for (Variable* v : s.store.All()) {
      w.Put<uint32_t>(v->id);
      w.Put<uint8_t>(static_cast<uint8_t>(v->spec.dtype));
      w.Put<uint8_t>(v->initialized.load() ? 1 : 0);
      w.Put<uint8_t>(static_cast<uint8_t>(v->spec.optimizer));
      w.Put<uint8_t>(static_cast<uint8_t>(v->spec.shape.size()));
      for (int64_t d : v->spec.shape) w.Put<int64_t>(d);
      w.PutString(v->spec.name);
      // Version 5: u8 table, u64 rows, u64 bytes (a table's rows and memory; a
      // variable's element count and value bytes).
      w.Put<uint8_t>(v->spec.table);
      w.Put<uint64_t>(v->table ? v->table->rows() : v->num_elements);
      w.Put<uint64_t>(v->table ? v->table->bytes()
                               : v->nbytes * (1 + v->slots.size()));
    }
  } catch (const std::bad_alloc&) {
    return conn->Reply(r.h, Status(Code::kResourceExhausted,
                                   "out of memory listing " + std::to_string(s.store.size()) +
                                       " variables"));
  }
  auto& b = w.buffer();
  return conn->Reply(r.h, Status::Ok(), 0, 0, 0, b.data(), b.size());
}

}  // namespace psrt
