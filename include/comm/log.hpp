#pragma once
/// \file log.hpp
/// Where comm's log lines go. Which lines are written is decided per
/// communicator, from its Config: log_level (COMM_LOG), log_subsystems
/// (COMM_LOG_SUBSYS) and log_file (COMM_LOG_FILE); see config.hpp. Ranks that
/// are threads of one process may log at different levels without affecting
/// each other.
///
/// Every line reads
///   2025-01-31 12:34:56.789012 host:4242 r3 comm INFO init: <message>
/// (local time, host name and process id, rank, level, subsystem). Lines
/// logged outside any communicator call carry rank "r-" and follow COMM_LOG,
/// COMM_LOG_SUBSYS and COMM_LOG_FILE from the environment.
///
/// Subsystems: init (creation, transport choice, hosts, links, tuning),
/// bootstrap (stores), transport (the transports), select (selector, cost
/// model, calibration, tuning file), coll (collective calls and their
/// algorithm choice), diag (flight recorder, consistency checks).

#include <comm/config.hpp>
#include <comm/export.hpp>

#include <functional>
#include <string_view>

namespace comm {

/// Receives each log line that passed its communicator's filters: the level,
/// the subsystem name ("init", "coll", ...) and the whole line as above,
/// without a trailing newline. The views are valid during the call only.
using LogSink = std::function<void(LogLevel level, std::string_view subsystem, std::string_view line)>;

/// Sends every log line of the process to `sink` instead of stderr or
/// COMM_LOG_FILE; an empty function restores those. Thread safe. The sink is
/// called on whichever thread logs, possibly on several at once, and must not
/// call into comm; an exception it throws is dropped with the line. Lines
/// already being written when the sink changes may still reach the old one.
COMM_API void set_log_sink(LogSink sink);

}  // namespace comm
