// CivetWeb, as Debian builds it, gives its threads 100 KiB stacks, and a
// thread's static TLS is carved out of that: OpenBLAS alone takes 60 KiB
// of it, and the rest overflowed inside CivetWeb's own request parsing
// (a crash on the first scrape of a worker). Its stack size is fixed at
// compile time, so every request for a smaller stack than kFloor is
// raised to it here: this definition of pthread_attr_setstacksize comes
// before the C library's in symbol lookup (the executable, or a library
// loaded before libc, wins) and forwards to it.
#include <dlfcn.h>
#include <pthread.h>

#include <algorithm>
#include <cstddef>

namespace {

// Room for any library's static TLS plus a usual call depth; threads that
// ask for more keep what they ask for.
constexpr size_t kFloor = size_t{1} << 20;

using SetStackSize = int (*)(pthread_attr_t*, size_t);

SetStackSize Real() {
  static const SetStackSize real = reinterpret_cast<SetStackSize>(
      dlsym(RTLD_NEXT, "pthread_attr_setstacksize"));
  return real;
}

}  // namespace

extern "C" int pthread_attr_setstacksize(pthread_attr_t* attr, size_t size) {
  const SetStackSize real = Real();
  if (real == nullptr) return 0;  // keep the default stack size
  return real(attr, std::max(size, kFloor));
}
