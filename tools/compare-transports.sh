#!/usr/bin/env bash
# The main job of the README: every transport available here x every
# all-reduce algorithm, 2 ranks, 8 B to 64 MiB, side by side in one run;
# ends with the summary tables (fastest vs automatic choice per size, then comm
# against the libraries' own collectives: MPI's MPI_Allreduce and Gloo's, the
# transports' `native`) and writes results/compare.json and results/compare.svg.
# With the mpi transport built, the job runs under mpirun (the ranks meet
# through MPI: COMM_STORE=mpi), so that MPI is measured in the same job.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install-deps.sh

build=${COMM_BUILD_DIR:-build}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j"$(nproc)" --target commrun comm-bench comm_nccl 2>/dev/null ||
  cmake --build "$build" -j"$(nproc)" --target commrun comm-bench
mkdir -p results
# Loopback only on a single host; on a real cluster drop these to let each library choose.
export UCX_NET_DEVICES=${UCX_NET_DEVICES:-lo} FI_TCP_IFACE=${FI_TCP_IFACE:-lo} FI_NET_IFACE=${FI_NET_IFACE:-lo}
# The TCP transports' large sizes depend on it: under bbr, loopback exchanges
# of 512 KiB and more take twice as long in some jobs as in others (cubic: not).
echo "# loopback TCP congestion control: $(cat /proc/sys/net/ipv4/tcp_congestion_control 2>/dev/null || echo unknown)"
bench=("$build"/bin/comm-bench --coll allreduce --transport all --algo all
       -b 8 -e 64M -f 4 --json results/compare.json --plot results/compare.svg "$@")

mpirun=$(sed -n 's/^COMM_MPIEXEC:FILEPATH=//p' "$build/CMakeCache.txt" 2>/dev/null || true)
if [ -n "$mpirun" ] && [ -x "$mpirun" ]; then
  mpirun_args=()
  if "$mpirun" --version 2>/dev/null | grep -qE "Open MPI|OpenRTE"; then
    # Open MPI refuses root without these; unbound ranks, as under commrun.
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    mpirun_args=(--bind-to none)
  fi
  COMM_STORE=mpi exec "$mpirun" -np 2 "${mpirun_args[@]}" "${bench[@]}"
fi
exec "$build"/bin/commrun -n 2 -- "${bench[@]}"
