#pragma once
// Logging like NCCL_DEBUG, per communicator (the public side is
// include/comm/log.hpp). Each communicator owns a Context (level, subsystems,
// output, rank) made from its Config; a Scope installs it on the calling
// thread for the duration of a call, so ranks that are threads of one process
// log at their own levels. Threads a communicator starts capture current()
// and open their own Scope. Without a Scope, the process default applies
// (COMM_LOG, COMM_LOG_SUBSYS and COMM_LOG_FILE from the environment).
//
//   COMM_INFO("x=" << x);                          subsystem from the file's folder
//   COMM_LOG_AT(LogLevel::debug, log::Subsystem::coll, "chose " << name);
// The message is built only when the line will be written.

#include <comm/config.hpp>

#include <cstdint>
#include <locale>
#include <memory>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>

namespace comm::log {

enum class Subsystem : std::uint8_t { init, bootstrap, transport, select, coll, diag };
inline constexpr Subsystem kAllSubsystems[] = {Subsystem::init,   Subsystem::bootstrap, Subsystem::transport,
                                              Subsystem::select, Subsystem::coll,      Subsystem::diag};
inline constexpr std::uint32_t kEverySubsystem = (1u << std::size(kAllSubsystems)) - 1;
inline constexpr std::uint32_t bit(Subsystem s) { return 1u << static_cast<unsigned>(s); }

std::string_view to_string(Subsystem s) noexcept;
/// COMM_LOG_SUBSYS syntax ("" or "all"; "init,coll"; "^coll") as a mask.
/// Throws comm::Error(invalid_config) naming `what` and the valid names.
std::uint32_t parse_subsystems(std::string_view text, std::string_view what);

/// The subsystem of a source file, from its folder: src/bootstrap ->
/// bootstrap, src/select -> select, src/engine and algorithms -> coll,
/// src/diag -> diag, transports -> transport, anything else -> init.
constexpr Subsystem subsystem_of(std::string_view file) {
  constexpr std::pair<std::string_view, Subsystem> kFolders[] = {
      {"src/bootstrap/", Subsystem::bootstrap}, {"src/select/", Subsystem::select}, {"src/engine/", Subsystem::coll},
      {"algorithms/", Subsystem::coll},         {"src/diag/", Subsystem::diag},     {"transports/", Subsystem::transport}};
  // The folder nearest the file name decides (a checkout may live under any path).
  Subsystem found = Subsystem::init;
  std::size_t best = 0;
  for (const auto& [folder, s] : kFolders)
    if (const auto at = file.rfind(folder); at != std::string_view::npos && at + 1 > best) {
      best = at + 1;
      found = s;
    }
  return found;
}

struct Output;  // a log file, shared by every context that names it

/// What one communicator logs, and where. Immutable once made.
struct Context : std::enable_shared_from_this<Context> {
  LogLevel level = LogLevel::warn;
  std::uint32_t subsystems = kEverySubsystem;
  int rank = -1;
  std::shared_ptr<Output> output;  // null: stderr

  bool enabled(LogLevel l, Subsystem s) const noexcept {
    return l != LogLevel::off && l <= level && (subsystems & bit(s)) != 0;
  }
};

/// A context from `config` (level, subsystems, file with %h/%p/%r expanded
/// for config.rank). Throws comm::Error(invalid_config) naming COMM_LOG_FILE
/// or COMM_LOG_SUBSYS if the file cannot be opened or the list is malformed.
std::shared_ptr<const Context> make_context(const Config& config);

/// The context of this thread: the innermost Scope's, else the process default.
const Context& current() noexcept;
/// The same, shared, for a thread to capture (null: the process default).
std::shared_ptr<const Context> current_shared() noexcept;

/// Installs `c` on this thread until destroyed (then the previous one again).
class Scope {
 public:
  explicit Scope(const Context* c) noexcept;
  explicit Scope(const std::shared_ptr<const Context>& c) noexcept : Scope(c.get()) {}
  ~Scope();
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  const Context* previous_;
};

inline bool enabled(LogLevel l, Subsystem s) noexcept { return current().enabled(l, s); }
/// Writes one line (prefix + message) to the sink, the context's file, or stderr.
void write(LogLevel level, Subsystem s, const std::string& message) noexcept;

}  // namespace comm::log

// COMM_LOG_AT(LogLevel::info, log::Subsystem::init, "x=" << x): built only if enabled.
#define COMM_LOG_AT(lvl, subsys, expr)                         \
  do {                                                         \
    if (::comm::log::enabled(lvl, subsys)) {                   \
      std::ostringstream comm_log_os_;                         \
      comm_log_os_.imbue(std::locale::classic());              \
      comm_log_os_ << expr;                                    \
      ::comm::log::write(lvl, subsys, comm_log_os_.str());     \
    }                                                          \
  } while (0)
#define COMM_LOG_HERE(lvl, expr) COMM_LOG_AT(lvl, ::comm::log::subsystem_of(__FILE__), expr)
#define COMM_WARN(expr) COMM_LOG_HERE(::comm::LogLevel::warn, expr)
#define COMM_INFO(expr) COMM_LOG_HERE(::comm::LogLevel::info, expr)
#define COMM_DEBUG(expr) COMM_LOG_HERE(::comm::LogLevel::debug, expr)
#define COMM_TRACE(expr) COMM_LOG_HERE(::comm::LogLevel::trace, expr)
