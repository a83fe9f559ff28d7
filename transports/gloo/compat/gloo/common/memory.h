#pragma once
// Debian's libgloo-dev (the 2022-05 snapshot) installs Gloo's TCP transport
// headers but not this one, which they include. The gloo transport includes
// them to sleep on an unbound buffer's own condition variable (see
// WatchedBuffer in gloo_transport.cpp), so this declares the two class
// templates those headers name, with the members Gloo gives them: one
// std::shared_ptr / std::weak_ptr each. That keeps tcp::UnboundBuffer's size,
// and so our subclass's members after it, as libgloo has them. Gloo's own
// code in libgloo constructs, uses and destroys these members; ours never
// does. Used only where the installed Gloo lacks the header (CMakeLists.txt).

#include <memory>

namespace gloo {

template <typename T>
class ShareableNonOwningPtr {
 public:
  explicit ShareableNonOwningPtr(T* object) : ptr_(object, [](T*) {}) {}
  ShareableNonOwningPtr(const ShareableNonOwningPtr&) = delete;
  ShareableNonOwningPtr& operator=(const ShareableNonOwningPtr&) = delete;

 private:
  std::shared_ptr<T> ptr_;

  template <typename U>
  friend class WeakNonOwningPtr;
};

template <typename T>
class WeakNonOwningPtr {
 public:
  WeakNonOwningPtr() = default;
  explicit WeakNonOwningPtr(const ShareableNonOwningPtr<T>& root) : ptr_(root.ptr_) {}

 private:
  std::weak_ptr<T> ptr_;
};

}  // namespace gloo
