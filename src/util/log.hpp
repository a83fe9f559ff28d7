#pragma once
// Minimal leveled logging to stderr, controlled by Config::log_level /
// COMM_LOG. One line per message, prefixed with "comm[rank] level:".

#include <comm/config.hpp>

#include <locale>
#include <sstream>
#include <string>

namespace comm::log {

void set_level(LogLevel level) noexcept;
LogLevel level() noexcept;
void set_rank(int rank) noexcept;
void write(LogLevel level, const std::string& message) noexcept;
inline bool enabled(LogLevel l) noexcept { return l != LogLevel::off && l <= level(); }

}  // namespace comm::log

// COMM_LOG_AT(LogLevel::info, "x=" << x): the stream is built only if enabled.
#define COMM_LOG_AT(lvl, expr)                      \
  do {                                              \
    if (::comm::log::enabled(lvl)) {                \
      std::ostringstream comm_log_os_;              \
      comm_log_os_.imbue(std::locale::classic());   \
      comm_log_os_ << expr;                         \
      ::comm::log::write(lvl, comm_log_os_.str());  \
    }                                               \
  } while (0)
#define COMM_WARN(expr) COMM_LOG_AT(::comm::LogLevel::warn, expr)
#define COMM_INFO(expr) COMM_LOG_AT(::comm::LogLevel::info, expr)
#define COMM_DEBUG(expr) COMM_LOG_AT(::comm::LogLevel::debug, expr)
