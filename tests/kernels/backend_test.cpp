// Runs every kernel op on every backend present and compares each backend with the CPU twin.
#include "kernel_test_util.hpp"

#include "tessel/kernels/kernels.hpp"

#include <cstdio>
#include <functional>
#include <numeric>

namespace tessel {
namespace {

// One op case: builds its inputs on the host (identical for every backend), runs on `device`
// and returns its outputs on the host.
struct OpCase {
  std::string name;
  std::function<std::vector<Tensor>(Device)> run;
  double rtol = 1e-5, atol = 1e-6;
};

std::vector<Tensor> to_host(std::vector<Tensor> outputs) {
  for (auto& t : outputs)
    t = t.to(Device::cpu());
  return outputs;
}

Tensor scalar(double value) {
  return Tensor::from_vector<double>({value});
}

std::vector<OpCase> all_cases() {
  std::vector<OpCase> cases;
  for (bool weighted : {false, true})
    for (std::int64_t f : {1, 3, 7, 16, 20, 32, 100, 128, 200}) {
      const std::string tag =
          std::string(weighted ? "weighted" : "pattern") + ".F" + std::to_string(f);
      auto spmm_case = [weighted, f](kernels::SpmmAlgorithm cuda_algorithm) {
        return [weighted, f, cuda_algorithm](Device d) {
          const LocalCsr csr = test::random_csr(300, 250, 20, weighted, 17);
          const auto a = kernels::SparseMatrix::from_csr(csr, d);
          const Tensor x = test::random_tensor({250, f}, 3).to(d);
          Tensor y = Tensor::empty({300, f}, DType::f32, d);
          kernels::spmm(a, x, y, nullptr,
                        d.is_cpu() ? kernels::SpmmAlgorithm::automatic : cuda_algorithm);
          return to_host({y});
        };
      };
      cases.push_back(
          {"spmm." + tag, spmm_case(kernels::SpmmAlgorithm::cuda_warp_row), 1e-5, 1e-5});
      if (f <= 32)
        cases.push_back({"spmm_narrow_row." + tag,
                         spmm_case(kernels::SpmmAlgorithm::cuda_narrow_row), 1e-5, 1e-5});
      if (weighted)
        cases.push_back(
            {"spmm_cusparse." + tag, spmm_case(kernels::SpmmAlgorithm::cuda_cusparse), 1e-4, 1e-5});
    }
  cases.push_back({"spmm_transpose",
                   [](Device d) {
                     const auto a =
                         kernels::SparseMatrix::from_csr(test::random_csr(90, 120, 10, true, 2), d);
                     const Tensor z = test::random_tensor({90, 16}, 4).to(d);
                     return to_host({kernels::spmm(a.transpose(), z)});
                   },
                   1e-5, 1e-5});
  for (bool weighted : {false, true})
    cases.push_back({std::string("csr_transpose.") + (weighted ? "weighted" : "pattern"),
                     [weighted](Device d) {
                       // Large enough for the CPU twin to split it over threads.
                       const auto a = kernels::SparseMatrix::from_csr(
                           test::random_csr(4000, 2500, 30, weighted, 8), d);
                       const kernels::SparseMatrix at = kernels::csr_transpose(a);
                       std::vector<Tensor> out{at.indptr, at.indices};
                       if (weighted) out.push_back(at.values);
                       return to_host(out);
                     },
                     0, 0});
  cases.push_back({"gcn_matrix",
                   [](Device d) {
                     // 80 destinations among 110 sources; degrees at least the sampled row
                     // lengths, so rows are scaled as in sampled mode.
                     const LocalCsr csr = test::random_csr(80, 110, 9, false, 5);
                     const auto a = kernels::SparseMatrix::from_csr(csr, d);
                     std::vector<std::int64_t> degree(110);
                     for (int v = 0; v < 110; ++v)
                       degree[v] = (v < 80 ? csr.degree(v) : 0) + (v * 7) % 13;
                     const Tensor deg = Tensor::from_vector(degree).to(d);
                     const kernels::SparseMatrix g = kernels::gcn_matrix(a, deg);
                     return to_host({g.indptr, g.indices, g.values});
                   },
                   0, 0});
  cases.push_back({"mean_edge_weights", [](Device d) {
                     const auto a =
                         kernels::SparseMatrix::from_csr(test::random_csr(80, 60, 9, false, 6), d);
                     Tensor values = Tensor::empty({a.nnz()}, DType::f32, d);
                     kernels::mean_edge_weights(a, values);
                     return to_host({values});
                   }});
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      cases.push_back({std::string("gemm.") + (ta ? "T" : "N") + (tb ? "T" : "N"),
                       [ta, tb](Device d) {
                         const std::int64_t m = 33, n = 17, k = 65;
                         const Tensor a = test::random_tensor(ta ? std::vector<std::int64_t>{k, m}
                                                                 : std::vector<std::int64_t>{m, k},
                                                              1)
                                              .to(d);
                         const Tensor b = test::random_tensor(tb ? std::vector<std::int64_t>{n, k}
                                                                 : std::vector<std::int64_t>{k, n},
                                                              2)
                                              .to(d);
                         Tensor c = test::random_tensor({m, n}, 3).to(d);
                         kernels::gemm(a, ta, b, tb, c, 0.75f, 0.5f);
                         return to_host({c});
                       },
                       1e-4, 1e-5});
  for (const std::int64_t f : {19, 24}) // 24: the CUDA twin's float4 bias path
    cases.push_back({"add_bias+column_sums.F" + std::to_string(f),
                     [f](Device d) {
                       Tensor y = test::random_tensor({3000, f}, 1).to(d);
                       const Tensor bias = test::random_tensor({f}, 2).to(d);
                       kernels::add_bias(y, bias);
                       Tensor sums = test::random_tensor({f}, 3).to(d);
                       kernels::column_sums(y, sums, true);
                       return to_host({y, sums});
                     },
                     1e-5, 1e-4});
  for (DType index_type : {DType::i32, DType::i64})
    cases.push_back({std::string("gather+scatter_add.") + dtype_name(index_type),
                     [index_type](Device d) {
                       const Tensor src = test::random_tensor({50, 33}, 1).to(d);
                       std::vector<std::int64_t> idx(70);
                       for (int i = 0; i < 70; ++i)
                         idx[i] = (i * 13) % 50; // repeats
                       Tensor index = index_type == DType::i64
                                          ? Tensor::from_vector(idx)
                                          : Tensor::from_vector(
                                                std::vector<std::int32_t>(idx.begin(), idx.end()));
                       index = index.to(d);
                       Tensor packed = Tensor::empty({70, 33}, DType::f32, d);
                       kernels::gather_rows(src, index, packed);
                       Tensor out = test::random_tensor({50, 33}, 2).to(d);
                       kernels::scatter_add_rows(packed, index, out);
                       return to_host({packed, out});
                     },
                     1e-5, 1e-5});
  for (DType index_type : {DType::i32, DType::i64})
    cases.push_back({std::string("scatter_add_rows_segmented.") + dtype_name(index_type),
                     [index_type](Device d) {
                       // Three segments (peers) that each name a row at most once, but the same
                       // rows across segments: the sums have a fixed order, so results are
                       // compared bit for bit.
                       const std::vector<std::int64_t> segments{40, 0, 25, 33};
                       std::vector<std::int64_t> idx;
                       for (std::int64_t s = 0, k = 0; s < 4; ++s)
                         for (std::int64_t i = 0; i < segments[s]; ++i, ++k)
                           idx.push_back((i * 7 + s * 3) % 45);
                       Tensor index = index_type == DType::i64
                                          ? Tensor::from_vector(idx)
                                          : Tensor::from_vector(
                                                std::vector<std::int32_t>(idx.begin(), idx.end()));
                       index = index.to(d);
                       const Tensor src = test::random_tensor({98, 37}, 5).to(d);
                       Tensor out = test::random_tensor({45, 37}, 6).to(d);
                       kernels::scatter_add_rows_segmented(src, index, segments, out);
                       return to_host({out});
                     },
                     0, 0});
  cases.push_back({"relu",
                   [](Device d) {
                     const Tensor x = test::random_tensor({40, 21}, 1).to(d);
                     Tensor y = Tensor::empty({40, 21}, DType::f32, d);
                     kernels::relu_forward(x, y);
                     const Tensor g = test::random_tensor({40, 21}, 2).to(d);
                     Tensor gx = Tensor::empty({40, 21}, DType::f32, d);
                     kernels::relu_backward(g, y, gx);
                     return to_host({y, gx});
                   },
                   0, 0});
  // Bit for bit: the same draws, +0 where dropped, one multiply where kept. 32: the CUDA twin's
  // 8-column fast path.
  for (const std::int64_t f : {23, 32})
    cases.push_back({"dropout.F" + std::to_string(f),
                     [f](Device d) {
                       const Tensor x = test::random_tensor({64, f}, 1).to(d);
                       std::vector<NodeId> ids(64);
                       for (int i = 0; i < 64; ++i)
                         ids[i] = 5000 - 3 * i;
                       const rng::Key key{9, rng::Stream::dropout, 1, 2, 3};
                       Tensor y = Tensor::empty({64, f}, DType::f32, d);
                       Tensor mask = Tensor::empty({64, (f + 7) / 8}, DType::u8, d);
                       kernels::dropout_forward(x, ids, key, 0.4f, y, mask);
                       const Tensor g = test::random_tensor({64, f}, 2).to(d);
                       Tensor gx = Tensor::empty({64, f}, DType::f32, d);
                       kernels::dropout_backward(g, mask, 0.4f, gx);
                       return to_host({y, mask, gx});
                     },
                     0, 0});
  cases.push_back({"dropout.device_ids",
                   [](Device d) {
                     // Ids as a tensor on the device: the same masks as the host-span form.
                     const Tensor x = test::random_tensor({64, 23}, 1).to(d);
                     std::vector<NodeId> ids(64);
                     for (int i = 0; i < 64; ++i)
                       ids[i] = 5000 - 3 * i;
                     const rng::Key key{9, rng::Stream::dropout, 1, 2, 3};
                     Tensor y = Tensor::empty({64, 23}, DType::f32, d);
                     Tensor mask = Tensor::empty({64, 3}, DType::u8, d);
                     kernels::dropout_forward(x, Tensor::from_vector(ids).to(d), key, 0.4f, y,
                                              mask);
                     Tensor y_span = Tensor::empty({64, 23}, DType::f32, d);
                     Tensor mask_span = Tensor::empty({64, 3}, DType::u8, d);
                     kernels::dropout_forward(x, ids, key, 0.4f, y_span, mask_span);
                     return to_host({y, mask, y_span, mask_span});
                   },
                   0, 0});
  // 32, 128 and 256 columns take the CUDA twin's 32-column path; p = 0.5 reads one level.
  for (const float p : {0.0f, 0.4f, 0.5f})
    for (const std::int64_t f : {5, 16, 23, 32, 128, 256}) {
      cases.push_back({"relu_dropout.p" + std::to_string(p) + ".F" + std::to_string(f),
                       [p, f](Device d) {
                         // Host-span and device ids, in place; the backward from the bits alone;
                         // the maskless dropout.
                         const Tensor x = test::random_tensor({64, f}, 1, -1, 1).to(d);
                         std::vector<NodeId> ids(64);
                         for (int i = 0; i < 64; ++i)
                           ids[i] = 7000 - 5 * i;
                         const rng::Key key{9, rng::Stream::dropout, 1, 2, 3};
                         Tensor y = x.clone();
                         Tensor bits = Tensor::empty({64, (f + 7) / 8}, DType::u8, d);
                         kernels::relu_dropout_forward(y, ids, key, p, y, bits);
                         Tensor y_ids = Tensor::empty({64, f}, DType::f32, d);
                         Tensor bits_ids = Tensor::empty({64, (f + 7) / 8}, DType::u8, d);
                         kernels::relu_dropout_forward(x, Tensor::from_vector(ids).to(d), key, p,
                                                       y_ids, bits_ids);
                         const Tensor g = test::random_tensor({64, f}, 2).to(d);
                         Tensor gx = Tensor::empty({64, f}, DType::f32, d);
                         kernels::relu_dropout_backward(g, bits, p, gx);
                         Tensor plain = Tensor::empty({64, f}, DType::f32, d), no_mask;
                         kernels::dropout_forward(x, ids, key, 0.4f, plain, no_mask);
                         Tensor dropped = Tensor::empty({64, f}, DType::f32, d);
                         Tensor mask = Tensor::empty({64, (f + 7) / 8}, DType::u8, d);
                         kernels::dropout_forward(x, ids, key, p, dropped, mask);
                         return to_host({y, bits, y_ids, bits_ids, gx, plain, dropped, mask});
                       },
                       0, 0});
    }
  cases.push_back({"normalize_rows+axpy",
                   [](Device d) {
                     Tensor x = test::random_tensor({30, 45}, 1).to(d);
                     kernels::normalize_rows(x);
                     Tensor y = test::random_tensor({30, 45}, 2).to(d);
                     kernels::axpy(-0.5f, x, y);
                     return to_host({x, y});
                   },
                   1e-5, 1e-7});
  cases.push_back({"softmax_cross_entropy+count_correct",
                   [](Device d) {
                     const Tensor logits = test::random_tensor({100, 9}, 1, -3, 3).to(d);
                     std::vector<LocalId> rows;
                     std::vector<std::int64_t> labels;
                     for (int i = 0; i < 100; i += 3) {
                       rows.push_back(i);
                       labels.push_back(i % 9);
                     }
                     Tensor grad = Tensor::empty({100, 9}, DType::f32, d);
                     const double loss =
                         kernels::softmax_cross_entropy(logits, rows, labels, 0.1, grad);
                     const auto correct = kernels::count_correct(logits, rows, labels);
                     return to_host({grad, scalar(loss), scalar(static_cast<double>(correct))});
                   },
                   1e-6, 1e-7});
  // The recurrent cells' gate arithmetic: a ragged row count and a hidden width that is not a
  // multiple of a warp, inputs wide enough to saturate the sigmoids and tanh.
  for (std::int64_t h : {1, 5, 32, 45})
    cases.push_back({"gru_cell.H" + std::to_string(h),
                     [h](Device d) {
                       const std::int64_t n = 67;
                       const Tensor gi = test::random_tensor({n, 3 * h}, 1, -4, 4).to(d);
                       const Tensor gh = test::random_tensor({n, 3 * h}, 2, -4, 4).to(d);
                       const Tensor hp = test::random_tensor({n, h}, 3).to(d);
                       auto block = [&] { return Tensor::empty({n, h}, DType::f32, d); };
                       Tensor r = block(), z = block(), ng = block(), hn = block(), out = block();
                       kernels::gru_cell_forward(gi, gh, hp, r, z, ng, hn, out);
                       const Tensor g = test::random_tensor({n, h}, 4).to(d);
                       Tensor dgi = Tensor::empty({n, 3 * h}, DType::f32, d);
                       Tensor dgh = Tensor::empty({n, 3 * h}, DType::f32, d);
                       Tensor dh = block();
                       kernels::gru_cell_backward(g, hp, r, z, ng, hn, dgi, dgh, dh);
                       return to_host({r, z, ng, hn, out, dgi, dgh, dh});
                     },
                     1e-5, 1e-6});
  for (std::int64_t h : {1, 5, 32, 45})
    for (bool with_grad_c : {false, true})
      cases.push_back(
          {"lstm_cell.H" + std::to_string(h) + (with_grad_c ? ".grad_c" : ".no_grad_c"),
           [h, with_grad_c](Device d) {
             const std::int64_t n = 67;
             Tensor gates = test::random_tensor({n, 4 * h}, 1, -4, 4).to(d);
             const Tensor c = test::random_tensor({n, h}, 2, -2, 2).to(d);
             Tensor c2 = Tensor::empty({n, h}, DType::f32, d);
             Tensor h2 = Tensor::empty({n, h}, DType::f32, d);
             kernels::lstm_cell_forward(gates, c, c2, h2);
             const Tensor gh = test::random_tensor({n, h}, 3).to(d);
             const Tensor gc = with_grad_c ? test::random_tensor({n, h}, 4).to(d) : Tensor();
             Tensor dpre = Tensor::empty({n, 4 * h}, DType::f32, d);
             Tensor dc = Tensor::empty({n, h}, DType::f32, d);
             kernels::lstm_cell_backward(gh, gc, gates, c, c2, dpre, dc);
             return to_host({gates, c2, h2, dpre, dc});
           },
           1e-5, 1e-6});
  cases.push_back({"squared_error",
                   [](Device d) {
                     const Tensor pred = test::random_tensor({301, 1}, 1, -2, 2).to(d);
                     const Tensor target = test::random_tensor({301}, 2, -2, 2).to(d);
                     Tensor grad = Tensor::empty({301, 1}, DType::f32, d);
                     const double with_grad = kernels::squared_error(pred, target, 0.25, &grad);
                     const double without = kernels::squared_error(pred, target, 0.25, nullptr);
                     return to_host({grad, scalar(with_grad), scalar(without)});
                   },
                   1e-6, 1e-7});
  cases.push_back(
      {"binary_cross_entropy",
       [](Device d) {
         // Scores far into both tails (softplus and sigmoid without overflow).
         std::vector<float> s, y;
         for (int j = 0; j < 500; ++j) {
           s.push_back(static_cast<float>((j % 41) - 20) * (j % 7 == 0 ? 15.0f : 0.37f));
           y.push_back(j % 3 == 0 ? 1.0f : 0.0f);
         }
         const Tensor scores = Tensor::from_vector(s).to(d);
         const Tensor labels = Tensor::from_vector(y).to(d);
         Tensor grad = Tensor::empty({500}, DType::f32, d);
         const double loss = kernels::binary_cross_entropy(scores, labels, 0.1, &grad);
         return to_host({grad, scalar(loss),
                         scalar(kernels::binary_cross_entropy(scores, labels, 1.0, nullptr))});
       },
       1e-6, 1e-7});
  for (std::int64_t h : {1, 16, 45, 128})
    cases.push_back({"link_scores.H" + std::to_string(h),
                     [h](Device d) {
                       // Pairs sharing rows (and one self pair), so grad_z sums over several
                       // pairs per row.
                       const std::int64_t rows = 40, pairs = 900;
                       std::vector<LocalId> src, dst;
                       for (std::int64_t j = 0; j < pairs; ++j) {
                         src.push_back(static_cast<LocalId>((j * 7) % rows));
                         dst.push_back(
                             static_cast<LocalId>(j == 5 ? (j * 7) % rows : (j * 13 + 3) % rows));
                       }
                       const Tensor z = test::random_tensor({rows, h}, 1).to(d);
                       const Tensor w = test::random_tensor({h, 1}, 2).to(d);
                       const Tensor b = Tensor::from_vector(std::vector<float>{0.25f}).to(d);
                       const Tensor s_ids = Tensor::from_vector(src).to(d);
                       const Tensor d_ids = Tensor::from_vector(dst).to(d);
                       Tensor scores = Tensor::empty({pairs}, DType::f32, d);
                       kernels::link_scores(z, s_ids, d_ids, w, b, scores);
                       const Tensor g = test::random_tensor({pairs}, 3).to(d);
                       Tensor gz = test::random_tensor({rows, h}, 4).to(d); // accumulates
                       Tensor gw = test::random_tensor({h, 1}, 5).to(d);
                       Tensor gb = Tensor::from_vector(std::vector<float>{1.5f}).to(d);
                       kernels::link_scores_backward(z, s_ids, d_ids, w, g, gz, gw, gb);
                       return to_host({scores, gz, gw, gb});
                     },
                     1e-4, 1e-5});
  cases.push_back({"adam+sgd",
                   [](Device d) {
                     Tensor p = test::random_tensor({10, 7}, 1).to(d);
                     const Tensor g = test::random_tensor({10, 7}, 2).to(d);
                     Tensor m = Tensor::zeros({10, 7}, DType::f32, d),
                            v = Tensor::zeros({10, 7}, DType::f32, d);
                     for (int t = 1; t <= 3; ++t)
                       kernels::adam_update(p, g, m, v, {0.01f, 0.9f, 0.999f, 1e-8f, 5e-4f, t});
                     Tensor q = test::random_tensor({10, 7}, 3).to(d);
                     Tensor buf = Tensor::zeros({10, 7}, DType::f32, d);
                     for (int t = 1; t <= 3; ++t)
                       kernels::sgd_update(q, g, buf, 0.1f, 0.9f, 1e-3f);
                     return to_host({p, m, v, q, buf});
                   },
                   1e-5, 1e-6});
  // The row codecs write the same bytes on every backend (exact), and decode them alike.
  for (const auto codec : {kernels::RowCodec::bf16, kernels::RowCodec::f16, kernels::RowCodec::int8})
    for (const std::int64_t f : {1, 7, 16, 130}) {
      cases.push_back({std::string("row_codec.") + kernels::row_codec_name(codec) + ".F" +
                           std::to_string(f),
                       [codec, f](Device d) {
                         Tensor x = test::random_tensor({50, f}, 4, -3, 3);
                         x.data<float>()[0] = 7e4f;   // beyond f16's range
                         x.data<float>()[f] = 1e-6f;  // an f16 subnormal (row 1, or row 0)
                         const Tensor xd = x.to(d);
                         Tensor wire = Tensor::empty(
                             {50, kernels::row_codec_bytes(codec, f)}, DType::u8, d);
                         kernels::encode_rows(xd, codec, wire);
                         Tensor back = Tensor::empty({50, f}, DType::f32, d);
                         kernels::decode_rows(wire, codec, back);
                         return to_host({wire, back});
                       },
                       0, 0});
    }
  return cases;
}

TEST(Backends, EveryOpRunsOnCpuAndMatchesOnCuda) {
  const bool has_cuda = device_memory::cuda_available();
  if (!has_cuda)
    std::fprintf(stderr,
                 "[backend test] no CUDA device visible: every op ran on the CPU only; the CPU vs "
                 "CUDA comparison was NOT run\n");
  for (const auto& op : all_cases()) {
    SCOPED_TRACE(op.name);
    const auto cpu_outputs = op.run(Device::cpu());
    ASSERT_FALSE(cpu_outputs.empty());
    if (!has_cuda) continue;
    const auto cuda_outputs = op.run(Device::cuda(0));
    ASSERT_EQ(cuda_outputs.size(), cpu_outputs.size());
    for (std::size_t i = 0; i < cpu_outputs.size(); ++i)
      EXPECT_TRUE(test::tensors_close(cuda_outputs[i], cpu_outputs[i], op.rtol, op.atol))
          << op.name << " output " << i;
  }
}

} // namespace
} // namespace tessel
