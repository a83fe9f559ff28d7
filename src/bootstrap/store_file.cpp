// A store kept as files in one directory, for ranks that share a filesystem
// but cannot reach each other's ports. Each key is one file, written to a
// temporary name and renamed so readers never see half a value. add() and the
// reference count of openers are serialised by flock() on a lock file.
//
// Layout of the directory:
//   k.<encoded key>   one value per file
//   .tmp.*            values being written
//   .comm-refs        how many store objects have it open
//   .comm-lock        the lock file
//   .comm-created     present when a store object created the directory

#include "util/sha256.hpp"

#include <comm/error.hpp>
#include <comm/store.hpp>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <functional>
#include <thread>

namespace comm {

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr const char* kLock = ".comm-lock";
constexpr const char* kRefs = ".comm-refs";
constexpr const char* kCreated = ".comm-created";
// Keys longer than this (after escaping) are stored under their hash: file
// names are limited to 255 bytes on common filesystems.
constexpr std::size_t kMaxEncoded = 200;

std::string errno_text() { return std::strerror(errno); }

class FileStore final : public Store {
 public:
  explicit FileStore(std::string dir) : dir_(std::move(dir)) {
    if (dir_.empty())
      throw Error(ErrorCode::invalid_config, "file store: empty directory (use COMM_STORE=file:/shared/dir)");
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(dir_).parent_path(), ec);
    if (::mkdir(dir_.c_str(), 0700) == 0) created_ = true;
    else if (errno != EEXIST)
      throw Error(ErrorCode::store_failure, "file store: cannot create directory '" + dir_ + "': " + errno_text());
    locked([&] {
      if (created_) write_file(kCreated, "");
      write_file(kRefs, std::to_string(read_int(kRefs, "file store") + 1));
    });
  }

  ~FileStore() override {
    try {
      locked([&] {
        const std::int64_t refs = read_int(kRefs, "file store") - 1;
        if (refs > 0) {
          write_file(kRefs, std::to_string(refs));
          return;
        }
        remove_everything();
      });
    } catch (...) {
      // A destructor cannot report failure; what is left is only files in a directory.
    }
  }

  void set(const std::string& key, const std::string& value) override {
    write_file(file_of(key), value);
  }

  std::string get(const std::string& key, std::chrono::milliseconds timeout) override {
    std::string value;
    poll_until(timeout, [&] { return read_file(file_of(key), value); },
               [&] { return "store get: key '" + key + "' was not set within "; });
    return value;
  }

  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override {
    std::vector<std::string> missing;
    poll_until(
        timeout,
        [&] {
          missing.clear();
          for (const std::string& k : keys)
            if (!exists(file_of(k))) missing.push_back(k);
          return missing.empty();
        },
        [&] {
          std::string names;
          for (std::size_t i = 0; i < missing.size() && i < 16; ++i) names += (i ? ", '" : "'") + missing[i] + "'";
          if (missing.size() > 16) names += " and " + std::to_string(missing.size() - 16) + " more";
          return "store wait: " + std::to_string(missing.size()) + " of " + std::to_string(keys.size()) +
                 " keys not set (" + names + ") within ";
        });
  }

  std::int64_t add(const std::string& key, std::int64_t delta) override {
    std::int64_t value = 0;
    locked([&] {
      const std::string f = file_of(key);
      value = static_cast<std::int64_t>(static_cast<std::uint64_t>(read_int(f, "store add: key '" + key + "'")) +
                                        static_cast<std::uint64_t>(delta));
      write_file(f, std::to_string(value));
    });
    return value;
  }

  bool check(const std::string& key) override { return exists(file_of(key)); }

  bool erase(const std::string& key) override {
    if (::unlink(path(file_of(key)).c_str()) == 0) return true;
    if (errno == ENOENT) return false;
    throw Error(ErrorCode::store_failure, "store erase: cannot remove '" + path(file_of(key)) + "': " + errno_text());
  }

 private:
  std::string path(const std::string& name) const { return dir_ + "/" + name; }

  static std::string file_of(const std::string& key) {
    std::string enc = "k.";
    constexpr char kHex[] = "0123456789abcdef";
    for (unsigned char ch : key) {
      if (std::isalnum(ch) || ch == '_' || ch == '-' || (ch == '.' && enc.size() > 2)) {
        enc.push_back(static_cast<char>(ch));
      } else {
        enc.push_back('%');
        enc.push_back(kHex[ch >> 4]);
        enc.push_back(kHex[ch & 15]);
      }
    }
    if (enc.size() <= kMaxEncoded) return enc;
    std::array<char, 64> hex;
    return "h." + std::string(detail::to_hex(detail::sha256(key), hex));
  }

  bool exists(const std::string& name) const {
    struct stat st {};
    return ::stat(path(name).c_str(), &st) == 0;
  }

  // Returns false if the file does not exist.
  bool read_file(const std::string& name, std::string& out) const {
    const int fd = ::open(path(name).c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      if (errno == ENOENT) return false;
      throw Error(ErrorCode::store_failure, "file store: cannot open '" + path(name) + "': " + errno_text());
    }
    out.clear();
    char buf[65536];
    for (;;) {
      const ssize_t n = ::read(fd, buf, sizeof buf);
      if (n > 0) {
        out.append(buf, static_cast<std::size_t>(n));
      } else if (n == 0) {
        break;
      } else if (errno != EINTR) {
        const std::string why = errno_text();
        ::close(fd);
        throw Error(ErrorCode::store_failure, "file store: cannot read '" + path(name) + "': " + why);
      }
    }
    ::close(fd);
    return true;
  }

  std::int64_t read_int(const std::string& name, const std::string& what) const {
    std::string s;
    if (!read_file(name, s)) return 0;
    std::int64_t v = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc{} || end != s.data() + s.size() || s.empty())
      throw Error(ErrorCode::invalid_argument, what + " holds '" + s.substr(0, 64) + "', not an integer");
    return v;
  }

  void write_file(const std::string& name, const std::string& value) const {
    static std::atomic<std::uint64_t> counter{0};
    const std::string tmp = path(".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++));
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0)
      throw Error(ErrorCode::store_failure, "file store: cannot create '" + tmp + "': " + errno_text() +
                                                " (was the store directory removed?)");
    std::size_t off = 0;
    while (off < value.size()) {
      const ssize_t n = ::write(fd, value.data() + off, value.size() - off);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        const std::string why = errno_text();
        ::close(fd);
        ::unlink(tmp.c_str());
        throw Error(ErrorCode::store_failure, "file store: cannot write '" + tmp + "': " + why);
      }
      off += static_cast<std::size_t>(n);
    }
    ::close(fd);
    if (::rename(tmp.c_str(), path(name).c_str()) != 0) {
      const std::string why = errno_text();
      ::unlink(tmp.c_str());
      throw Error(ErrorCode::store_failure, "file store: cannot rename to '" + path(name) + "': " + why);
    }
  }

  // Runs fn holding the directory's lock. The last closer removes the lock
  // file, so after locking we check that the file we hold is still the one at
  // that path; otherwise we raced with a cleanup and start over.
  void locked(const std::function<void()>& fn) const {
    const std::string lock = path(kLock);
    for (int attempt = 0;; ++attempt) {
      const int fd = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
      if (fd < 0) {
        if (errno == ENOENT && attempt < 3) {
          ::mkdir(dir_.c_str(), 0700);
          continue;
        }
        throw Error(ErrorCode::store_failure, "file store: cannot open lock file '" + lock + "': " + errno_text());
      }
      while (::flock(fd, LOCK_EX) != 0 && errno == EINTR) {
      }
      struct stat held {}, now {};
      if (::fstat(fd, &held) == 0 && ::stat(lock.c_str(), &now) == 0 && held.st_ino == now.st_ino &&
          held.st_dev == now.st_dev) {
        try {
          fn();
        } catch (...) {
          ::close(fd);
          throw;
        }
        ::close(fd);
        return;
      }
      ::close(fd);
    }
  }

  // Called with the lock held by the last store object to close.
  void remove_everything() const {
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(dir_, ec)) {
      const std::string name = entry.path().filename().string();
      if (name.starts_with("k.") || name.starts_with("h.") || name.starts_with(".tmp.") || name == kRefs)
        std::filesystem::remove(entry.path(), ec);
    }
    const bool ours = exists(kCreated);
    ::unlink(path(kCreated).c_str());
    ::unlink(path(kLock).c_str());
    if (ours) ::rmdir(dir_.c_str());
  }

  template <class Ready, class Describe>
  void poll_until(std::chrono::milliseconds timeout, Ready ready, Describe describe) const {
    const auto deadline = Clock::now() + std::min<std::chrono::milliseconds>(timeout, 24h * 365);
    auto backoff = 1ms;
    while (!ready()) {
      const auto now = Clock::now();
      if (now >= deadline)
        throw Error(ErrorCode::timeout, describe() + std::to_string(timeout.count()) + " ms (file store in '" +
                                            dir_ + "'; is every rank running and using the same directory?)");
      std::this_thread::sleep_for(std::min<Clock::duration>(backoff, deadline - now));
      backoff = std::min(backoff * 2, std::chrono::milliseconds(100));
    }
  }

  std::string dir_;
  bool created_ = false;
};

}  // namespace

std::shared_ptr<Store> make_file_store(const std::string& directory) {
  return std::make_shared<FileStore>(directory);
}

}  // namespace comm
