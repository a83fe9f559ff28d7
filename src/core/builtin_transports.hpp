#pragma once
// Registration functions of the transports compiled into the library. Each is
// defined in transports/<name>/ and called once by the registry.

namespace comm {

void register_local_transport();
#if COMM_HAVE_UCX
void register_ucx_transport();
#endif
#if COMM_HAVE_OFI
void register_ofi_transport();
#endif
#if COMM_HAVE_GLOO
void register_gloo_transport();
#endif

}  // namespace comm
