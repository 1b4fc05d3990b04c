// The tiered feature store's counting rules, checked alike by the store's and the samplers' tests.
#pragma once

#include "tessel/sampling/device_feature_store.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

namespace tessel::test {

// Each tier serves what it holds and passes the rest on: requests = hits + misses in every tier,
// a tier's misses are the next tier's requests, and the device tier sees every input row.
inline void expect_tiers_add_up(const sampling::FeatureStoreCounters& c, std::int64_t input_rows,
                                const std::string& what = {}) {
  for (const sampling::TierCounters* t : {&c.device, &c.host, &c.network})
    EXPECT_EQ(t->hits + t->misses, t->requests) << what;
  EXPECT_EQ(c.device.requests, input_rows) << what;
  EXPECT_EQ(c.host.requests, c.device.misses) << what;
  EXPECT_EQ(c.network.requests, c.host.misses) << what;
}

}  // namespace tessel::test
