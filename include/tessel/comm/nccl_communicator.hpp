// The NCCL data plane: device tensors move between GPUs (one per rank) on the stream a call is
// given.
#pragma once

#include "tessel/comm/communicator.hpp"

#include <memory>

namespace tessel::comm {

// Whether this build has NCCL (CUDA builds).
bool nccl_available();

// A Communicator whose Tensor operations run over NCCL on `device` (one GPU per rank), created
// collectively over `control` (rank 0 makes the unique id, broadcast over MPI, then
// ncclCommInitRank). Host-memory operations (counts, metrics, barriers) go to `control`, which
// must outlive the result. A watchdog thread polls ncclCommGetAsyncError and, on an error,
// aborts the communicator and the job with one line naming rank, host and the error; a wait
// for NCCL work longer than TESSEL_NCCL_TIMEOUT_S seconds (default 600) does the same.
std::unique_ptr<Communicator> make_nccl_communicator(Communicator& control, Device device);

}  // namespace tessel::comm
