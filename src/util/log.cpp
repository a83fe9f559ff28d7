#include "util/log.hpp"

#include <comm/error.hpp>
#include <comm/log.hpp>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <mutex>
#include <unistd.h>

namespace comm {
namespace log {

struct Output {
  std::FILE* file = nullptr;
  std::mutex mu;
};

namespace {

// Read and written on every collective (log::Scope): initial-exec TLS, a
// plain %fs-relative access instead of a __tls_get_addr call per use. Eight
// bytes of static TLS, which glibc keeps in reserve even when libcomm is
// loaded with dlopen (the Python module).
__attribute__((tls_model("initial-exec"))) thread_local const Context* t_current = nullptr;

struct Sink {
  std::mutex mu;
  std::shared_ptr<const LogSink> fn;
};

// The process-wide state below is never destroyed: threads that outlive
// main() (a store server, a detached watcher) may still log during exit.
Sink& sink() {
  static Sink* s = new Sink;
  return *s;
}

const std::string& hostname() {
  static const std::string* name = [] {
    char buf[256] = {};
    return new std::string(::gethostname(buf, sizeof buf - 1) == 0 ? buf : "unknown-host");
  }();
  return *name;
}

// %h host, %p pid, %r rank, %% a percent sign; any other % sequence is kept.
std::string expand(std::string_view pattern, int rank) {
  std::string out;
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] != '%' || i + 1 == pattern.size()) {
      out += pattern[i];
      continue;
    }
    switch (pattern[++i]) {
      case 'h': out += hostname(); break;
      case 'p': out += std::to_string(::getpid()); break;
      case 'r': out += rank < 0 ? std::string("-") : std::to_string(rank); break;
      case '%': out += '%'; break;
      default: out += '%', out += pattern[i];
    }
  }
  return out;
}

// One Output per path for the life of the process: ranks that are threads of
// one process and name the same file share it line by line.
std::shared_ptr<Output> open_output(const std::string& path, std::string* why) {
  static std::mutex* mu = new std::mutex;
  static auto* open = new std::map<std::string, std::shared_ptr<Output>>;
  std::lock_guard lk(*mu);
  if (auto it = open->find(path); it != open->end()) return it->second;
  auto out = std::make_shared<Output>();
  out->file = std::fopen(path.c_str(), "w");
  if (!out->file) {
    *why = std::strerror(errno);
    return nullptr;
  }
  open->emplace(path, out);
  return out;
}

const Context& process_default() {
  static const Context* c = [] {
    auto* ctx = new Context;
    // Malformed values are reported by Config::from_env; here they fall back.
    if (const char* v = std::getenv("COMM_LOG"); v && *v) try {
        ctx->level = parse_log_level(v);
      } catch (const Error&) {
      }
    if (const char* v = std::getenv("COMM_LOG_SUBSYS"); v && *v) try {
        ctx->subsystems = parse_subsystems(v, "COMM_LOG_SUBSYS");
      } catch (const Error&) {
      }
    std::string why;
    if (const char* v = std::getenv("COMM_LOG_FILE"); v && *v) ctx->output = open_output(expand(v, -1), &why);
    return ctx;
  }();
  return *c;
}

std::string_view level_name(LogLevel l) noexcept {
  switch (l) {
    case LogLevel::off: return "OFF";
    case LogLevel::warn: return "WARN";
    case LogLevel::info: return "INFO";
    case LogLevel::debug: return "DEBUG";
    case LogLevel::trace: return "TRACE";
  }
  return "?";
}

// "2025-01-31 12:34:56.789012 host:4242 r3 comm INFO init: "
std::string prefix(LogLevel level, Subsystem s, int rank) {
  const auto now = std::chrono::system_clock::now();
  const std::time_t secs = std::chrono::system_clock::to_time_t(now);
  const auto micros =
      std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count() % 1'000'000;
  std::tm tm{};
  ::localtime_r(&secs, &tm);
  char when[64];
  const std::size_t n = std::strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &tm);
  std::snprintf(when + n, sizeof when - n, ".%06lld", static_cast<long long>(micros));
  return std::string(when) + " " + hostname() + ":" + std::to_string(::getpid()) + " r" +
         (rank < 0 ? std::string("-") : std::to_string(rank)) + " comm " + std::string(level_name(level)) + " " +
         std::string(to_string(s)) + ": ";
}

}  // namespace

std::string_view to_string(Subsystem s) noexcept {
  switch (s) {
    case Subsystem::init: return "init";
    case Subsystem::bootstrap: return "bootstrap";
    case Subsystem::transport: return "transport";
    case Subsystem::select: return "select";
    case Subsystem::coll: return "coll";
    case Subsystem::diag: return "diag";
  }
  return "?";
}

std::uint32_t parse_subsystems(std::string_view text, std::string_view what) {
  if (text.empty() || text == "all" || text == "ALL") return kEverySubsystem;
  const bool negate = text.front() == '^';
  if (negate) text.remove_prefix(1);
  std::uint32_t mask = 0;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t end = std::min(text.find(',', start), text.size());
    std::string name(text.substr(start, end - start));
    for (char& c : name) c = (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;  // NCCL spells them INIT
    bool known = name == "all";
    if (known) mask = kEverySubsystem;
    for (Subsystem s : kAllSubsystems)
      if (name == to_string(s)) {
        mask |= bit(s);
        known = true;
      }
    if (!known) {
      std::string valid;
      for (Subsystem s : kAllSubsystems) valid += std::string(to_string(s)) + ", ";
      throw Error(ErrorCode::invalid_config,
                  std::string(what) + ": unknown subsystem '" + name + "' (valid: " + valid +
                      "all; comma-separated, a leading ^ excludes them, e.g. \"^coll\")");
    }
    start = end + 1;
  }
  return negate ? kEverySubsystem & ~mask : mask;
}

std::shared_ptr<const Context> make_context(const Config& config) {
  auto c = std::make_shared<Context>();
  c->level = config.log_level;
  c->rank = config.rank;
  c->subsystems = parse_subsystems(config.log_subsystems, "COMM_LOG_SUBSYS (Config::log_subsystems)");
  if (!config.log_file.empty()) {
    const std::string path = expand(config.log_file, config.rank);
    std::string why;
    c->output = open_output(path, &why);
    if (!c->output)
      throw Error(ErrorCode::invalid_config, "COMM_LOG_FILE (Config::log_file) '" + config.log_file + "': cannot open '" +
                                                 path + "' for writing: " + why);
  }
  return c;
}

const Context& current() noexcept { return t_current ? *t_current : process_default(); }

std::shared_ptr<const Context> current_shared() noexcept {
  return t_current ? t_current->shared_from_this() : nullptr;
}

Scope::Scope(const Context* c) noexcept : previous_(t_current) {
  if (c) t_current = c;
}

Scope::~Scope() { t_current = previous_; }

void write(LogLevel level, Subsystem s, const std::string& message) noexcept {
  try {
    const Context& c = current();
    const std::string line = prefix(level, s, c.rank) + message;
    std::shared_ptr<const LogSink> fn;
    {
      std::lock_guard lk(sink().mu);
      fn = sink().fn;
    }
    if (fn) {
      (*fn)(level, to_string(s), line);
      return;
    }
    const std::string text = line + "\n";
    if (c.output) {
      std::lock_guard lk(c.output->mu);
      std::fwrite(text.data(), 1, text.size(), c.output->file);
      std::fflush(c.output->file);
      return;
    }
    // One call per line so concurrent ranks do not interleave within a line.
    std::fwrite(text.data(), 1, text.size(), stderr);
  } catch (...) {
    // Logging never fails the operation that logs (a throwing sink included).
  }
}

}  // namespace log

void set_log_sink(LogSink fn) {
  auto shared = fn ? std::make_shared<const LogSink>(std::move(fn)) : nullptr;
  std::lock_guard lk(log::sink().mu);
  log::sink().fn = std::move(shared);
}

}  // namespace comm
