// ReplicaSet: a Client's replica groups (ps replication, issue 23; docs/protocol.md). A
// logical shard's variables live on a group of ps tasks (physical shards) in preference
// order; this class knows what the Client knows of each replica, turns a batch of logical
// calls into the requests to send, and their replies back into the logical results:
//
// - A mutation (REGISTER with INIT, PUSH, ASSIGN, ASSIGN_ADD, STEP_INCREMENT, TABLE_IMPORT,
//   TABLE_EVICT) goes to every live replica with one request id, flagged SEQUENCED. It is OK
//   once a whole replica acknowledged it; its results (ACCEPTED, step, count, a RETURN_VALUE)
//   are the first whole replica's. A whole replica that answers differently from that one
//   has diverged and is dropped (it rejoins as stale and is copied again).
// - A read (PULL, STEP_READ, IS_INITIALIZED, LIST, TABLE_EXPORT) goes to the group's primary:
//   the first whole live replica in group order (none whole: the first live one). One that
//   fails, or answers AWAITING (it holds no copy), is passed over, and the read is sent to the
//   next whole replica in a further round of the same call.
// - A replica whose connection fails is dead: its reads move to the next whole replica (a
//   failover) and a background thread dials it every 0.5 s (1 s connect timeout). Once the
//   Client adopted the new connection and registered the group's variables there again, the
//   replica is joining (written, not read) until an IS_INITIALIZED check (every 1 s, one
//   batch) finds every variable initialized and none AWAITING: then it is whole again.
// - When the last whole replica of a group fails, the group is lost: every later call of it
//   fails with UnavailableError saying so (the session falls back to the checkpoint).
//
// Thread-safety: all but three members are used by the Client's calling thread only, one
// call at a time. mu_ guards the reconnect thread's hand-off (want_, dialed_, stop_) and
// events_; it is never held across I/O or while calling the dial function. failovers() is
// lock-free.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "call.h"
#include "status.h"

namespace psrt {

enum class ReplicaState : uint8_t { kWhole = 0, kJoining = 1, kDead = 2 };
const char* ReplicaStateName(ReplicaState s);  // "whole", "joining", "dead"

class ReplicaSet {
 public:
  // Where the reconnect thread dials a dead replica, and the connection it hands back.
  struct Target {
    int shard = -1;
    std::string address, name, expect_job;
    int expect_task = -1;
  };
  struct Dialed {
    int shard = -1;
    int fd = -1;       // the request connection, after HELLO (non-blocking)
    int hb_fd = -1;    // the heartbeat connection, or -1
    int64_t incarnation = 0;
  };
  // Connects and greets a target within about 1 s; called on the reconnect thread.
  using DialFn = std::function<Status(const Target&, Dialed*)>;

  // One request a logical call expands to, or one of a joining replica's checks.
  struct Leg {
    size_t call;       // the logical call's index; kCheck for a joining replica's check
    int group;
    size_t member;     // index in the group's members
    bool whole;        // the member was whole when the leg was planned
    Call c;
  };
  static constexpr size_t kCheck = static_cast<size_t>(-1);
  // One round of a batch: the requests to send (the caller's unreplicated calls in place,
  // then the legs) and the legs (stable addresses: a deque).
  struct Plan {
    std::vector<Call*> batch;
    std::deque<Leg> legs;
  };

  explicit ReplicaSet(DialFn dial) : dial_(std::move(dial)) {}
  ~ReplicaSet() { Stop(); }
  ReplicaSet(const ReplicaSet&) = delete;
  ReplicaSet& operator=(const ReplicaSet&) = delete;

  bool empty() const { return groups_.empty(); }
  // Logical shard `shard`'s variables live on `members` (physical shards, preference order,
  // members[0] == shard, distinct), each dialed again at its target (targets[k] for
  // members[k]). InvalidArgument naming the bad value otherwise; FailedPrecondition when the
  // shard already has a group.
  Status SetGroup(int shard, const std::vector<int>& members,
                  const std::vector<Target>& targets);
  // The members of logical shard `shard`'s group, or null when it has none.
  const std::vector<int>* Members(int shard) const;
  void AddVar(int shard, int handle);
  // The physical shard reads of logical shard `shard` go to now (itself when unreplicated).
  int Primary(int shard) const;
  bool Dead(int shard) const;
  // The group's failure once it lost its last whole replica; else OK.
  Status GroupStatus(int shard) const;

  // Plans round 1 of a batch: ids (one shared by a mutation's requests, SEQUENCED) come from
  // *next_id in batch order, so each connection sees increasing ids. links[s]: shard s's
  // connection status (OK: healthy).
  void PlanBatch(std::vector<Call>* calls, const std::vector<RemoteVar>& vars,
                 const std::vector<Status>& links, uint64_t* next_id, Clock::time_point now,
                 Plan* plan);
  // After a round: sets the logical results, marks failed and diverged replicas (those to
  // close are added to *condemn) and plans the next round into *plan. True when there is one.
  bool FinishRound(std::vector<Call>* calls, const std::vector<RemoteVar>& vars,
                   const std::vector<Status>& links, uint64_t* next_id, Clock::time_point now,
                   Plan* plan, std::vector<std::pair<int, std::string>>* condemn);
  // Marks every member whose connection failed (links) as dead.
  void Observe(const std::vector<Status>& links);
  // Connections the reconnect thread made since the last call, for the Client to adopt.
  std::vector<Dialed> TakeDialed();
  // The Client adopted a new connection to `shard` and registered the variables there again
  // (stale: the ps task kept its incarnation): it joins every group it is a member of. st
  // not OK: the new connection failed too; it is dialed again. refused: why a variable could
  // not be registered there (empty: none was refused).
  void Rejoined(int shard, const Status& st, bool stale, int64_t old_incarnation,
                int64_t incarnation, Clock::time_point now, const std::string& refused);

  // (physical shard, state) of every member of a group, by shard.
  std::vector<std::pair<int, ReplicaState>> States() const;
  // Losses of a primary whose groups' reads moved to another whole replica.
  uint64_t failovers() const { return failovers_.load(std::memory_order_relaxed); }
  // Log lines since the last call (replicas lost, rejoined, whole again, groups lost).
  std::vector<std::string> TakeEvents();
  // Stops the reconnect thread (idempotent) and closes the connections it did not hand over.
  void Stop();

 private:
  struct Group {
    int shard = 0;
    std::vector<int> members;
    std::vector<uint8_t> joining;      // per member; meaningless while the member is dead
    std::vector<int> handles;          // the group's variables
    Clock::time_point next_check;      // a joining member's next IS_INITIALIZED check
    Status lost;                       // non-OK: the last whole replica failed
  };

  int GroupOfCall(const Call& c, const std::vector<RemoteVar>& vars) const;
  bool Live(const Group& g, size_t k) const { return !Dead(g.members[k]); }
  bool Whole(const Group& g, size_t k) const { return Live(g, k) && !g.joining[k]; }
  // The member a read of `handle` (-1: any) goes to: the first whole live one (registered
  // there), else the first live one; `after`: only members past it. -1: none.
  int ReadMember(const Group& g, const std::vector<RemoteVar>& vars, int handle,
                 int after) const;
  void MarkDead(int shard, const std::string& why);
  void Want(int shard);  // queues a dial of the shard, starting the thread at the first
  void MarkJoining(Group* g, size_t k, const std::string& why, Clock::time_point now);
  Status LostStatus(const Group& g, int failed, const std::string& why) const;
  void AddLeg(Plan* plan, size_t call, int group, size_t member, bool whole, const Call& c);
  void MergeWrite(std::vector<Call>* calls, size_t i, std::vector<Leg*>& legs,
                  const std::vector<Status>& links,
                  std::vector<std::pair<int, std::string>>* condemn);
  void MergeRead(std::vector<Call>* calls, size_t i, Leg* leg, const std::vector<RemoteVar>& vars,
                 const std::vector<Status>& links, Clock::time_point now, Plan* next);
  void MergeChecks(std::vector<Leg*>& legs, const std::vector<Status>& links,
                   Clock::time_point now);
  void Event(std::string line);
  void ReconnectLoop();

  DialFn dial_;
  std::vector<Group> groups_;
  std::vector<int> group_of_;               // logical shard -> index in groups_, or -1
  std::vector<uint8_t> dead_;               // by physical shard
  std::vector<std::string> why_;            // by physical shard: why it is dead
  std::vector<Target> targets_;             // by physical shard
  std::atomic<uint64_t> failovers_{0};

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Target> want_;                // guarded by mu_: dead replicas to dial
  std::vector<Dialed> dialed_;              // guarded by mu_: dialed, not yet adopted
  std::vector<std::string> events_;         // guarded by mu_
  bool stop_ = false;                       // guarded by mu_
  std::thread thread_;                      // started at the first loss
};

}  // namespace psrt
