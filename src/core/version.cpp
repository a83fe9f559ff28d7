// comm's version and what each transport recorded about its library.

#include <comm/transport.hpp>
#include <comm/version.hpp>

#include <map>
#include <mutex>

#ifndef COMM_VERSION_STRING
#error "COMM_VERSION_STRING must be defined by the build (the CMake project version)"
#endif

namespace comm {
namespace {

struct Libraries {
  std::mutex mu;
  std::map<std::string, TransportLibrary, std::less<>> by_transport;
};

Libraries& libraries() {
  static Libraries l;
  return l;
}

}  // namespace

std::string_view version() noexcept { return COMM_VERSION_STRING; }

void register_transport_library(TransportLibrary library) {
  auto& l = libraries();
  std::lock_guard lk(l.mu);
  std::string name = library.transport;
  l.by_transport[std::move(name)] = std::move(library);
}

std::vector<TransportLibrary> transport_libraries() {
  // Registers the built-in transports and loads the plugins, which record
  // their libraries as they register.
  const std::vector<std::string> names = available_transports();
  auto& l = libraries();
  std::lock_guard lk(l.mu);
  std::vector<TransportLibrary> out;
  for (const auto& n : names) {
    const auto it = l.by_transport.find(n);
    out.push_back(it != l.by_transport.end() ? it->second : TransportLibrary{n, {}, {}, {}});
  }
  return out;
}

}  // namespace comm
