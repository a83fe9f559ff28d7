#pragma once
/// \file mpi.hpp
/// Embedding comm in an MPI program: communicators over an MPI communicator
/// the program already has (MPI_COMM_WORLD, or one from MPI_Comm_split...).
///
/// Only for a comm built with the `mpi` transport (it is in comm_TRANSPORTS;
/// this header is installed only then). Everything here is inline and calls
/// MPI directly: include it where <mpi.h> is available and link your MPI
/// (e.g. MPI::MPI_C) yourself. The core headers never include <mpi.h>.
///
/// Initialisation: MPI must already be initialised (MPI_Init or
/// MPI_Init_thread); comm then never finalises it. Destroy every comm
/// communicator before your MPI_Finalize. Without this header, a program that
/// never initialises MPI itself gets MPI_Init_thread from the first `mpi`
/// communicator and MPI_Finalize at exit.
///
/// Thread level: with MPI_THREAD_MULTIPLE, communicators may be driven from
/// different threads. Below it comm serialises its own MPI calls with a lock,
/// and your program must not call MPI while a comm call runs on another
/// thread; with MPI_THREAD_FUNNELED or SINGLE, use comm from the main thread.
///
/// Errors: comm::Error(invalid_config) if MPI is not initialised or the
/// communicator is MPI_COMM_NULL. Creating the Communicator is collective over
/// `comm` (like MPI_Comm_dup): every process of it must call create().

#include <comm/communicator.hpp>
#include <comm/config.hpp>
#include <comm/error.hpp>

#include <mpi.h>

#include <string>
#include <utility>

namespace comm::mpi {

/// A Config for the processes of `comm`: transport "mpi"; rank and world size
/// from MPI_Comm_rank/MPI_Comm_size; `comm` itself as the transport option
/// "mpi.comm" (its MPI_Comm_c2f handle); no store, so the ranks meet through
/// `comm` (its rank 0 hosts the store, MPI broadcasts the address). All other
/// fields are those of `base` (default: Config::from_env()).
inline Config config(MPI_Comm comm, Config base = Config::from_env()) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized)
    throw Error(ErrorCode::invalid_config, "comm::mpi::config: MPI is not initialised (call MPI_Init first, and "
                                           "MPI_Finalize only after the last comm communicator is destroyed)");
  if (comm == MPI_COMM_NULL)
    throw Error(ErrorCode::invalid_config,
                "comm::mpi::config: the communicator is MPI_COMM_NULL (this process is not a member of it)");
  int rank = 0, size = 0;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  base.transport = "mpi";
  base.rank = rank;
  base.world_size = size;
  base.store.clear();
  base.transport_options["mpi.comm"] = std::to_string(static_cast<long long>(MPI_Comm_c2f(comm)));
  return base;
}

/// Communicator::create(config(comm, base)): collective over `comm`.
inline Communicator create(MPI_Comm comm, Config base = Config::from_env()) {
  return Communicator::create(config(comm, std::move(base)));
}

}  // namespace comm::mpi
