#pragma once
// Registration functions of the transports compiled into the library. Each is
// defined in transports/<name>/ and called once by the registry.

#include <comm/config.hpp>
#include <comm/store.hpp>

#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace comm {

// Stores a transport provides under a COMM_STORE scheme ("mpi": a TCP store
// whose address MPI broadcasts). make_store() consults them first.
using StoreScheme = std::function<std::shared_ptr<Store>(const Config&)>;
void register_store_scheme(std::string scheme, StoreScheme make);
/// The store config.store names if it is a registered scheme; nullptr if it is
/// none; throws invalid_config for a known scheme this build lacks.
std::shared_ptr<Store> make_scheme_store(const Config& config);
/// The scheme a transport's ranks meet through when no store is configured.
void set_default_store_scheme(std::string transport, std::string scheme);
/// "" when the transport has none.
std::string default_store_scheme(std::string_view transport);

void register_local_transport();
#if COMM_HAVE_SHM
void register_shm_transport();
#endif
void register_auto_transport();
#if COMM_HAVE_UCX
void register_ucx_transport();
#endif
#if COMM_HAVE_OFI
void register_ofi_transport();
#endif
#if COMM_HAVE_GLOO
void register_gloo_transport();
#endif
#if COMM_HAVE_MPI
void register_mpi_transport();
#endif

}  // namespace comm
