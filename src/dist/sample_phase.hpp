// The sampler's "sample" phase timer, shared by the files of DistributedSampler.
#pragma once

#include "tessel/core/timer.hpp"

namespace tessel::dist {

// The "sample" phase in wall seconds, and in process CPU seconds added to `cpu_seconds`.
class SamplePhase {
 public:
  SamplePhase(PhaseTimes& phases, double& cpu_seconds)
      : wall_(phases, "sample"), cpu_seconds_(cpu_seconds), start_(process_cpu_seconds()) {}
  ~SamplePhase() { cpu_seconds_ += process_cpu_seconds() - start_; }
  SamplePhase(const SamplePhase&) = delete;
  SamplePhase& operator=(const SamplePhase&) = delete;

 private:
  ScopedPhase wall_;
  double& cpu_seconds_;
  double start_;
};

}  // namespace tessel::dist
