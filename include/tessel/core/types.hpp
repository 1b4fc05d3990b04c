// Basic id types shared by every layer: global node ids, partition-local ids, edge offsets.
#pragma once

#include <cstdint>

namespace tessel {

using NodeId = std::int64_t;   // id of a node in a whole graph (source or relabeled space)
using LocalId = std::int32_t;  // id of a node inside one partition (owned + halo)
using EdgeId = std::int64_t;   // offset into an edge array (CSR indptr entries)

}  // namespace tessel

#if defined(__CUDACC__)
#define TESSEL_HD __host__ __device__
#else
#define TESSEL_HD
#endif
