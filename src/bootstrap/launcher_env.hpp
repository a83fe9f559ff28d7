#pragma once
// What the launchers that start multi-host jobs tell a rank about the store,
// beyond COMM_STORE and torchrun's MASTER_ADDR/MASTER_PORT (config.cpp).
//
// Slurm sets no store address. A job step knows its nodes, though, and rank 0
// (SLURM_PROCID 0) runs on the first node of the step under every
// distribution Slurm offers, so the store is derived: the first host of
// SLURM_STEP_NODELIST (else SLURM_JOB_NODELIST, else SLURM_NODELIST) and port
// 20000 + SLURM_JOB_ID mod 10000 (below Linux's ephemeral range, and two jobs
// sharing a node differ unless their ids are 10000 apart). Two concurrent
// steps of one job on one node would collide: give them COMM_STORE.

#include <optional>
#include <string>
#include <string_view>

namespace comm::detail {

// The first host of a Slurm host list: "node[07-09,12],gpu3" -> "node07",
// "rack[2-3]-n[1-4]" -> "rack2-n1". Throws invalid_config naming `var` when
// the list is malformed (an unbalanced bracket, an empty list).
std::string slurm_first_host(std::string_view nodelist, std::string_view var);

// "host:port" derived from the Slurm environment when this process runs
// inside a Slurm job step (SLURM_PROCID set) and a node list and job id are
// known; nullopt otherwise. Throws invalid_config naming the variable that is
// malformed.
std::optional<std::string> slurm_store_from_env();

// What to set when a multi-rank job has no store: a sentence naming the
// launcher this process was started by (Slurm, Open MPI, torchrun) and the
// variable it lacks, or "" when no launcher is recognised.
std::string store_hint_from_env();

}  // namespace comm::detail
