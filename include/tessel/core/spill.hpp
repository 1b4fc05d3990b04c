// Large arrays backed by unlinked scratch files, so that the kernel can write them back and
// drop their pages under memory pressure instead of holding them as anonymous memory.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <type_traits>
#include <vector>

namespace tessel::spill {

// Arrays of at least this many bytes are spilled while a Scope is active; smaller ones always
// take the heap. 16 MiB, or TESSEL_SPILL_MIN_BYTES (read once; tests spill small graphs).
std::size_t min_bytes() noexcept;

// While a Scope lives (process-wide: it is meant for a load phase, not for one thread), each
// allocation through spill::Allocator of min_bytes() or more is a MAP_SHARED mapping of its own
// file in `dir`, created exclusively (mode 0600) and unlinked at once, so nothing is left behind
// however the process ends; its blocks are reserved up front (posix_fallocate), so a full disk
// is an error here, not a SIGBUS later (on file systems that keep reserved blocks: ext4, xfs;
// not copy-on-write ones). Where the file cannot be made, or `dir` is in memory (tmpfs, ramfs),
// the array takes the heap and the first such case is logged once. The mappings
// outlive the Scope: the scope decides where arrays are made, not how long they live. Scopes
// nest.
class Scope {
 public:
  explicit Scope(std::filesystem::path dir);
  ~Scope();
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;
};

// Where a Scope is active, a new mapping of `bytes` (nullptr when none is active or the file
// could not be made: the caller then takes the heap). Throws tessel::Error when the disk has no
// room for it.
void* try_map(std::size_t bytes);
// Unmaps p if it is a mapping from try_map (true), else false.
bool unmap(void* p, std::size_t bytes) noexcept;
// Starts writing back the dirty pages of the mapping that holds p (after it was filled or
// reordered), so the kernel can drop them without waiting on writeback; false when p is not a
// mapping from try_map.
bool write_back(const void* p) noexcept;
// Tells the kernel the mapping that holds p is read at random (MADV_RANDOM): a page fault then
// reads that page alone, not the read-ahead window around it. False when p is not a mapping
// from try_map.
bool advise_random(const void* p) noexcept;
// Whether p is the start of a mapping from try_map.
bool is_mapped(const void* p) noexcept;
// Bytes of all live mappings from try_map.
std::int64_t mapped_bytes() noexcept;

// A std::allocator that spills large arrays while a Scope is active. All instances are equal,
// so containers move and swap their storage freely; deallocation finds out itself whether an
// array was mapped.
template <class T> struct Allocator {
  using value_type = T;
  using propagate_on_container_move_assignment = std::true_type;
  using is_always_equal = std::true_type;

  Allocator() noexcept = default;
  template <class U> Allocator(const Allocator<U>&) noexcept {}

  T* allocate(std::size_t n) {
    if (n * sizeof(T) >= min_bytes())
      if (void* p = try_map(n * sizeof(T))) return static_cast<T*>(p);
    return std::allocator<T>{}.allocate(n);
  }
  void deallocate(T* p, std::size_t n) noexcept {
    if (n * sizeof(T) >= min_bytes() && unmap(p, n * sizeof(T))) return;
    std::allocator<T>{}.deallocate(p, n);
  }
  template <class U> friend bool operator==(const Allocator&, const Allocator<U>&) noexcept {
    return true;
  }
};

// Arrays with this allocator compare by value with those of any other (tests compare a graph's
// indices with a plain std::vector).
template <class T, class B>
  requires(!std::is_same_v<B, Allocator<T>>)
bool operator==(const std::vector<T, Allocator<T>>& a, const std::vector<T, B>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end());
}

}  // namespace tessel::spill
