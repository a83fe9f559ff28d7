// C API: configuration handles and one validated setter per comm::Config field.

#include "capi/capi.hpp"

#include <limits>

using namespace comm::capi;

namespace {

[[noreturn]] void bad_value(const char* fn, const char* field, const std::string& value, const char* expected) {
  throw comm::Error(comm::ErrorCode::invalid_config,
                    std::string(fn) + ": " + field + "=" + value + " is not valid: expected " + expected);
}

// Runs `apply` on the config of a setter, after the NULL-handle check.
template <class Apply>
comm_status_t set(const char* fn, comm_config_t* c, Apply&& apply) {
  return guarded(nullptr, [&] { apply(require(fn, "config", c).config); });
}

template <class Field>
comm_status_t set_string(const char* fn, comm_config_t* c, const char* field, const char* value, Field member) {
  return set(fn, c, [&](comm::Config& config) { config.*member = require_string(fn, field, value); });
}

// Ranks and world sizes below 2^24, as comm::Config::from_env accepts.
constexpr int kMaxRanks = 1 << 24;

}  // namespace

extern "C" {

comm_status_t comm_config_create(comm_config_t** config) {
  return guarded(nullptr, [&] {
    require("comm_config_create", "config", config) = nullptr;
    *config = new comm_config{};
  });
}

comm_status_t comm_config_from_env(comm_config_t** config) {
  return guarded(nullptr, [&] {
    require("comm_config_from_env", "config", config) = nullptr;
    *config = new comm_config{comm::Config::from_env()};
  });
}

void comm_config_destroy(comm_config_t* config) { delete config; }

comm_status_t comm_config_set_rank(comm_config_t* c, int rank) {
  const char* fn = "comm_config_set_rank";
  return set(fn, c, [&](comm::Config& config) {
    if (rank < 0 || rank >= kMaxRanks) bad_value(fn, "rank", std::to_string(rank), "an integer in [0, 2^24)");
    config.rank = rank;
  });
}

comm_status_t comm_config_set_world_size(comm_config_t* c, int world_size) {
  const char* fn = "comm_config_set_world_size";
  return set(fn, c, [&](comm::Config& config) {
    if (world_size < 1 || world_size > kMaxRanks)
      bad_value(fn, "world_size", std::to_string(world_size), "an integer in [1, 2^24]");
    config.world_size = world_size;
  });
}

comm_status_t comm_config_set_local_rank(comm_config_t* c, int local_rank) {
  const char* fn = "comm_config_set_local_rank";
  return set(fn, c, [&](comm::Config& config) {
    if (local_rank < 0 || local_rank >= kMaxRanks)
      bad_value(fn, "local_rank", std::to_string(local_rank), "an integer in [0, 2^24)");
    config.local_rank = local_rank;
  });
}

comm_status_t comm_config_set_store(comm_config_t* c, const char* store) {
  return set_string("comm_config_set_store", c, "store", store, &comm::Config::store);
}

comm_status_t comm_config_set_store_token(comm_config_t* c, const char* token) {
  return set_string("comm_config_set_store_token", c, "token", token, &comm::Config::store_token);
}

comm_status_t comm_config_set_store_bind(comm_config_t* c, const char* address) {
  return set_string("comm_config_set_store_bind", c, "address", address, &comm::Config::store_bind);
}

comm_status_t comm_config_set_transport(comm_config_t* c, const char* transport) {
  // "" is valid: the transport is then chosen at creation. Unknown names are comm_create's to report.
  return set_string("comm_config_set_transport", c, "transport", transport, &comm::Config::transport);
}

comm_status_t comm_config_set_timeout_ms(comm_config_t* c, int64_t timeout_ms) {
  const char* fn = "comm_config_set_timeout_ms";
  return set(fn, c, [&](comm::Config& config) {
    // A year, as COMM_TIMEOUT allows: far beyond any sensible timeout, and no overflow.
    constexpr std::int64_t kYearMs = std::int64_t{365} * 86400 * 1000;
    if (timeout_ms <= 0 || timeout_ms > kYearMs)
      bad_value(fn, "timeout_ms", std::to_string(timeout_ms), "a positive number of milliseconds, at most a year");
    config.timeout = std::chrono::milliseconds(timeout_ms);
  });
}

comm_status_t comm_config_set_log_level(comm_config_t* c, const char* level) {
  const char* fn = "comm_config_set_log_level";
  return set(fn, c, [&](comm::Config& config) { config.log_level = comm::parse_log_level(require_string(fn, "level", level)); });
}

comm_status_t comm_config_set_algo_override(comm_config_t* c, const char* override_spec) {
  return set_string("comm_config_set_algo_override", c, "override_spec", override_spec, &comm::Config::algo_override);
}

comm_status_t comm_config_set_chunk_bytes(comm_config_t* c, size_t chunk_bytes) {
  const char* fn = "comm_config_set_chunk_bytes";
  return set(fn, c, [&](comm::Config& config) {
    if (chunk_bytes == 0) bad_value(fn, "chunk_bytes", "0", "a chunk size above 0 bytes");
    config.chunk_bytes = chunk_bytes;
  });
}

comm_status_t comm_config_set_calibrate(comm_config_t* c, int calibrate) {
  return set("comm_config_set_calibrate", c, [&](comm::Config& config) { config.calibrate = calibrate != 0; });
}

comm_status_t comm_config_set_tuning_file(comm_config_t* c, const char* path) {
  return set_string("comm_config_set_tuning_file", c, "path", path, &comm::Config::tuning_file);
}

comm_status_t comm_config_set_check(comm_config_t* c, int check) {
  return set("comm_config_set_check", c, [&](comm::Config& config) { config.check = check != 0; });
}

comm_status_t comm_config_set_device(comm_config_t* c, int device) {
  const char* fn = "comm_config_set_device";
  return set(fn, c, [&](comm::Config& config) {
    if (device < -1 || device > (1 << 16))
      bad_value(fn, "device", std::to_string(device), "-1 (the local rank) or a CUDA device ordinal in [0, 65536]");
    config.device = device;
  });
}

comm_status_t comm_config_set_iface(comm_config_t* c, const char* address) {
  return set_string("comm_config_set_iface", c, "address", address, &comm::Config::iface);
}

comm_status_t comm_config_set_flight_recorder_size(comm_config_t* c, size_t operations) {
  const char* fn = "comm_config_set_flight_recorder_size";
  return set(fn, c, [&](comm::Config& config) {
    if (operations > (std::size_t{1} << 20))
      bad_value(fn, "operations", std::to_string(operations), "at most 2^20 operations");
    config.flight_recorder_size = operations;
  });
}

comm_status_t comm_config_set_dump_dir(comm_config_t* c, const char* directory) {
  return set_string("comm_config_set_dump_dir", c, "directory", directory, &comm::Config::dump_dir);
}

comm_status_t comm_config_set_transport_option(comm_config_t* c, const char* key, const char* value) {
  const char* fn = "comm_config_set_transport_option";
  return set(fn, c, [&](comm::Config& config) {
    std::string k = require_string(fn, "key", key);
    if (k.empty()) bad_argument(fn, "key is empty");
    config.transport_options[std::move(k)] = require_string(fn, "value", value);
  });
}

}  // extern "C"
