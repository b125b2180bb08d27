// Table ops on a hash table (spec.table): TABLE_EXPORT (a page of rows), TABLE_IMPORT,
// TABLE_EVICT, and the row-sparse PULL that creates missing rows.
#include <algorithm>
#include <string>

#include "connection.h"
#include "handlers.h"
#include "server_impl.h"

namespace psrt {

bool PullTableRows(ServerImpl& s, Connection* conn, const Header& h, Variable* var,
                   const int64_t* ids) {
  Status st = RowReplyBuffer(s, conn, h, var, var->table->row_bytes());
  if (st.ok()) st = s.store.GatherRows(var, ids, h.count, h.slot, conn->out.data());
  if (!st.ok()) return conn->Reply(h, st, 0, 0, var->id);
  return conn->Reply(h, st, 0, 0, var->id, conn->out.data(), conn->out.size());
}

bool HandleTableExport(ServerImpl& s, Connection* conn, const Request& r) {
  const Header& h = r.h;
  Variable* var = r.var;
  const size_t record = var->table->record_bytes();
  const size_t page = static_cast<size_t>(
      std::max<uint64_t>(1, std::min<uint64_t>(h.count, s.options.max_payload / record)));
  size_t n = 0;
  int64_t next = -1;
  Status st = s.store.TableExport(var, h.step < 0 ? 0 : static_cast<uint64_t>(h.step), page,
                                  &conn->out, &n, &next);
  if (!st.ok()) return conn->Reply(h, st, 0, 0, var->id);
  return conn->Reply(h, st, next, 0, var->id, conn->out.data(), conn->out.size(),
                     static_cast<uint32_t>(n));
}

bool HandleTableImport(ServerImpl& s, Connection* conn, const Request& r) {
  const Header& h = r.h;
  Status st = s.store.TableImport(r.var, r.p, h.count, (h.flags & kFlagInit) != 0);
  if (st.ok()) s.sync.ModelWritten(&conn->sync);
  return conn->Reply(h, st, 0, 0, r.var->id);
}

bool HandleTableEvict(ServerImpl& s, Connection* conn, const Request& r) {
  const Header& h = r.h;
  Variable* var = r.var;
  size_t evicted = 0;
  Status st = s.store.TableEvict(var, static_cast<uint64_t>(h.arg0),
                                 static_cast<uint64_t>(h.arg1), &evicted);
  return conn->Reply(h, st, st.ok() ? static_cast<int64_t>(var->table->rows()) : 0, 0,
                     var->id, nullptr, 0, static_cast<uint32_t>(evicted));
}

}  // namespace psrt
