# Sourced by tools/fault-loop.sh and tools/kill-campaign.sh, which both take
# [RUNS] [BUILD_DIR] and run jobs of every transport on this one host.

# fault_args DEFAULT_RUNS "$@": sets runs, build and commrun from the arguments.
fault_args() {
  runs=${2:-$1}
  build=${3:-build}
  commrun=$build/bin/commrun
}

# loopback_env VARIANT: sets the array env_vars to the environment that runs
# VARIANT on this host: ucx-shm (or ucx), ucx-tcp, ofi-tcp (or ofi), ofi-shm;
# any other transport needs none.
loopback_env() {
  case $1 in
    ucx | ucx-shm) env_vars=(UCX_TLS=shm) ;;
    ucx-tcp) env_vars=(UCX_TLS=tcp UCX_NET_DEVICES=lo) ;;
    ofi | ofi-tcp) env_vars=("FI_PROVIDER=tcp;ofi_rxm" "COMM_OFI_PROVIDER=tcp;ofi_rxm" FI_TCP_IFACE=lo) ;;
    ofi-shm) env_vars=(FI_PROVIDER=shm COMM_OFI_PROVIDER=shm) ;;
    *) env_vars=() ;;
  esac
}
