#pragma once
// The nanobind module comm._comm: bindings of the public C++ API (comm/comm.hpp)
// that the pure-Python layer in comm/__init__.py builds the user-facing API on.

#include <nanobind/nanobind.h>

namespace comm::python {

// Enums, comm.Error's translation, Config (module.cpp).
void bind_values(nanobind::module_& m);
// Communicator and Work over arrays with the buffer protocol or DLPack (communicator.cpp).
void bind_communicator(nanobind::module_& m);

}  // namespace comm::python
