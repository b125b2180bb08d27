// The registration functions bindings.cc calls to assemble psrt._core, one per bound part
// (boost-histogram's module.cpp layout). Each adds its names to m in the order _core.pyi
// lists them.
#pragma once

#include "py_convert.h"

namespace psrt {

void RegisterAuth(py::module_& m);     // py_auth.cc: sha256, hmac_sha256
void RegisterKernels(py::module_& m);  // py_kernels.cc: kernel targets, apply_*, slot_names
void RegisterServer(py::module_& m);   // py_server.cc: Server
void RegisterClient(py::module_& m);   // py_client.cc: Client

}  // namespace psrt
