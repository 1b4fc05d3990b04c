// Every kernel entry point: include this to use the kernels layer.
#pragma once

#include "tessel/kernels/attention.hpp"
#include "tessel/kernels/context.hpp"
#include "tessel/kernels/dense.hpp"
#include "tessel/kernels/link.hpp"
#include "tessel/kernels/loss.hpp"
#include "tessel/kernels/optim.hpp"
#include "tessel/kernels/recurrent.hpp"
#include "tessel/kernels/row_codec.hpp"
#include "tessel/kernels/sparse.hpp"
