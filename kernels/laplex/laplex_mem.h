// Scratch memory for the LAPLEX C++ kernels (laplex_fused.cc, laplex_plan.cc).
//
// At N ~ 1e7 the kernels' temporary arrays (tens of MB each) are allocated per
// call; with 4 KiB pages the first touch of every page is a page fault (~20 ms
// per 40 MB here, as much as the work itself), and random gathers/scatters miss
// the TLB. Large buffers are therefore 2 MiB aligned and advised for
// transparent huge pages (MADV_HUGEPAGE, effective when THP is in "madvise" or
// "always" mode), are never zero-initialised, and are recycled through a small
// process-wide pool (at most kPoolCap bytes kept), so repeated calls neither
// fault nor have the kernel zero fresh pages. `AdviseHuge` advises an XLA
// output buffer before it is first written.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <new>
#include <utility>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace laplex_mem {

constexpr std::size_t kHuge = std::size_t{2} << 20;
constexpr std::size_t kHugeMin = std::size_t{4} << 20;  // smaller buffers: plain malloc

// advise the whole 2 MiB pages inside [p, p + bytes) for huge pages (a hint only)
inline void AdviseHuge(void* p, std::size_t bytes) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  if (p == nullptr || bytes < kHugeMin) return;
  const auto lo = (reinterpret_cast<std::uintptr_t>(p) + kHuge - 1) & ~(kHuge - 1);
  const auto hi = (reinterpret_cast<std::uintptr_t>(p) + bytes) & ~(kHuge - 1);
  if (hi > lo) madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_HUGEPAGE);
#else
  (void)p;
  (void)bytes;
#endif
}

constexpr std::size_t kPoolCap = std::size_t{512} << 20;

// free large blocks kept for reuse (best fit, at most twice the request)
class Pool {
 public:
  void* Get(std::size_t bytes, std::size_t* got) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      std::size_t best = free_.size();
      for (std::size_t i = 0; i < free_.size(); ++i) {
        const std::size_t b = free_[i].second;
        if (b >= bytes && b <= 2 * bytes && (best == free_.size() || b < free_[best].second)) {
          best = i;
        }
      }
      if (best < free_.size()) {
        auto blk = free_[best];
        free_[best] = free_.back();
        free_.pop_back();
        held_ -= blk.second;
        *got = blk.second;
        return blk.first;
      }
    }
    const std::size_t size = (bytes + kHuge - 1) / kHuge * kHuge;
    void* p = std::aligned_alloc(kHuge, size);
    if (p != nullptr) AdviseHuge(p, size);
    *got = size;
    return p;
  }
  void Put(void* p, std::size_t bytes) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (held_ + bytes <= kPoolCap) {
        free_.emplace_back(p, bytes);
        held_ += bytes;
        return;
      }
    }
    std::free(p);
  }

 private:
  std::mutex mu_;
  std::vector<std::pair<void*, std::size_t>> free_;
  std::size_t held_ = 0;
};

// one pool per process (inline: shared by every translation unit; never destroyed)
inline Pool& GlobalPool() {
  static Pool* pool = new Pool();
  return *pool;
}

// an uninitialised array of n trivially copyable T (movable, not copyable)
template <typename T>
class Scratch {
 public:
  Scratch() = default;
  explicit Scratch(std::size_t n) : n_(n) {
    const std::size_t bytes = n * sizeof(T);
    if (bytes == 0) return;
    void* p = nullptr;
    if (bytes >= kHugeMin) p = GlobalPool().Get(bytes, &pooled_);
    if (p == nullptr) {
      pooled_ = 0;
      p = std::malloc(bytes);
    }
    if (p == nullptr) throw std::bad_alloc();
    p_ = static_cast<T*>(p);
  }
  Scratch(Scratch&& o) noexcept
      : p_(std::exchange(o.p_, nullptr)),
        n_(std::exchange(o.n_, 0)),
        pooled_(std::exchange(o.pooled_, 0)) {}
  Scratch& operator=(Scratch&& o) noexcept {
    swap(o);
    return *this;
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  ~Scratch() {
    if (pooled_ != 0) {
      GlobalPool().Put(p_, pooled_);
    } else {
      std::free(p_);
    }
  }
  T* data() { return p_; }
  const T* data() const { return p_; }
  T& operator[](std::size_t i) { return p_[i]; }
  const T& operator[](std::size_t i) const { return p_[i]; }
  std::size_t size() const { return n_; }
  void swap(Scratch& o) noexcept {
    std::swap(p_, o.p_);
    std::swap(n_, o.n_);
    std::swap(pooled_, o.pooled_);
  }

 private:
  T* p_ = nullptr;
  std::size_t n_ = 0;
  std::size_t pooled_ = 0;  // bytes of a pool block (0: plain malloc)
};

}  // namespace laplex_mem
