// Open-addressing hash map from node ids to dense slots, cleared in O(1) for reuse per batch.
#pragma once

#include "tessel/core/types.hpp"

#include <bit>
#include <cstdint>
#include <vector>

namespace tessel::sampling {

// Maps NodeId (>= 0) -> a dense int32 value (a block-local id, a cache slot). Linear probing on
// a power-of-two table kept at most half full. clear() bumps a generation stamp instead of
// wiping the table, so one map serves every batch without O(capacity) work per batch; reset()
// also shrinks the *used* range so a small batch probes a small, cache-resident range.
// Not thread-safe for writers; find() may run concurrently with other find()s.
class IdHashMap {
public:
  static constexpr std::int32_t kAbsent = -1;

  // Empties the map and sizes it for about `expected` keys (it grows past that when needed).
  void reset(std::int64_t expected) {
    next_generation();
    size_ = 0;
    use_capacity(capacity_for(expected));
  }
  void clear() { reset(0); }

  std::int64_t size() const { return size_; }

  // The value stored for `id`, or kAbsent.
  std::int32_t find(NodeId id) const {
    if (mask_ == 0) return kAbsent;
    for (std::uint64_t s = home(id);; s = (s + 1) & mask_) {
      const Slot& slot = slots_[s];
      if (slot.generation != generation_) return kAbsent;
      if (slot.key == id) return slot.value;
    }
  }

  // Inserts (id -> value) if id is new and returns value; otherwise returns the stored value.
  // `inserted` says which happened.
  std::int32_t insert(NodeId id, std::int32_t value, bool& inserted) {
    if ((size_ + 1) * 2 > static_cast<std::int64_t>(mask_ + 1)) grow();
    for (std::uint64_t s = home(id);; s = (s + 1) & mask_) {
      Slot& slot = slots_[s];
      if (slot.generation != generation_) {
        slot = {id, value, generation_};
        ++size_;
        inserted = true;
        return value;
      }
      if (slot.key == id) {
        inserted = false;
        return slot.value;
      }
    }
  }

  // Hints the cache to load id's home slot (used a few keys ahead in bulk loops).
  void prefetch(NodeId id) const {
    if (mask_ != 0) __builtin_prefetch(&slots_[home(id)]);
  }

private:
  struct Slot {
    NodeId key;
    std::int32_t value;
    std::uint32_t generation; // the slot is live only when this equals generation_
  };

  static std::uint64_t capacity_for(std::int64_t expected) {
    const auto want = static_cast<std::uint64_t>(expected < 8 ? 16 : expected * 2);
    return std::bit_ceil(want);
  }
  std::uint64_t home(NodeId id) const {
    // Fibonacci hashing: the high bits of a multiply spread consecutive ids across the table.
    return (static_cast<std::uint64_t>(id) * 0x9E3779B97F4A7C15ull) >> shift_;
  }
  void next_generation() {
    if (++generation_ == 0) { // wrapped: stale stamps could look live again, so wipe once
      for (Slot& s : slots_)
        s.generation = 0;
      generation_ = 1;
    }
  }
  // Uses the first `capacity` slots (allocating if the table is smaller). Slots past the used
  // range keep old stamps, which can never equal a future generation.
  void use_capacity(std::uint64_t capacity) {
    if (slots_.size() < capacity) slots_.resize(capacity, Slot{0, 0, 0});
    mask_ = capacity - 1;
    shift_ = 64 - std::countr_zero(capacity);
  }
  void grow() {
    std::vector<Slot> live;
    live.reserve(static_cast<std::size_t>(size_));
    for (std::uint64_t s = 0; s <= mask_ && mask_ != 0; ++s)
      if (slots_[s].generation == generation_) live.push_back(slots_[s]);
    next_generation();
    use_capacity(mask_ == 0 ? 16 : (mask_ + 1) * 2);
    size_ = 0;
    bool inserted = false;
    for (const Slot& s : live)
      insert(s.key, s.value, inserted);
  }

  std::vector<Slot> slots_;
  std::uint64_t mask_ = 0; // used capacity - 1; 0 before the first reset
  int shift_ = 64;
  std::uint32_t generation_ = 0;
  std::int64_t size_ = 0;
};

// A fixed set of node ids -> their positions in an id array the caller keeps (`ids`, e.g. a
// part's local id -> global id), 4 bytes a slot: a slot holds a position and a key is compared
// through ids[position]. Built once, never cleared; about a quarter of IdHashMap's 16 bytes a
// slot, for maps of millions of keys held for the whole run (a part's halo nodes). `ids` must
// outlive the index and not change.
class PositionIndex {
public:
  static constexpr std::int32_t kAbsent = -1;

  // Indexes positions [first, end) of `ids` (ids distinct and >= 0 there).
  void build(const NodeId* ids, std::int64_t first, std::int64_t end) {
    ids_ = ids;
    const std::int64_t n = end - first;
    const auto capacity = std::bit_ceil(static_cast<std::uint64_t>(n < 8 ? 16 : n * 2));
    slots_.assign(capacity, kAbsent);
    mask_ = capacity - 1;
    shift_ = 64 - std::countr_zero(capacity);
    for (std::int64_t p = first; p < end; ++p) {
      std::uint64_t s = home(ids[p]);
      while (slots_[s] != kAbsent) s = (s + 1) & mask_;
      slots_[s] = static_cast<std::int32_t>(p);
    }
  }
  // The position of `id`, or kAbsent.
  std::int32_t find(NodeId id) const {
    if (slots_.empty()) return kAbsent;
    for (std::uint64_t s = home(id);; s = (s + 1) & mask_) {
      const std::int32_t p = slots_[s];
      if (p == kAbsent || ids_[p] == id) return p;
    }
  }
  std::int64_t bytes() const {
    return static_cast<std::int64_t>(slots_.size() * sizeof(std::int32_t));
  }

private:
  std::uint64_t home(NodeId id) const {
    return (static_cast<std::uint64_t>(id) * 0x9E3779B97F4A7C15ull) >> shift_;
  }
  std::vector<std::int32_t> slots_;
  const NodeId* ids_ = nullptr;
  std::uint64_t mask_ = 0;
  int shift_ = 64;
};

// The same interface over a bounded id space [0, bound): one stamped entry per possible id, so a
// lookup is one access to an array of 8 * bound bytes — faster than hashing while that array
// stays cache-resident (a whole graph of a few million nodes). Ids outside the bound are an
// internal error (callers check the bound once, not per id).
class DenseIdMap {
public:
  static constexpr std::int32_t kAbsent = IdHashMap::kAbsent;

  explicit DenseIdMap(std::int64_t bound = 0) : entries_(static_cast<std::size_t>(bound)) {}
  std::int64_t bound() const { return static_cast<std::int64_t>(entries_.size()); }

  void reset(std::int64_t /*expected*/) {
    if (++generation_ == 0) {
      for (Entry& e : entries_)
        e.generation = 0;
      generation_ = 1;
    }
    size_ = 0;
  }
  void clear() { reset(0); }
  std::int64_t size() const { return size_; }

  std::int32_t find(NodeId id) const {
    const Entry& e = entries_[static_cast<std::size_t>(id)];
    return e.generation == generation_ ? e.value : kAbsent;
  }
  std::int32_t insert(NodeId id, std::int32_t value, bool& inserted) {
    Entry& e = entries_[static_cast<std::size_t>(id)];
    inserted = e.generation != generation_;
    if (inserted) {
      e = {value, generation_};
      ++size_;
    }
    return e.value;
  }
  void prefetch(NodeId id) const { __builtin_prefetch(&entries_[static_cast<std::size_t>(id)]); }

private:
  struct Entry {
    std::int32_t value = 0;
    std::uint32_t generation = 0;
  };
  std::vector<Entry> entries_;
  std::uint32_t generation_ = 0;
  std::int64_t size_ = 0;
};

} // namespace tessel::sampling
