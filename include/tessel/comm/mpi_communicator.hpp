// The MPI Communicator: host buffers, MPI collectives, byte accounting.
#pragma once

#include "tessel/comm/communicator.hpp"

#include <mpi.h>

#include <memory>

namespace tessel::comm {

// A Communicator over a duplicate of `comm` (MPI_COMM_WORLD by default); MPI must be running.
std::unique_ptr<Communicator> make_mpi_communicator(MPI_Comm comm = MPI_COMM_WORLD);

}  // namespace tessel::comm
