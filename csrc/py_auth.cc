// psrt._core's digests (the core's own SHA-256 and HMAC-SHA256, auth.h), bound so tests can
// check them against hashlib and hmac.
#include <string>

#include "auth.h"
#include "py_convert.h"
#include "py_register.h"

namespace psrt {

void RegisterAuth(py::module_& m) {
  m.def("sha256", [](const py::bytes& data) {
    const std::string d = data;
    const Digest h = Sha256(d.data(), d.size());
    return py::bytes(reinterpret_cast<const char*>(h.data()), h.size());
  }, py::arg("data"));
  m.def("hmac_sha256", [](const py::bytes& key, const py::bytes& msg) {
    const std::string m = msg;
    const Digest h = HmacSha256(key, m.data(), m.size());
    return py::bytes(reinterpret_cast<const char*>(h.data()), h.size());
  }, py::arg("key"), py::arg("msg"));
}

}  // namespace psrt
