// pybind11 bindings: the assembly of psrt._core. The bindings files are the only ones that
// know Python: this one, which names the module, sets its constants and calls one Register*
// per bound part (py_register.h), and py_*.cc. Arguments are converted and checked with the
// GIL held; every blocking or long core call then runs with the GIL released (safe because
// the core keeps no Python object and no numpy pointer past the call, and the arrays stay
// referenced by the caller's frame for the call's duration). A non-OK Status becomes the
// psrt.errors class of its code (py_convert.h).
#include "py_convert.h"
#include "py_register.h"
#include "store.h"
#include "wire.h"

PYBIND11_MODULE(_core, m) {
  using namespace psrt;
  m.doc() = "psrt's C++ core: wire protocol, TCP transport, variable store, fused kernels.";
  m.attr("WIRE_VERSION") = kWireVersion;
  m.attr("HEADER_SIZE") = kHeaderSize;
  m.attr("DEFAULT_MAX_PAYLOAD") = kDefaultMaxPayload;
  m.attr("OPTIMIZER_STATE_SLOT") = kOptimizerStateSlot;

  RegisterAuth(m);
  RegisterKernels(m);
  RegisterServer(m);
  RegisterClient(m);
}
