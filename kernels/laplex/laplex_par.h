// Thread fan-out for the LAPLEX CPU passes (laplex_fused.cc).
//
// Threads(n, groups): how many threads a pass over n elements cut into `groups`
// independent pieces uses. By default one per CPU this process may run on
// (sched_getaffinity on Linux, else the hardware thread count), with at least
// kMinPerThread elements each, so small operators stay single-threaded
// (spawning costs ~50 us). The environment
// variable JAXLAB_LAPLEX_THREADS=k caps the count at k (k = 1: serial) and drops
// the size threshold, which lets tests drive the multi-thread carry logic at
// small sizes. It is read on every call.
//
// Run(nt, f): calls f(0) .. f(nt - 1), f(0) on the calling thread, the others on
// fresh std::threads, and returns when all are done. If a thread cannot be
// started, its piece runs on the calling thread instead.
#pragma once

#if defined(__linux__)
#include <sched.h>
#endif

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <system_error>
#include <thread>
#include <vector>

namespace laplex_par {

constexpr int64_t kMinPerThread = int64_t{1} << 18;
constexpr int kMaxThreads = 64;

inline int Threads(int64_t n, int64_t groups) {
  int64_t want;
  const char* env = std::getenv("JAXLAB_LAPLEX_THREADS");
  if (env != nullptr && *env != '\0') {
    want = std::atoll(env);
  } else {
#if defined(__linux__)
    cpu_set_t set;
    CPU_ZERO(&set);
    want = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 1;
#else
    want = std::max(1u, std::thread::hardware_concurrency());
#endif
    want = std::min<int64_t>(want, n / kMinPerThread);
  }
  want = std::min<int64_t>({want, groups, kMaxThreads});
  return static_cast<int>(std::max<int64_t>(want, 1));
}

template <typename F>
void Run(int nt, F&& f) {
  std::vector<std::thread> pool;
  std::vector<int> inline_ids;
  for (int t = 1; t < nt; ++t) {
    try {
      pool.emplace_back([&f, t] { f(t); });
    } catch (const std::system_error&) {
      inline_ids.push_back(t);
    }
  }
  f(0);
  for (int t : inline_ids) f(t);
  for (auto& th : pool) th.join();
}

}  // namespace laplex_par
