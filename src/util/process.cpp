#include "util/process.hpp"

#include <dirent.h>
#include <sys/mman.h>
#include <unistd.h>

#include <charconv>
#include <fstream>
#include <sstream>

namespace comm::detail {

// Parsed without iostreams: locale-independent, and free of libstdc++'s lazily
// built numpunct cache, which races when ranks (threads) read at once under a
// global locale (TSan, locale_comma_decimal).
std::optional<ProcessStat> read_process_stat(long pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!std::getline(in, text)) return std::nullopt;
  // The command name (field 2) may contain spaces and parentheses: parse after the last ')'.
  const auto close = text.rfind(')');
  if (close == std::string::npos || close + 2 >= text.size()) return std::nullopt;
  ProcessStat st;
  st.state = text[close + 2];
  // Fields 3..22 follow, one space apart: field 22 is the 20th after ')'.
  std::size_t at = close + 1;
  for (int field = 3; field < 22; ++field) {
    at = text.find(' ', at + 1);
    if (at == std::string::npos) return std::nullopt;
  }
  const char* begin = text.data() + at + 1;
  const auto [end, ec] = std::from_chars(begin, text.data() + text.size(), st.start_ticks);
  if (ec != std::errc{} || end == begin) return std::nullopt;
  return st;
}

bool process_alive(long pid, unsigned long long start_ticks) {
  const auto st = read_process_stat(pid);
  if (!st) return false;
  return st->state != 'Z' && st->state != 'X' && (start_ticks == 0 || st->start_ticks == start_ticks);
}

std::string pid_namespace() {
  char ns[128] = {};
  const ssize_t n = ::readlink("/proc/self/ns/pid", ns, sizeof ns - 1);
  return n > 0 ? std::string(ns, static_cast<std::size_t>(n)) : std::string();
}

std::string boot_id() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(in, id);
  return id;
}

std::string comm_shm_prefix(std::string_view transport, long pid) {
  return "comm-" + std::string(transport) + "-" + std::to_string(pid) + "-";
}

std::size_t remove_shm_files_of(long pid) {
  if (pid <= 0) return 0;
  const std::string theirs = std::to_string(pid) + ":";
  const std::string ours = "-" + std::to_string(pid) + "-";
  std::size_t removed = 0;
  DIR* d = ::opendir("/dev/shm");
  if (!d) return 0;
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    // comm-<transport>-<pid>-...: the pid sits right after the first word.
    const auto dash = name.find('-', 5);
    const bool mine = name.rfind("comm-", 0) == 0 && dash != std::string::npos && name.compare(dash, ours.size(), ours) == 0;
    if ((mine || name.rfind(theirs, 0) == 0) && ::shm_unlink(name.c_str()) == 0) ++removed;
  }
  ::closedir(d);
  return removed;
}

}  // namespace comm::detail
