#include "util/process.hpp"

#include <unistd.h>

#include <fstream>
#include <sstream>

namespace comm::detail {

std::optional<ProcessStat> read_process_stat(long pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!std::getline(in, text)) return std::nullopt;
  // The command name (field 2) may contain spaces and parentheses: parse after the last ')'.
  const auto close = text.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream rest(text.substr(close + 1));
  ProcessStat st;
  std::string field;
  rest >> st.state;
  for (int i = 4; i <= 21 && rest >> field; ++i) {
  }
  if (!(rest >> st.start_ticks)) return std::nullopt;
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

}  // namespace comm::detail
