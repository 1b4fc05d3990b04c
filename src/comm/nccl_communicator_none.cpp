// The NCCL entry points of builds without CUDA.
#include "tessel/comm/nccl_communicator.hpp"

#include "tessel/core/error.hpp"

namespace tessel::comm {

bool nccl_available() { return false; }

std::unique_ptr<Communicator> make_nccl_communicator(Communicator&, Device device) {
  TESSEL_FAIL("the NCCL data plane needs a CUDA build (asked for {})", device.str());
}

}  // namespace tessel::comm
