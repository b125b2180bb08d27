// The request handlers of a ps task. Dispatch (dispatch.cc) takes one frame whose fixed
// header Connection::Serve has checked: it finds and checks the variable the frame addresses
// and bounds its payload (before reading a byte of it), streams a frame larger than a chunk or
// reads it whole, then calls the op's handler from a table indexed by op code. The handlers
// are grouped by op family, one file each:
//   handlers_session.cc   HELLO, AUTH, CLUSTER_INFO, PING, WORKER_DONE, LIST
//   handlers_variable.cc  REGISTER, PULL, PUSH, ASSIGN, ASSIGN_ADD, IS_INITIALIZED
//   handlers_step.cc      STEP_READ, STEP_INCREMENT
//   handlers_table.cc     TABLE_EXPORT, TABLE_IMPORT, TABLE_EVICT and a table's row PULL
//   handlers_stream.cc    PUSH, ASSIGN and REGISTER frames streamed chunk by chunk
//   handlers_replica.cc   REPLICA_READ, REPLICA_INSTALL and the replication rules (flags2,
//                         sections, awaiting variables, SEQUENCED duplicates) of version 7
//
// Every function here runs on the connection's own thread, answers with conn->Reply and
// returns false when the connection must close (the reply could not be written, or the
// stream cannot be trusted any more).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "status.h"
#include "wire.h"

namespace psrt {

struct Connection;
struct ServerImpl;
struct Variable;
struct VarSpec;
class SharedSection;

// "PULL", "TABLE_EXPORT", ...: an op code's name in messages ("op N" past the last).
std::string OpName(uint8_t op);

// Handles one frame whose fixed header was checked (CheckHeader, HELLO/AUTH order).
bool Dispatch(ServerImpl& s, Connection* conn, const Header& h);

// A request as a handler sees it: checked against its op and variable, payload read whole.
struct Request {
  const Header& h;
  Variable* var;       // the variable it addresses, found and checked; null for ops without
  const uint8_t* p;    // the payload, h.payload_len bytes; never null (an empty one too)
  bool sparse;         // h.flags has kFlagSparse
  bool initialized;    // var was initialized when the payload had arrived
};
using Handler = bool (*)(ServerImpl& s, Connection* conn, const Request& r);

// Session ops (handlers_session.cc).
bool HandleHello(ServerImpl& s, Connection* conn, const Request& r);
bool HandleAuth(ServerImpl& s, Connection* conn, const Request& r);
bool HandleClusterInfo(ServerImpl& s, Connection* conn, const Request& r);
bool HandlePing(ServerImpl& s, Connection* conn, const Request& r);
bool HandleWorkerDone(ServerImpl& s, Connection* conn, const Request& r);
bool HandleList(ServerImpl& s, Connection* conn, const Request& r);

// Variable ops (handlers_variable.cc).
bool HandleRegister(ServerImpl& s, Connection* conn, const Request& r);
bool HandlePull(ServerImpl& s, Connection* conn, const Request& r);
bool HandlePush(ServerImpl& s, Connection* conn, const Request& r);
bool HandleAssign(ServerImpl& s, Connection* conn, const Request& r);
bool HandleAssignAdd(ServerImpl& s, Connection* conn, const Request& r);
bool HandleIsInitialized(ServerImpl& s, Connection* conn, const Request& r);
// Sizes conn->out for the reply of a row PULL of h.count rows of row_bytes each;
// ResourceExhausted past max_payload or memory.
Status RowReplyBuffer(ServerImpl& s, Connection* conn, const Header& h, const Variable* var,
                      size_t row_bytes);

// Step ops (handlers_step.cc).
bool HandleStepRead(ServerImpl& s, Connection* conn, const Request& r);
bool HandleStepIncrement(ServerImpl& s, Connection* conn, const Request& r);

// Table ops (handlers_table.cc).
bool HandleTableExport(ServerImpl& s, Connection* conn, const Request& r);
bool HandleTableImport(ServerImpl& s, Connection* conn, const Request& r);
bool HandleTableEvict(ServerImpl& s, Connection* conn, const Request& r);
// A row-sparse PULL of a hash table (rows created on first use); ids: h.count int64s.
bool PullTableRows(ServerImpl& s, Connection* conn, const Header& h, Variable* var,
                   const int64_t* ids);

// Streamed frames, larger than one chunk (handlers_stream.cc): checked before a byte is
// read, then applied chunk by chunk as they arrive. False also when the peer vanished or
// stalled mid-frame; the chunks applied so far stay applied.
bool StreamPush(ServerImpl& s, Connection* conn, const Header& h, Variable* var);
bool StreamAssign(ServerImpl& s, Connection* conn, const Header& h, Variable* var);
bool StreamRegister(ServerImpl& s, Connection* conn, const Header& h);

// Replication (handlers_replica.cc; replication.h).
// The ops the SEQUENCED flag may mark: REGISTER with INIT, PUSH, ASSIGN, ASSIGN_ADD,
// STEP_INCREMENT, TABLE_IMPORT, TABLE_EVICT.
bool IsMutation(const Header& h);
// A frame's flags2 against its op and connection (the header check allowed the bits).
Status CheckFlags2(ServerImpl& s, const Connection* conn, const Header& h);
// Before a checked frame to var is read (replication on, or flags2 set): a read of an
// awaiting variable is answered AWAITING; a mutation waits for the variable's copy, then enters
// its section (held by *section until the caller drops it); a SEQUENCED duplicate is answered
// DUPLICATE. *done: answered here (the payload discarded); the result is then Dispatch's.
bool ReplicaPrologue(ServerImpl& s, Connection* conn, const Header& h, Variable* var,
                     SharedSection* section, bool* done);
// After the handler: no mark pending; a variable that got a value ends awaiting.
void ReplicaEpilogue(ServerImpl& s, Connection* conn, Variable* var);
// REGISTER on a replicating ps task or with flags2: a new variable without INIT awaits a copy;
// STALE makes an existing one await again; INIT is applied in the section, once.
bool RegisterReplicated(ServerImpl& s, Connection* conn, const Header& h, const VarSpec& spec,
                        const void* init, bool run_init);
bool HandleReplicaRead(ServerImpl& s, Connection* conn, const Request& r);
bool HandleReplicaInstall(ServerImpl& s, Connection* conn, const Request& r);

}  // namespace psrt
