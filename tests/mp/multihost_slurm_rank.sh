#!/bin/sh
# One rank of an emulated Slurm job step (tools/multihost.sh --launcher env):
# Slurm's task variables from the rig's host and index, no COMM_STORE, no
# COMM_RANK; the library must derive its store from SLURM_STEP_NODELIST.
SLURM_PROCID=$((MH_RANK_OFFSET + MH_LOCAL_INDEX)) SLURM_NTASKS=$MH_WORLD SLURM_LOCALID=$MH_LOCAL_INDEX
export SLURM_PROCID SLURM_NTASKS SLURM_LOCALID
unset COMM_STORE COMM_RANK COMM_WORLD_SIZE
exec "$@"
