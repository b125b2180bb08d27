#include "replica_set.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <system_error>

#include "net.h"

namespace psrt {

namespace {

constexpr auto kCheckInterval = std::chrono::seconds(1);       // a joining replica's check
constexpr auto kReconnectInterval = std::chrono::milliseconds(500);

// The ops that change a ps task's state: sent to every live replica.
bool IsWrite(const Call& c) {
  switch (c.op) {
    case Op::kRegister:
    case Op::kPush:
    case Op::kAssign:
    case Op::kAssignAdd:
    case Op::kStepIncrement:
    case Op::kTableImport:
    case Op::kTableEvict:
      return true;
    default:
      return false;
  }
}

// A REGISTER without INIT changes nothing a copy holds: not sequenced (docs/protocol.md).
bool IsSequenced(const Call& c) {
  return IsWrite(c) && (c.op != Op::kRegister || (c.flags & kFlagInit) != 0);
}

// "/job:ps/task:1 at host:port" -> "/job:ps/task:1".
std::string TaskOf(const std::string& name) { return name.substr(0, name.find(" at ")); }

void ResetResults(Call* c) {
  c->status = Status(Code::kUnknown, "not run");
  c->step_out = 0;
  c->flags_out = 0;
  c->flags2_out = 0;
  c->var_id_out = 0;
  c->count_out = 0;
  c->recv_vec.clear();
}

// The logical call takes a replica's reply. A reply that landed in a scratch buffer (a
// replica other than the one given the caller's memory) is copied there.
void TakeResults(Call* dst, Call* src) {
  dst->status = src->status;
  dst->step_out = src->step_out;
  dst->flags_out = src->flags_out;
  dst->flags2_out = src->flags2_out;
  dst->var_id_out = src->var_id_out;
  dst->count_out = src->count_out;
  if (dst->recv == nullptr) {
    dst->recv_vec = std::move(src->recv_vec);
  } else if (src->recv == nullptr && src->status.ok() && !src->recv_vec.empty()) {
    if (src->recv_vec.size() != dst->recv_len)
      dst->status = Internal("a replica's reply carries " + std::to_string(src->recv_vec.size()) +
                             " bytes; expected " + std::to_string(dst->recv_len));
    else
      std::memcpy(dst->recv, src->recv_vec.data(), dst->recv_len);
  }
}

}  // namespace

const char* ReplicaStateName(ReplicaState s) {
  switch (s) {
    case ReplicaState::kWhole: return "whole";
    case ReplicaState::kJoining: return "joining";
    default: return "dead";
  }
}

Status ReplicaSet::SetGroup(int shard, const std::vector<int>& members,
                            const std::vector<Target>& targets) {
  auto known = [&](size_t i) { return i < targets.size() && targets[i].shard == members[i]; };
  std::string list;
  for (int m : members) list += (list.empty() ? "" : ", ") + std::to_string(m);
  if (members.size() < 2 || members[0] != shard)
    return InvalidArgument("set_replicas(" + std::to_string(shard) + ", [" + list +
                           "]): the replicas must start with the shard itself and name at "
                           "least one other");
  for (size_t i = 0; i < members.size(); ++i) {
    if (!known(i))
      return InvalidArgument("set_replicas(" + std::to_string(shard) + ", [" + list +
                             "]): shard " + std::to_string(members[i]) + " is not connected");
    for (size_t j = 0; j < i; ++j)
      if (members[j] == members[i])
        return InvalidArgument("set_replicas(" + std::to_string(shard) + ", [" + list +
                               "]): shard " + std::to_string(members[i]) + " appears twice");
  }
  if (Members(shard) != nullptr)
    return FailedPrecondition("set_replicas: shard " + std::to_string(shard) +
                              " already has its replicas");
  for (const Target& t : targets) {
    const size_t n = static_cast<size_t>(t.shard) + 1;
    if (targets_.size() < n) {
      targets_.resize(n);
      dead_.resize(n, 0);
      why_.resize(n);
    }
    targets_[t.shard] = t;
  }
  if (group_of_.size() <= static_cast<size_t>(shard)) group_of_.resize(shard + 1, -1);
  Group g;
  g.shard = shard;
  g.members = members;
  g.joining.assign(members.size(), 0);
  g.next_check = Clock::now();
  group_of_[shard] = static_cast<int>(groups_.size());
  groups_.push_back(std::move(g));
  return Status::Ok();
}

const std::vector<int>* ReplicaSet::Members(int shard) const {
  if (shard < 0 || static_cast<size_t>(shard) >= group_of_.size() || group_of_[shard] < 0)
    return nullptr;
  return &groups_[group_of_[shard]].members;
}

void ReplicaSet::AddVar(int shard, int handle) {
  if (Members(shard) != nullptr) groups_[group_of_[shard]].handles.push_back(handle);
}

bool ReplicaSet::Dead(int shard) const {
  return shard >= 0 && static_cast<size_t>(shard) < dead_.size() && dead_[shard] != 0;
}

int ReplicaSet::Primary(int shard) const {
  if (Members(shard) == nullptr) return shard;
  const Group& g = groups_[group_of_[shard]];
  for (size_t k = 0; k < g.members.size(); ++k)
    if (Whole(g, k)) return g.members[k];
  for (size_t k = 0; k < g.members.size(); ++k)
    if (Live(g, k)) return g.members[k];
  return -1;
}

Status ReplicaSet::GroupStatus(int shard) const {
  return Members(shard) == nullptr ? Status::Ok() : groups_[group_of_[shard]].lost;
}

int ReplicaSet::GroupOfCall(const Call& c, const std::vector<RemoteVar>& vars) const {
  int shard = c.shard;
  if (c.handle >= 0) {
    const RemoteVar& v = vars[c.handle];
    if (v.replicas.empty()) return -1;
    shard = v.shard;
  } else if (c.op != Op::kRegister) {
    return -1;  // an op of one ps task (LIST, PING, WORKER_DONE, ...) goes where it says
  }
  return Members(shard) == nullptr ? -1 : group_of_[shard];
}

int ReplicaSet::ReadMember(const Group& g, const std::vector<RemoteVar>& vars, int handle,
                           int after) const {
  auto registered = [&](size_t k) { return handle < 0 || vars[handle].replicas[k].registered; };
  for (size_t k = 0; k < g.members.size(); ++k)
    if (Whole(g, k) && registered(k)) return static_cast<int>(k);
  if (after >= 0) return -1;  // a read passed over goes to a whole replica only
  for (size_t k = 0; k < g.members.size(); ++k)
    if (Live(g, k) && registered(k)) return static_cast<int>(k);
  return -1;
}

void ReplicaSet::AddLeg(Plan* plan, size_t call, int group, size_t member, bool whole,
                        const Call& c) {
  plan->legs.push_back(Leg{call, group, member, whole, c});
  Leg& leg = plan->legs.back();
  leg.c.shard = groups_[group].members[member];
  ResetResults(&leg.c);
  plan->batch.push_back(&leg.c);  // deque: earlier legs keep their addresses
}

void ReplicaSet::PlanBatch(std::vector<Call>* calls, const std::vector<RemoteVar>& vars,
                           const std::vector<Status>& links, uint64_t* next_id,
                           Clock::time_point now, Plan* plan) {
  Observe(links);
  plan->batch.clear();
  plan->legs.clear();
  for (size_t i = 0; i < calls->size(); ++i) {
    Call& c = (*calls)[i];
    const int gi = GroupOfCall(c, vars);
    if (gi < 0) {
      c.request_id = (*next_id)++;
      plan->batch.push_back(&c);
      continue;
    }
    const Group& g = groups_[gi];
    if (!g.lost.ok()) {
      c.status = g.lost;
      continue;
    }
    const RemoteVar* v = c.handle >= 0 ? &vars[c.handle] : nullptr;
    auto on = [&](size_t k) { return Live(g, k) && (v == nullptr || v->replicas[k].registered); };
    if (IsWrite(c)) {
      // Every live replica, one id; the first whole one (none: the first) writes into the
      // caller's memory, the others into scratch buffers.
      const uint64_t id = (*next_id)++;
      bool any_whole = false;
      for (size_t k = 0; k < g.members.size(); ++k) any_whole |= on(k) && Whole(g, k);
      bool given = false;
      const size_t before = plan->legs.size();
      for (size_t k = 0; k < g.members.size(); ++k) {
        if (!on(k)) continue;
        Call leg = c;
        if (v != nullptr) leg.var_id = v->replicas[k].id;
        leg.request_id = id;
        if (IsSequenced(c)) leg.flags2 |= kFlag2Sequenced;
        const bool source = !given && (Whole(g, k) || !any_whole);
        if (!source) leg.recv = nullptr;
        given |= source;
        AddLeg(plan, i, gi, k, Whole(g, k), leg);
      }
      if (plan->legs.size() == before) c.status = LostStatus(g, -1, "");
    } else {
      const int k = ReadMember(g, vars, c.handle, -1);
      if (k < 0) {
        c.status = LostStatus(g, -1, "");
        continue;
      }
      Call leg = c;
      if (v != nullptr) leg.var_id = v->replicas[k].id;
      leg.request_id = (*next_id)++;
      AddLeg(plan, i, gi, static_cast<size_t>(k), Whole(g, k), leg);
    }
  }
  // A joining replica's check, every second: IS_INITIALIZED of every variable of the group
  // (each once), once all of them are registered there again.
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    Group& g = groups_[gi];
    if (!g.lost.ok() || now < g.next_check) continue;
    for (size_t k = 0; k < g.members.size(); ++k) {
      if (!Live(g, k) || !g.joining[k]) continue;
      std::vector<uint32_t> ids;
      bool all = true;
      for (int h : g.handles) {
        const ReplicaVar& r = vars[h].replicas[k];
        all &= r.registered;
        if (!all) break;
        if (std::find(ids.begin(), ids.end(), r.id) != ids.end()) continue;
        ids.push_back(r.id);
        Call chk;
        chk.op = Op::kIsInitialized;
        chk.handle = h;
        chk.var_id = r.id;
        chk.dtype = vars[h].spec.dtype;
        chk.request_id = (*next_id)++;
        AddLeg(plan, kCheck, static_cast<int>(gi), k, false, chk);
      }
      if (!all) {  // not registered there yet: no check; drop the ones planned
        while (!plan->legs.empty() && plan->legs.back().call == kCheck &&
               plan->legs.back().group == static_cast<int>(gi) && plan->legs.back().member == k) {
          plan->legs.pop_back();
          plan->batch.pop_back();
        }
      } else if (ids.empty()) {
        g.joining[k] = 0;  // no variables: nothing to copy
      }
    }
    g.next_check = now + kCheckInterval;
  }
}

bool ReplicaSet::FinishRound(std::vector<Call>* calls, const std::vector<RemoteVar>& vars,
                             const std::vector<Status>& links, uint64_t* next_id,
                             Clock::time_point now, Plan* plan,
                             std::vector<std::pair<int, std::string>>* condemn) {
  Observe(links);
  Plan next;
  std::vector<Leg*> checks, same;
  for (size_t j = 0; j < plan->legs.size();) {
    Leg& leg = plan->legs[j];
    if (leg.call == kCheck) {
      checks.push_back(&leg);
      ++j;
      continue;
    }
    same.clear();
    size_t e = j;
    while (e < plan->legs.size() && plan->legs[e].call == leg.call) same.push_back(&plan->legs[e++]);
    if (IsWrite(leg.c)) {
      MergeWrite(calls, leg.call, same, links, condemn);
    } else {
      MergeRead(calls, leg.call, &leg, vars, links, now, &next);
    }
    j = e;
  }
  MergeChecks(checks, links, now);
  for (Leg& l : next.legs) l.c.request_id = (*next_id)++;
  *plan = std::move(next);
  plan->batch.clear();
  for (Leg& l : plan->legs) plan->batch.push_back(&l.c);
  return !plan->legs.empty();
}

void ReplicaSet::MergeWrite(std::vector<Call>* calls, size_t i, std::vector<Leg*>& legs,
                            const std::vector<Status>& links,
                            std::vector<std::pair<int, std::string>>* condemn) {
  Call& c = (*calls)[i];
  const Group& g = groups_[legs[0]->group];
  auto up = [&](const Leg* l) { return links[l->c.shard].ok(); };
  Leg* src = nullptr;
  bool had_whole = false;
  for (Leg* l : legs) {
    had_whole |= l->whole;
    if (src == nullptr && l->whole && up(l)) src = l;
  }
  if (!had_whole)
    for (Leg* l : legs)
      if (src == nullptr && up(l)) src = l;
  if (!g.lost.ok()) {
    c.status = g.lost;  // the last whole replica failed: what the others did cannot count
    return;
  }
  if (src == nullptr) {
    const Leg* last = legs.back();
    c.status = LostStatus(g, last->c.shard, links[last->c.shard].message());
    return;
  }
  for (Leg* l : legs) {
    if (l == src || !up(l)) continue;
    if (c.op == Op::kRegister && l->c.status.ok()) c.replica_ids.push_back({l->c.shard, l->c.var_id_out});
    if (!l->whole || l->c.status.code() == src->c.status.code()) continue;
    // A whole replica that did not do what the first one did no longer holds the same copy.
    const std::string why =
        targets_[l->c.shard].name + " answered " +
        (l->c.status.ok() ? std::string("OK") : "'" + l->c.status.message() + "'") +
        " where " + TaskOf(targets_[src->c.shard].name) + " answered " +
        (src->c.status.ok() ? std::string("OK") : "'" + src->c.status.message() + "'") +
        ": its copy diverged; it is dropped and copied again";
    MarkDead(l->c.shard, why);
    condemn->push_back({l->c.shard, why});
  }
  if (c.op == Op::kRegister && src->c.status.ok())
    c.replica_ids.insert(c.replica_ids.begin(), {src->c.shard, src->c.var_id_out});
  TakeResults(&c, &src->c);
}

void ReplicaSet::MergeRead(std::vector<Call>* calls, size_t i, Leg* leg,
                           const std::vector<RemoteVar>& vars, const std::vector<Status>& links,
                           Clock::time_point now, Plan* next) {
  Call& c = (*calls)[i];
  Group& g = groups_[leg->group];
  const int shard = leg->c.shard;
  const bool failed = !links[shard].ok();
  const bool awaiting =
      !failed && leg->c.status.ok() && (leg->c.flags2_out & kFlag2Awaiting) != 0;
  if (failed || (awaiting && leg->whole)) {
    if (awaiting)
      MarkJoining(&g, leg->member,
                  c.handle >= 0 ? "'" + vars[c.handle].spec.name + "'" : "a variable", now);
    if (!g.lost.ok()) {
      c.status = g.lost;
      return;
    }
    const int alt = ReadMember(g, vars, c.handle, static_cast<int>(leg->member));
    if (alt >= 0) {  // the same read, to the next whole replica, in the next round
      Call again = leg->c;
      if (c.handle >= 0) again.var_id = vars[c.handle].replicas[alt].id;
      AddLeg(next, i, leg->group, static_cast<size_t>(alt), true, again);
      return;
    }
    if (failed) {
      c.status = leg->c.status;
      return;
    }
    // AWAITING everywhere (a model no one initialized yet): the reply stands.
  }
  TakeResults(&c, &leg->c);
}

void ReplicaSet::MergeChecks(std::vector<Leg*>& legs, const std::vector<Status>& links,
                             Clock::time_point now) {
  for (size_t j = 0; j < legs.size();) {
    const int gi = legs[j]->group;
    const size_t k = legs[j]->member;
    bool whole = true;
    size_t e = j;
    for (; e < legs.size() && legs[e]->group == gi && legs[e]->member == k; ++e) {
      const Call& r = legs[e]->c;
      whole &= links[r.shard].ok() && r.status.ok() && (r.flags_out & kFlagInitialized) &&
               !(r.flags2_out & kFlag2Awaiting);
    }
    Group& g = groups_[gi];
    if (whole && Live(g, k) && g.joining[k]) {
      g.joining[k] = 0;
      bool first = true;
      for (size_t m = 0; m < k; ++m) first &= !Whole(g, m);
      Event("I" + targets_[g.members[k]].name + " holds a whole copy of " +
            TaskOf(targets_[g.shard].name) + "'s variables again" +
            (first ? "; their reads go to it again" : ""));
    } else if (!whole) {
      g.next_check = now + kCheckInterval;
    }
    j = e;
  }
}

void ReplicaSet::Observe(const std::vector<Status>& links) {
  for (size_t s = 0; s < targets_.size() && s < links.size(); ++s)
    if (targets_[s].shard == static_cast<int>(s) && !dead_[s] && !links[s].ok())
      MarkDead(static_cast<int>(s), links[s].message());
}

void ReplicaSet::MarkDead(int shard, const std::string& why) {
  if (Dead(shard)) return;
  std::vector<int> primary_of;  // the groups whose reads went to it
  for (size_t gi = 0; gi < groups_.size(); ++gi)
    if (groups_[gi].lost.ok() && Primary(groups_[gi].shard) == shard)
      primary_of.push_back(static_cast<int>(gi));
  dead_[shard] = 1;
  why_[shard] = why;
  std::string moved;
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    Group& g = groups_[gi];
    if (!g.lost.ok()) continue;
    for (size_t k = 0; k < g.members.size(); ++k) {
      if (g.members[k] != shard || g.joining[k]) continue;
      int alt = -1;
      for (size_t m = 0; m < g.members.size() && alt < 0; ++m)
        if (Whole(g, m)) alt = g.members[m];
      if (alt >= 0) {
        if (std::find(primary_of.begin(), primary_of.end(), static_cast<int>(gi)) ==
            primary_of.end())
          continue;  // it was a backup there: the reads stay where they were
        moved += std::string(moved.empty() ? "" : "; ") + "the reads of " +
                 TaskOf(targets_[g.shard].name) + "'s variables go to " + TaskOf(targets_[alt].name);
      } else {
        g.lost = LostStatus(g, shard, why);
        Event("W" + g.lost.message());
      }
    }
  }
  if (!moved.empty()) failovers_.fetch_add(1, std::memory_order_relaxed);
  Event("W" + std::string("lost ") + targets_[shard].name + " (" + why + ")" +
        (moved.empty() ? "" : "; " + moved + ", their updates to the live replicas") +
        "; reconnecting every 0.5 s");
  Want(shard);
}

void ReplicaSet::Want(int shard) {
  std::lock_guard<std::mutex> l(mu_);
  if (stop_) return;
  bool queued = false;
  for (const Target& t : want_) queued |= t.shard == shard;
  if (!queued) want_.push_back(targets_[shard]);
  if (!thread_.joinable()) {
    try {
      thread_ = std::thread([this] { ReconnectLoop(); });
    } catch (const std::system_error& e) {
      events_.push_back(std::string("Wcannot start the reconnect thread: ") + e.what());
    }
  }
  cv_.notify_all();
}

void ReplicaSet::MarkJoining(Group* g, size_t k, const std::string& what,
                             Clock::time_point now) {
  g->joining[k] = 1;
  g->next_check = now + kCheckInterval;
  Event("I" + targets_[g->members[k]].name + " holds no copy of " + what +
        " yet (it awaits one): it is written, not read, until it holds a whole copy of " +
        TaskOf(targets_[g->shard].name) + "'s variables");
}

Status ReplicaSet::LostStatus(const Group& g, int failed, const std::string& why) const {
  const std::string of = TaskOf(targets_[g.shard].name) + "'s variables";
  std::string live, dead;
  for (size_t k = 0; k < g.members.size(); ++k) {
    const int s = g.members[k];
    if (s == failed) continue;
    if (Live(g, k)) live = targets_[s].name;
    else dead += "; " + targets_[s].name + ": " + why_[s];
  }
  if (failed >= 0 && !live.empty())
    return Unavailable("lost " + targets_[failed].name + " (" + why + "), the last whole "
                       "replica of " + of + "; " + live + " holds the only copy and it is "
                       "still copying from " + TaskOf(targets_[failed].name) +
                       "; falling back to the checkpoint");
  std::string all = failed >= 0 ? "; " + targets_[failed].name + ": " + why : "";
  return Unavailable("lost every replica of " + of + all + dead +
                     "; falling back to the checkpoint");
}

void ReplicaSet::Rejoined(int shard, const Status& st, bool stale, int64_t old_incarnation,
                          int64_t incarnation, Clock::time_point now,
                          const std::string& refused) {
  if (!Dead(shard)) return;
  if (!st.ok()) {
    why_[shard] = st.message();
    Want(shard);
    return;
  }
  dead_[shard] = 0;
  why_[shard].clear();
  std::string of;
  for (Group& g : groups_) {
    for (size_t k = 0; k < g.members.size(); ++k) {
      if (g.members[k] != shard) continue;
      g.joining[k] = 1;
      g.next_check = now + kCheckInterval;
      of += std::string(of.empty() ? "" : " and ") + TaskOf(targets_[g.shard].name) + "'s";
    }
  }
  Event("I" + std::string("reconnected to ") + targets_[shard].name + " (" +
        (stale ? std::string("same incarnation")
               : "restarted: incarnation " + std::to_string(old_incarnation) + " -> " +
                     std::to_string(incarnation)) +
        "; it missed this worker's updates, so its variables were registered as stale" +
        "); it holds " + of + " variables again once copied (written, not read, until then)");
  if (!refused.empty())
    Event("W" + targets_[shard].name + " refused a variable this worker registered there "
          "again (" + refused + "): it stays a joining replica, never read");
}

std::vector<std::pair<int, ReplicaState>> ReplicaSet::States() const {
  std::vector<std::pair<int, ReplicaState>> out;
  for (size_t s = 0; s < targets_.size(); ++s) {
    bool member = false, joining = false;
    for (const Group& g : groups_)
      for (size_t k = 0; k < g.members.size(); ++k)
        if (g.members[k] == static_cast<int>(s)) {
          member = true;
          joining |= g.joining[k] != 0;
        }
    if (!member) continue;
    out.emplace_back(static_cast<int>(s), dead_[s] ? ReplicaState::kDead
                                          : joining ? ReplicaState::kJoining
                                                    : ReplicaState::kWhole);
  }
  return out;
}

void ReplicaSet::Event(std::string line) {
  std::lock_guard<std::mutex> l(mu_);
  if (events_.size() < 1000) events_.push_back(std::move(line));
}

std::vector<std::string> ReplicaSet::TakeEvents() {
  std::lock_guard<std::mutex> l(mu_);
  std::vector<std::string> out;
  out.swap(events_);
  return out;
}

std::vector<ReplicaSet::Dialed> ReplicaSet::TakeDialed() {
  std::lock_guard<std::mutex> l(mu_);
  std::vector<Dialed> out;
  out.swap(dialed_);
  return out;
}

void ReplicaSet::ReconnectLoop() {
  std::unique_lock<std::mutex> l(mu_);
  while (!stop_) {
    cv_.wait_for(l, kReconnectInterval, [&] { return stop_; });
    if (stop_) break;
    const std::vector<Target> want = want_;
    l.unlock();
    std::vector<Dialed> got;
    for (const Target& t : want) {
      Dialed d;
      d.shard = t.shard;
      if (dial_(t, &d).ok()) got.push_back(d);
    }
    l.lock();
    for (const Dialed& d : got) {
      auto it = std::find_if(want_.begin(), want_.end(),
                             [&](const Target& t) { return t.shard == d.shard; });
      if (stop_ || it == want_.end()) {
        CloseFd(d.fd);
        CloseFd(d.hb_fd);
        continue;
      }
      want_.erase(it);
      dialed_.push_back(d);
    }
  }
}

void ReplicaSet::Stop() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  std::lock_guard<std::mutex> l(mu_);
  for (const Dialed& d : dialed_) {
    CloseFd(d.fd);
    CloseFd(d.hb_fd);
  }
  dialed_.clear();
}

}  // namespace psrt
