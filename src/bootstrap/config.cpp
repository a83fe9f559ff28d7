#include "bootstrap/launcher_env.hpp"
#include "util/transport_name.hpp"
#include "util/c_locale.hpp"

#include <comm/config.hpp>
#include <comm/error.hpp>

#include "util/log.hpp"
#include "util/units.hpp"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

// The transports compiled in (set by CMake; the config layer does not reach
// into the transport registry, so that it links on its own).
#ifndef COMM_BUILT_TRANSPORTS
#define COMM_BUILT_TRANSPORTS "local"
#endif

namespace comm {

std::string_view to_string(LogLevel l) noexcept {
  switch (l) {
    case LogLevel::off: return "off";
    case LogLevel::warn: return "warn";
    case LogLevel::info: return "info";
    case LogLevel::debug: return "debug";
    case LogLevel::trace: return "trace";
  }
  return "?";
}

namespace {

[[noreturn]] void bad_value(std::string_view var, std::string_view value, std::string_view expected) {
  throw Error(ErrorCode::invalid_config, std::string(var) + "='" + std::string(value) +
                                             "' is not valid: expected " + std::string(expected));
}

}  // namespace

LogLevel parse_log_level(std::string_view s) {
  const std::string l = util::ascii_lower(s);
  if (l == "off" || l == "none") return LogLevel::off;
  if (l == "warn" || l == "warning") return LogLevel::warn;
  if (l == "info") return LogLevel::info;
  if (l == "debug") return LogLevel::debug;
  if (l == "trace") return LogLevel::trace;
  throw Error(ErrorCode::invalid_config,
              "unknown log level '" + std::string(s) + "': use off, warn, info, debug or trace");
}

std::size_t parse_bytes(std::string_view text, std::string_view what) {
  if (const auto bytes = util::parse_bytes(text)) return *bytes;
  bad_value(what, text,
            "a byte count that fits in size_t: digits with an optional K, M, G or T suffix (binary units), e.g. 64K");
}

namespace {

// Empty variables count as unset, so `COMM_TRANSPORT= prog` falls back to the default.
std::optional<std::string_view> env(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string_view(v);
}

struct Found {
  const char* name;
  std::string_view value;
};

// The first of `names` that is set, in precedence order.
template <std::size_t N>
std::optional<Found> first_of(const char* const (&names)[N]) {
  for (const char* n : names)
    if (auto v = env(n)) return Found{n, *v};
  return std::nullopt;
}

long long parse_int(const Found& f, long long min, long long max) {
  long long v = 0;
  const auto [end, ec] = std::from_chars(f.value.data(), f.value.data() + f.value.size(), v);
  if (ec != std::errc{} || end != f.value.data() + f.value.size() || v < min || v > max)
    bad_value(f.name, f.value,
              "an integer in [" + std::to_string(min) + ", " + std::to_string(max) + "]");
  return v;
}

bool parse_bool(const Found& f) {
  const std::string l = util::ascii_lower(f.value);
  if (l == "1" || l == "true" || l == "yes" || l == "on") return true;
  if (l == "0" || l == "false" || l == "no" || l == "off") return false;
  bad_value(f.name, f.value, "1/0, true/false, yes/no or on/off");
}

std::chrono::milliseconds parse_seconds(const Found& f) {
  // from_chars: "0.5" means half a second whatever the program's locale.
  const double secs = util::parse_double(f.value).value_or(-1);
  // A year is far beyond any sensible timeout and keeps the milliseconds from overflowing.
  if (!std::isfinite(secs) || secs <= 0 || secs > 365.0 * 86400)
    bad_value(f.name, f.value, "a positive number of seconds (fractions allowed), e.g. 30 or 0.5");
  return std::chrono::milliseconds(static_cast<long long>(std::ceil(secs * 1000.0)));
}

// A share from 0 to 1 ("0.5").
double parse_share(const Found& f) {
  const double v = util::parse_double(f.value).value_or(-1);
  if (!(v >= 0 && v <= 1)) bad_value(f.name, f.value, "a share of the CPUs from 0 to 1, e.g. 0.5 (1: always cache)");
  return v;
}

// COMM_STORE, else torchrun's MASTER_ADDR:MASTER_PORT, else one derived from Slurm's; "" if none.
std::string store_from_env() {
  if (auto f = env("COMM_STORE")) return std::string(*f);
  auto addr = env("MASTER_ADDR");
  auto port = env("MASTER_PORT");
  if (addr && port) {
    parse_int(Found{"MASTER_PORT", *port}, 1, 65535);
    // A bare IPv6 address needs brackets to be split from the port again.
    const bool v6 = addr->find(':') != std::string_view::npos && addr->front() != '[';
    return (v6 ? "[" + std::string(*addr) + "]" : std::string(*addr)) + ":" + std::string(*port);
  }
  if (auto slurm = detail::slurm_store_from_env()) return *slurm;
  return {};
}

}  // namespace

Config Config::from_env() {
  Config c;
  constexpr int kMaxRanks = 1 << 24;
  // Our names first, then the launcher that started this very process, most
  // specific first: mpirun's (Open MPI, then PMI/PMIx as MPICH, Intel MPI and
  // PMIx launchers set them), then torchrun's, then Slurm's. An allocation's
  // SLURM_* survive into every process mpirun starts inside it, so they say
  // the least. Precedence is per variable: a launcher may set only some.
  static const char* const kRank[] = {"COMM_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "RANK",
                                      "SLURM_PROCID"};
  static const char* const kSize[] = {"COMM_WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "WORLD_SIZE",
                                      "SLURM_NTASKS"};
  static const char* const kLocal[] = {"COMM_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",
                                       "LOCAL_RANK", "SLURM_LOCALID"};
  std::optional<Found> rank = first_of(kRank);
  std::optional<Found> size = first_of(kSize);
  if (rank) c.rank = static_cast<int>(parse_int(*rank, 0, kMaxRanks - 1));
  if (size) c.world_size = static_cast<int>(parse_int(*size, 1, kMaxRanks));
  if (auto f = first_of(kLocal)) c.local_rank = static_cast<int>(parse_int(*f, 0, kMaxRanks - 1));
  if (c.rank >= c.world_size)
    throw Error(ErrorCode::invalid_config,
                std::string(rank ? rank->name : "rank") + "=" + std::to_string(c.rank) +
                    " is not below " + (size ? size->name : "the world size") + "=" +
                    std::to_string(c.world_size) + ": a rank must be in [0, world size)");

  c.store = store_from_env();
  if (auto f = env("COMM_STORE_TOKEN")) c.store_token = std::string(*f);
  if (auto f = env("COMM_STORE_BIND")) c.store_bind = std::string(*f);
  if (auto f = env("COMM_TRANSPORT")) {
    if (!util::is_plain_transport_name(*f))
      bad_value("COMM_TRANSPORT", *f,
                std::string(util::kTransportNameRule) + "; this build has: " + COMM_BUILT_TRANSPORTS +
                    " (and plugins found as libcomm_<name>.so)");
    c.transport = std::string(*f);
  }
  if (auto f = env("COMM_TIMEOUT")) c.timeout = parse_seconds(Found{"COMM_TIMEOUT", *f});
  if (auto f = env("COMM_LOG")) {
    try {
      c.log_level = parse_log_level(*f);
    } catch (const Error&) {
      bad_value("COMM_LOG", *f, "off, warn, info, debug or trace");
    }
  }
  if (auto f = env("COMM_ALGO")) c.algo_override = std::string(*f);
  if (auto f = env("COMM_CHUNK")) {
    c.chunk_bytes = parse_bytes(*f, "COMM_CHUNK");
    if (c.chunk_bytes == 0) bad_value("COMM_CHUNK", *f, "a chunk size above 0 bytes");
  }
  if (auto f = env("COMM_CALIBRATE")) c.calibrate = parse_bool(Found{"COMM_CALIBRATE", *f});
  if (auto f = env("COMM_TUNING_FILE")) c.tuning_file = std::string(*f);
  if (auto f = env("COMM_CALIBRATION_BUSY_LIMIT"))
    c.calibration_busy_limit = parse_share(Found{"COMM_CALIBRATION_BUSY_LIMIT", *f});
  if (auto f = env("COMM_CHECK")) c.check = parse_bool(Found{"COMM_CHECK", *f});
  if (auto f = env("COMM_DETERMINISTIC")) c.deterministic = parse_bool(Found{"COMM_DETERMINISTIC", *f});
  if (auto f = env("COMM_DEVICE"))
    c.device = static_cast<int>(parse_int(Found{"COMM_DEVICE", *f}, 0, 1 << 16));
  if (auto f = env("COMM_IFACE")) c.iface = std::string(*f);
  if (auto f = env("COMM_DUMP_DIR")) c.dump_dir = std::string(*f);
  if (auto f = env("COMM_LOG_FILE")) c.log_file = std::string(*f);
  if (auto f = env("COMM_LOG_SUBSYS")) {
    log::parse_subsystems(*f, "COMM_LOG_SUBSYS");  // a typo is an error here, not silence later
    c.log_subsystems = std::string(*f);
  }
  if (auto f = env("COMM_FLIGHT_RECORDER"))
    c.flight_recorder_size =
        static_cast<std::size_t>(parse_int(Found{"COMM_FLIGHT_RECORDER", *f}, 0, 1 << 20));
  return c;
}

std::string Config::transport_option_variable(std::string_view transport, std::string_view setting) {
  std::string var = "COMM_";
  for (char ch : transport) var += static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  var += '_';
  for (char ch : setting) var += static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  return var;
}

std::string Config::transport_option(std::string_view transport, std::string_view setting) const {
  std::string key(transport);
  key += '.';
  key += setting;
  if (auto it = transport_options.find(key); it != transport_options.end()) return it->second;
  const char* value = std::getenv(transport_option_variable(transport, setting).c_str());
  return value ? std::string(value) : std::string();
}

}  // namespace comm
