// psrt._core.Client: a hash table's rows exported page by page, imported and evicted (the
// checkpoint and eviction paths of psrt's dynamic embedding tables).
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "kernels.h"
#include "py_client.h"
#include "py_convert.h"

namespace psrt {

py::tuple PyClient::table_export(int handle, int64_t cursor, uint32_t max_rows) {
  const RemoteVar& v = Var(handle);
  if (!v.spec.is_table())
    Raise(InvalidArgument("table_export: '" + v.spec.name + "' is not a hash table"));
  Call c = MakeCall(Op::kTableExport, v);
  c.step = cursor;
  c.count = max_rows;
  std::vector<Call> calls;
  calls.push_back(std::move(c));
  Check(RunLocked(&calls));
  const Call& r = calls[0];
  const size_t n = r.count_out;
  const size_t width = static_cast<size_t>(v.spec.RowElements());
  const size_t dsize = DTypeSize(v.spec.dtype);
  const int slots = NumSlots(v.spec.optimizer);
  if (r.recv_vec.size() != n * (16 + width * dsize * (1 + slots)))
    Raise(Status(Code::kDataLoss, "TABLE_EXPORT reply of " + std::to_string(r.recv_vec.size()) +
                                      " bytes does not hold " + std::to_string(n) + " rows"));
  std::vector<int64_t> row_shape = v.spec.shape;
  row_shape[0] = static_cast<int64_t>(n);
  const uint8_t* b = r.recv_vec.data();
  py::array_t<int64_t> ids(static_cast<py::ssize_t>(n)), counts(static_cast<py::ssize_t>(n));
  if (n) {
    std::memcpy(ids.mutable_data(), b, n * 8);
    std::memcpy(counts.mutable_data(), b + n * 8, n * 8);
  }
  b += n * 16;
  auto column = [&]() {
    py::array a(v.spec.dtype == DType::kFloat32 ? py::dtype("float32") : py::dtype("float64"),
                row_shape);
    if (n) std::memcpy(a.mutable_data(), b, n * width * dsize);
    b += n * width * dsize;
    return a;
  };
  py::array values = column();
  py::list slot_arrays;
  for (int k = 0; k < slots; ++k) slot_arrays.append(column());
  return py::make_tuple(ids, counts, values, slot_arrays, r.step_out);
}

void PyClient::table_import(int handle, py::array ids, py::array counts, py::array values,
                            const std::vector<py::array>& slots, bool clear) {
  const RemoteVar& v = Var(handle);
  if (!v.spec.is_table())
    Raise(InvalidArgument("table_import: '" + v.spec.name + "' is not a hash table"));
  if (ArrayDType(ids) != DType::kInt64 || ids.ndim() != 1 || !CContiguous(ids) ||
      ArrayDType(counts) != DType::kInt64 || counts.ndim() != 1 || !CContiguous(counts) ||
      counts.size() != ids.size())
    Raise(InvalidArgument("table_import of '" + v.spec.name + "': ids and counts must be 1-D "
                          "C-contiguous int64 arrays of one length; got " + DTypeStr(ids) +
                          ShapeOf(ids) + " and " + DTypeStr(counts) + ShapeOf(counts)));
  const int num_slots = NumSlots(v.spec.optimizer);
  if (static_cast<int>(slots.size()) != num_slots)
    Raise(InvalidArgument("table_import of '" + v.spec.name + "': " +
                          std::to_string(slots.size()) + " slot arrays; its optimizer " +
                          OptimizerName(v.spec.optimizer) + " keeps " +
                          std::to_string(num_slots)));
  std::vector<int64_t> row_shape = v.spec.shape;
  row_shape[0] = ids.size();
  CheckArray(values, "values", v.spec.name, v.spec.dtype, row_shape, false);
  for (const auto& a : slots) CheckArray(a, "slot values", v.spec.name, v.spec.dtype, row_shape, false);
  // One frame of column blocks (docs/protocol.md, TableRows).
  std::vector<uint8_t> body;
  const size_t n = static_cast<size_t>(ids.size());
  const size_t col = static_cast<size_t>(values.nbytes());
  body.resize(n * 16 + col * (1 + slots.size()));
  uint8_t* w = body.data();
  if (n) {
    std::memcpy(w, ids.data(), n * 8);
    std::memcpy(w + n * 8, counts.data(), n * 8);
    std::memcpy(w + n * 16, values.data(), col);
    for (size_t k = 0; k < slots.size(); ++k)
      std::memcpy(w + n * 16 + col * (1 + k), slots[k].data(), col);
  }
  Call c = MakeCall(Op::kTableImport, v);
  c.count = static_cast<uint32_t>(n);
  if (clear) c.flags |= kFlagInit;
  c.send[0] = body.data();
  c.send_len[0] = body.size();
  std::vector<Call> calls;
  calls.push_back(std::move(c));
  Check(RunLocked(&calls));
}

std::pair<uint32_t, int64_t> PyClient::table_evict(int handle, uint64_t unseen,
                                                   uint64_t min_count) {
  const RemoteVar& v = Var(handle);
  Call c = MakeCall(Op::kTableEvict, v);
  c.arg0 = static_cast<double>(unseen);
  c.arg1 = static_cast<double>(min_count);
  std::vector<Call> calls;
  calls.push_back(std::move(c));
  Check(RunLocked(&calls));
  return {calls[0].count_out, calls[0].step_out};
}

}  // namespace psrt
