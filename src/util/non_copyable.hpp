#pragma once
// A base for classes that own a resource (a thread's signal mask, a lock, a
// connection) and so must be neither copied nor assigned.

namespace comm {

class NonCopyable {
 public:
  NonCopyable(const NonCopyable&) = delete;
  NonCopyable& operator=(const NonCopyable&) = delete;

 protected:
  NonCopyable() = default;
  ~NonCopyable() = default;
};

}  // namespace comm
