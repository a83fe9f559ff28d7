#pragma once
/// \file version.hpp
/// comm's version and the libraries behind its transports, as `comm-info
/// --version` prints them.

#include <comm/export.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace comm {

/// comm's version, "MAJOR.MINOR.PATCH" (the version of the CMake project and
/// of the Conan package). Never throws; the view is valid for the process.
COMM_API std::string_view version() noexcept;

/// What a transport says about the library it is built on.
struct TransportLibrary {
  std::string transport;  ///< registry name: "ucx", "ofi", "gloo", "nccl", ...
  std::string library;    ///< "UCX", "libfabric", "Gloo", "NCCL", ...
  std::string version;    ///< e.g. "1.13.1"
  std::string source;     ///< how it is known, e.g. "ucp_get_version_string()" or "package version at build time"
};

/// Records `library` for its transport, replacing an earlier record of the
/// same transport. Built-in transports call it when they register; a plugin
/// calls it from comm_plugin_register(). Thread safe; never blocks for long.
COMM_API void register_transport_library(TransportLibrary library);

/// The library of every transport available to this process, sorted by
/// transport name; asking loads the plugins that can be loaded (see
/// available_transports()). A transport that recorded nothing is listed with
/// an empty library and version. Thread safe.
COMM_API std::vector<TransportLibrary> transport_libraries();

}  // namespace comm
