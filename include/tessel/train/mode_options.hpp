// One mode's own options inside TrainOptions: a copyable holder that each mode reads as its own
// type (FullOptions, SampledOptions, ... in tessel/modes/<mode>.hpp), so the driver's options
// need none of the modes' headers.
#pragma once

#include "tessel/core/error.hpp"

#include <any>
#include <typeinfo>

namespace tessel::train {

// A std::any rather than a polymorphic base: the option structs stay plain aggregates (designated
// initializers, defaults in place, copied with TrainOptions as bench copies it per mode) and a
// read of the wrong type is caught where it happens.
class ModeOptions {
public:
  // The options held, or T's defaults when none were set (a caller that fills TrainOptions
  // directly and keeps the mode's defaults). Holding another mode's type is a programming error.
  template <class T> const T& get() const {
    if (!value_.has_value()) {
      static const T defaults{};
      return defaults;
    }
    const T* held = std::any_cast<T>(&value_);
    TESSEL_ASSERT(held != nullptr, "the mode options hold {}, read as {}", value_.type().name(),
                 typeid(T).name());
    return *held;
  }
  // The options held, set to T's defaults first when none were.
  template <class T> T& edit() {
    if (!value_.has_value()) value_ = T{};
    T* held = std::any_cast<T>(&value_);
    TESSEL_ASSERT(held != nullptr, "the mode options hold {}, edited as {}", value_.type().name(),
                 typeid(T).name());
    return *held;
  }
  template <class T> void set(T options) { value_ = std::move(options); }
  template <class T> bool holds() const { return std::any_cast<T>(&value_) != nullptr; }
  bool empty() const { return !value_.has_value(); }

private:
  std::any value_;
};

}  // namespace tessel::train
