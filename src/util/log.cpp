#include "util/log.hpp"

#include <atomic>
#include <cstdio>

namespace comm::log {
namespace {
std::atomic<LogLevel> g_level{LogLevel::warn};
// Per thread: ranks of the local transport are threads of one process.
thread_local int g_rank = -1;
}  // namespace

void set_level(LogLevel l) noexcept { g_level.store(l); }
LogLevel level() noexcept { return g_level.load(std::memory_order_relaxed); }
void set_rank(int rank) noexcept { g_rank = rank; }

void write(LogLevel l, const std::string& message) noexcept {
  // One fprintf per line so concurrent ranks/threads do not interleave within a line.
  std::fprintf(stderr, "comm[%d] %s: %s\n", g_rank, std::string(to_string(l)).c_str(),
               message.c_str());
}

}  // namespace comm::log
