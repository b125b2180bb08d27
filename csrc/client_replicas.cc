// Client: its replica groups (replica_set.h). SetReplicas, Run with groups (rounds of
// planned requests: every live replica written, the primary read, a read passed over sent
// again), and the adoption of the connections the reconnect thread made: the variables this
// Client placed on the replica are registered there again, always STALE (it missed this
// Client's updates while unreachable, and a restarted task may have copied before this Client
// came back), before it is written.
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "client.h"
#include "net.h"

namespace psrt {

Status Client::SetReplicas(int shard, const std::vector<int>& replicas) {
  std::vector<ReplicaSet::Target> targets;
  for (int m : replicas) {
    if (m < 0 || m >= num_shards() || !conns_[m])
      return InvalidArgument("set_replicas(" + std::to_string(shard) + ", ...): shard " +
                             std::to_string(m) + " is not connected");
    targets.push_back(TargetOf(m));
  }
  for (const RemoteVar& v : vars_)
    if (v.shard == shard)
      return FailedPrecondition("set_replicas(" + std::to_string(shard) + ", ...): variable '" +
                                v.spec.name + "' of that shard is registered already; declare "
                                "a shard's replicas before registering its variables");
  return replicas_.SetGroup(shard, replicas, targets);
}

std::vector<Status> Client::Links() {
  std::vector<Status> out(conns_.size());
  for (size_t s = 0; s < conns_.size(); ++s) {
    if (!conns_[s]) {
      out[s] = FailedPrecondition("not connected to /job:ps/task:" + std::to_string(s));
      continue;
    }
    if (ConnError(static_cast<int>(s)).ok()) {
      Status verdict = HeartbeatVerdict(static_cast<int>(s));
      if (!verdict.ok()) FailConn(static_cast<int>(s), verdict);
    }
    out[s] = ConnError(static_cast<int>(s));
  }
  return out;
}

Status Client::RunReplicated(std::vector<Call>* calls, double timeout_s) {
  Adopt(timeout_s);
  ReplicaSet::Plan plan;
  replicas_.PlanBatch(calls, vars_, Links(), &next_request_id_, Clock::now(), &plan);
  std::vector<std::pair<int, std::string>> condemn;
  for (;;) {
    RunBatch(plan.batch, timeout_s);
    condemn.clear();
    const bool again = replicas_.FinishRound(calls, vars_, Links(), &next_request_id_,
                                             Clock::now(), &plan, &condemn);
    for (const auto& [shard, why] : condemn) FailConn(shard, Unavailable(why));
    if (!again) break;
  }
  for (Call& c : *calls) FinishAwaiting(&c);
  for (const Call& c : *calls)
    if (!c.status.ok()) return c.status;
  return Status::Ok();
}

Status Client::Redial(const ReplicaSet::Target& t, ReplicaSet::Dialed* out) {
  return Dial(t.address, t.name, 1.0, false, t.expect_job, t.expect_task, out);
}

void Client::Adopt(double timeout_s) {
  for (const ReplicaSet::Dialed& d : replicas_.TakeDialed()) {
    int64_t old_incarnation = 0;
    const bool stale = Replace(d, &old_incarnation);
    // Every variable placed there, once per name, from its stored spec, without INIT.
    std::unordered_map<std::string, size_t> index;
    std::vector<const RemoteVar*> specs;
    for (const RemoteVar& v : vars_)
      for (const ReplicaVar& r : v.replicas)
        if (r.shard == d.shard && index.emplace(v.spec.name, specs.size()).second)
          specs.push_back(&v);
    std::vector<Writer> bodies(specs.size());
    std::vector<Call> regs(specs.size());
    std::vector<Call*> batch;
    for (size_t i = 0; i < specs.size(); ++i) {
      specs[i]->spec.Encode(&bodies[i]);
      Call& c = regs[i];
      c.op = Op::kRegister;
      c.shard = d.shard;
      c.dtype = specs[i]->spec.dtype;
      // STALE whether or not the task restarted: the copy a restarted task took may already
      // be in, taken before this Client came back, and so lack the updates this Client sent
      // only to the other replica meanwhile; STALE has it copied again (a fresh variable
      // awaits its copy anyway).
      c.flags2 = kFlag2Stale;
      c.send[0] = bodies[i].buffer().data();
      c.send_len[0] = bodies[i].buffer().size();
      batch.push_back(&c);
    }
    RunBatch(batch, timeout_s);
    // A ps task with replication off refuses STALE (no copy would come): registered plainly
    // there, as a fresh process's variables.
    batch.clear();
    for (Call& c : regs) {
      if (c.status.code() != Code::kFailedPrecondition || !ConnError(d.shard).ok()) continue;
      c.flags2 = 0;
      batch.push_back(&c);
    }
    if (!batch.empty()) RunBatch(batch, timeout_s);
    std::string refused;
    for (RemoteVar& v : vars_) {
      for (ReplicaVar& r : v.replicas) {
        if (r.shard != d.shard) continue;
        const Call& c = regs[index[v.spec.name]];
        r.registered = c.status.ok();
        r.id = c.status.ok() ? c.var_id_out : 0;
      }
    }
    for (const Call& c : regs)
      if (!c.status.ok() && ConnError(d.shard).ok() && refused.empty()) refused = c.status.message();
    // A refused variable (registered there as another one, say) keeps the replica joining.
    replicas_.Rejoined(d.shard, ConnError(d.shard), stale, old_incarnation, d.incarnation,
                       Clock::now(), refused);
  }
}

}  // namespace psrt
