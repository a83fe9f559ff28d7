// Store addresses from launcher environments (see launcher_env.hpp).

#include "bootstrap/launcher_env.hpp"

#include <comm/error.hpp>

#include <charconv>
#include <cstdlib>

namespace comm::detail {
namespace {

std::optional<std::string_view> env(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string_view(v);
}

[[noreturn]] void bad(std::string_view var, std::string_view value, std::string_view why) {
  throw Error(ErrorCode::invalid_config,
              std::string(var) + "='" + std::string(value) + "' is not a Slurm host list: " + std::string(why));
}

}  // namespace

std::string slurm_first_host(std::string_view nodelist, std::string_view var) {
  std::string host;
  for (std::size_t i = 0; i < nodelist.size(); ++i) {
    const char c = nodelist[i];
    if (c == ',') break;  // a top-level comma ends the first entry
    if (c == ']') bad(var, nodelist, "']' without '['");
    if (c != '[') {
      host += c;
      continue;
    }
    // A bracket expression "[07-09,12]": its first item's first value, padding kept.
    const std::size_t close = nodelist.find(']', i);
    if (close == std::string_view::npos) bad(var, nodelist, "'[' without ']'");
    const std::string_view inside = nodelist.substr(i + 1, close - i - 1);
    const std::string_view first = inside.substr(0, inside.find_first_of(",-"));
    if (first.empty() || first.find_first_not_of("0123456789") != std::string_view::npos)
      bad(var, nodelist, "a bracket must start with a number");
    host += first;
    i = close;
  }
  if (host.empty()) bad(var, nodelist, "no host in it");
  return host;
}

std::optional<std::string> slurm_store_from_env() {
  if (!env("SLURM_PROCID")) return std::nullopt;
  const char* list_var = nullptr;
  std::optional<std::string_view> list;
  for (const char* v : {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"})
    if ((list = env(v))) {
      list_var = v;
      break;
    }
  const auto job = env("SLURM_JOB_ID");
  if (!list || !job) return std::nullopt;
  unsigned long long id = 0;
  const auto [end, ec] = std::from_chars(job->data(), job->data() + job->size(), id);
  if (ec != std::errc{} || end != job->data() + job->size())
    throw Error(ErrorCode::invalid_config, "SLURM_JOB_ID='" + std::string(*job) + "' is not a job number");
  return slurm_first_host(*list, list_var) + ":" + std::to_string(20000 + id % 10000);
}

std::string store_hint_from_env() {
  if (env("SLURM_PROCID"))
    return "under Slurm the store is derived from SLURM_STEP_NODELIST (or SLURM_JOB_NODELIST) and SLURM_JOB_ID, "
           "which are not both set here: run through srun inside an allocation, or export "
           "COMM_STORE=<first node>:<free port>";
  if (env("OMPI_COMM_WORLD_RANK"))
    return "Open MPI sets no store address: pass it to every rank, e.g. mpirun -x COMM_STORE=<host of rank 0>:<free "
           "port> (rank 0 listens there)";
  if (env("RANK") && !env("MASTER_ADDR"))
    return "RANK is set but MASTER_ADDR/MASTER_PORT are not (torchrun sets both)";
  return "";
}

}  // namespace comm::detail
