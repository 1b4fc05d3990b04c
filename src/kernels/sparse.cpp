// SparseMatrix construction, transfer and the views that share its arrays.
#include "tessel/kernels/sparse.hpp"

#include "check.hpp"

namespace tessel::kernels {

SparseMatrix SparseMatrix::from_csr(const LocalCsr& csr, Device device) {
  csr.validate("SparseMatrix::from_csr");
  SparseMatrix a;
  a.num_rows = csr.num_rows;
  a.num_cols = csr.num_cols;
  // from_vector makes the host copy; Tensor::to would copy it again even to the CPU.
  const auto place = [&](Tensor t) { return device.is_cpu() ? t : t.to(device); };
  a.indptr = place(Tensor::from_vector(csr.indptr));
  a.indices = place(Tensor::from_vector(csr.indices));
  if (!csr.values.empty()) a.values = place(Tensor::from_vector(csr.values));
  return a;
}

LocalCsr SparseMatrix::to_csr() const {
  LocalCsr csr;
  csr.num_rows = num_rows;
  csr.num_cols = num_cols;
  const Tensor host_indptr = indptr.to(Device::cpu());
  const Tensor host_indices = indices.to(Device::cpu());
  csr.indptr.assign(host_indptr.data<EdgeId>(), host_indptr.data<EdgeId>() + host_indptr.numel());
  csr.indices.assign(host_indices.data<LocalId>(),
                     host_indices.data<LocalId>() + host_indices.numel());
  if (weighted()) {
    const Tensor host_values = values.to(Device::cpu());
    csr.values.assign(host_values.data<float>(), host_values.data<float>() + host_values.numel());
  }
  return csr;
}

SparseMatrix SparseMatrix::to(Device device) const {
  SparseMatrix a = *this;
  a.indptr = indptr.to(device);
  a.indices = indices.to(device);
  if (weighted()) a.values = values.to(device);
  return a;
}

SparseMatrix SparseMatrix::transpose(Context* ctx) const {
  return csr_transpose(*this, ctx);
}

SparseMatrix SparseMatrix::with_values(Tensor new_values) const {
  detail::expect_tensor("SparseMatrix::with_values", "values", new_values, DType::f32, 1);
  TESSEL_EXPECTS(new_values.numel() == nnz() && new_values.device() == device(),
                 "SparseMatrix::with_values: values {} for {} entries on {}", new_values.describe(),
                 nnz(), device().str());
  SparseMatrix a = *this;
  a.values = std::move(new_values);
  return a;
}

} // namespace tessel::kernels
