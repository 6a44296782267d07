// t:025_rasterize and the grid binding of k:010_bind_hardware: the grouped tile order is
// a bijection onto the output tiles that walks GROUP_M tiles down M first, programs
// compute the same answer with any GROUP_M (batch, split-K and symbolic sizes included),
// and the leading grid loops fold into blockIdx.z / y as documented.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <set>

#include "frontend/parser.h"
#include "ir/diff.h"
#include "ir/error.h"
#include "ir/interpreter.h"
#include "pass_check.h"
#include "passes/pipeline.h"

namespace loom {
namespace {

// The Lets at the top of the `tile` loop, evaluated for every tile index.
std::vector<std::pair<int64_t, int64_t>> tile_order(const TileOp& op, int64_t* count) {
  const Stmt* t = &op.body[0];
  while (t->var != "tile") t = &t->body[0];
  *count = t->extent.const_value();
  std::vector<std::pair<int64_t, int64_t>> order;
  for (int64_t i = 0; i < *count; ++i) {
    Expr::Env env{{"tile", i}};
    for (const Stmt& st : t->body)
      if (st.kind == StmtKind::Let) env[st.var] = st.value.eval(env);
    order.push_back({env.at("m_b"), env.at("n_b")});
  }
  return order;
}

TEST(Rasterize, GroupedOrderCoversEveryTileOnce) {
  // num_m = ceil(M/4) tiles down, num_n = ceil(N/4) across; groups of G rows.
  for (int64_t M : {4, 20, 28, 36}) {
    for (int64_t N : {4, 12, 32}) {
      for (int64_t G : {2, 3, 8, 64}) {
        std::string expr = "matmul(A[" + std::to_string(M) + ",8]:f32, B[8," +
                           std::to_string(N) + "]:f32)";
        CompileState s = passcheck::compile_sm90a(
            expr, "BM=4,BN=4,FM=1,FN=1,GROUP_M=" + std::to_string(G), "t:025_rasterize");
        int64_t num_m = (M + 3) / 4, num_n = (N + 3) / 4, count = 0;
        auto order = tile_order(s.tile.ops[0], &count);
        ASSERT_EQ(count, num_m * num_n) << expr;
        std::set<std::pair<int64_t, int64_t>> seen(order.begin(), order.end());
        EXPECT_EQ(int64_t(seen.size()), count) << expr << " G=" << G;
        for (auto [m, n] : order) {
          ASSERT_GE(m, 0);
          ASSERT_LT(m, num_m) << expr << " G=" << G;
          ASSERT_GE(n, 0);
          ASSERT_LT(n, num_n) << expr << " G=" << G;
        }
        // Within a group, consecutive tiles step down M; a group spans G rows (fewer
        // in the last group) and all of N.
        for (int64_t i = 0; i < count; ++i) {
          int64_t first = i / (G * num_n) * G, rows = std::min(G, num_m - first);
          int64_t r = i % (G * num_n);
          EXPECT_EQ(order[size_t(i)].first, first + r % rows) << i;
          EXPECT_EQ(order[size_t(i)].second, r / rows) << i;
        }
      }
    }
  }
}

TEST(Rasterize, TileLoopAndLetsInTheDiff) {
  std::string diff;
  CompileState s;
  s.graph = parse_expression("matmul(A[64,8]:f32, B[8,48]:f32)");
  s.knobs = Knobs::parse("BM=16,BN=16,FM=4,FN=4,GROUP_M=2");
  run_pipeline(s, "t:025_rasterize",
               [&](const Pass& p, const std::string& before, const std::string& after) {
                 if (p.id == "t:025_rasterize") diff = unified_diff(before, after);
               });
  EXPECT_NE(diff.find("-  for m_b in 0..4 grid  # m\n"), std::string::npos) << diff;
  EXPECT_NE(diff.find("+  for tile in 0..12 grid\n"), std::string::npos) << diff;
  EXPECT_NE(diff.find("+    let m_first = tile / 6 * 2\n"), std::string::npos) << diff;
  EXPECT_NE(diff.find("+    let m_rows = min(2, 4 - m_first)\n"), std::string::npos) << diff;
  EXPECT_NE(diff.find("+    let m_b = m_first + tile % 6 % m_rows\n"), std::string::npos) << diff;
  EXPECT_NE(diff.find("+    let n_b = tile % 6 / m_rows\n"), std::string::npos) << diff;
}

TEST(Rasterize, GroupM1IsRowMajorUnchanged) {
  const std::string expr = "bmm(A[2,40,8]:f32, B[2,8,24]:f32)";
  CompileState a = passcheck::compile_sm90a(expr, "BM=8,BN=8,FM=2,FN=2");
  CompileState b = passcheck::compile_sm90a(expr, "BM=8,BN=8,FM=2,FN=2,GROUP_M=1");
  EXPECT_EQ(print(a.kernel), print(b.kernel));
  std::string ir = print(a.kernel);
  EXPECT_NE(ir.find("grid(3, 5, 2)"), std::string::npos) << ir;
  EXPECT_NE(ir.find("let b = blockIdx.z\n"), std::string::npos) << ir;
  EXPECT_NE(ir.find("let m_b = blockIdx.y\n"), std::string::npos) << ir;
  EXPECT_NE(ir.find("let n_b = blockIdx.x\n"), std::string::npos) << ir;
}

TEST(Rasterize, TilesGoOnBlockIdxXAndLeadingLoopsFold) {
  // Rasterized, batch only: the tiles take x, the batch z.
  CompileState s =
      passcheck::compile_sm90a("bmm(A[5,40,8]:f32, B[5,8,24]:f32)", "BM=8,BN=8,GROUP_M=4");
  std::string ir = print(s.kernel);
  EXPECT_NE(ir.find("grid(15, 1, 5)"), std::string::npos) << ir;
  EXPECT_NE(ir.find("let tile = blockIdx.x\n"), std::string::npos) << ir;
  // The tile coordinates follow the blockIdx lets and precede the thread lets.
  size_t tile = ir.find("let tile"), mb = ir.find("let m_b"), mt = ir.find("let m_t");
  ASSERT_NE(mb, std::string::npos);
  EXPECT_LT(tile, mb);
  EXPECT_LT(mb, mt);

  // Rasterized with batch and split: y is free, the batch takes it, s takes z.
  s = passcheck::compile_sm90a("bmm(A[5,40,256]:f32, B[5,256,24]:f32)",
                               "BM=8,BN=8,GROUP_M=4,SPLITK=4");
  ir = print(s.kernel);
  EXPECT_NE(ir.find("grid(15, 5, 4)"), std::string::npos) << ir;
  EXPECT_NE(ir.find("let s = blockIdx.z\n"), std::string::npos) << ir;
  EXPECT_NE(ir.find("let b = blockIdx.y\n"), std::string::npos) << ir;

  // Not rasterized: m takes y, so batch and split share z.
  s = passcheck::compile_sm90a("bmm(A[5,40,256]:f32, B[5,256,24]:f32)", "BM=8,BN=8,SPLITK=4");
  ir = print(s.kernel);
  EXPECT_NE(ir.find("grid(3, 5, 20)"), std::string::npos) << ir;
  EXPECT_NE(ir.find("let s = blockIdx.z / 5\n"), std::string::npos) << ir;
  EXPECT_NE(ir.find("let b = blockIdx.z % 5\n"), std::string::npos) << ir;
}

TEST(Rasterize, GridLimitsAreErrors) {
  // 40000 batches x 2 splits = 80000 blocks along z.
  {
    const std::string e = passcheck::error_of("bmm(A[40000,4,64]:f32, B[40000,64,4]:f32)",
                                              "BM=4,BN=4,SPLITK=2,BK=16");
    ASSERT_NE(e, "") << "expected an error";
    EXPECT_NE(e.find("needs 80000 blocks along blockIdx.z (s x b); CUDA "
                     "allows 65535"),
              std::string::npos)
        << e;
  }
  // 70000 M tiles on y: rasterizing puts them on x instead.
  {
    const std::string e =
        passcheck::error_of("matmul(A[70000,4]:f32, B[4,4]:f32)", "BM=1,BN=4,FM=1,FN=1");
    ASSERT_NE(e, "") << "expected an error";
    EXPECT_NE(e.find("GROUP_M > 1"), std::string::npos) << e;
  }
  CompileState s = passcheck::compile_sm90a("matmul(A[70000,4]:f32, B[4,4]:f32)",
                                            "BM=1,BN=4,FM=1,FN=1,GROUP_M=8");
  EXPECT_EQ(s.kernel.kernels[0].grid[0].str(), "70000");
}

// Same answer with and without grouping, through every pass after t:025.
TEST(Rasterize, RandomShapesKeepTheirAnswer) {
  std::mt19937_64 rng(77);
  for (int trial = 0; trial < 25; ++trial) {
    int64_t M = 1 + int64_t(rng() % 40), N = 1 + int64_t(rng() % 40), K = 1 + int64_t(rng() % 12);
    bool batch = rng() % 2, symbolic = rng() % 2;
    std::string dims = symbolic ? "M,K" : std::to_string(M) + "," + std::to_string(K);
    std::string dims_b = symbolic ? "K,N" : std::to_string(K) + "," + std::to_string(N);
    std::string expr = batch ? "bmm(A[2," + dims + "]:f32, B[2," + dims_b + "]:f32)"
                             : "relu(matmul(A[" + dims + "]:f32, B[" + dims_b + "]:f32))";
    std::string knobs = "BM=4,BN=4,FM=2,FN=2,GROUP_M=" + std::to_string(1 + rng() % 6);
    SCOPED_TRACE(expr + " " + knobs);
    CompileState s;
    s.graph = parse_expression(expr);
    s.knobs = Knobs::parse(knobs);
    Bindings in;
    in.symbols = {{"M", M}, {"N", N}, {"K", K}};
    HostTensor want;
    for (const auto& p : pipeline()) {
      p.run(s);
      Bindings b = in;
      if (p.id == "l:000_lower_graph") {
        make_random_inputs(s.loop, in, 900 + uint64_t(trial));
        b = in;
        interpret(s.loop, b);
        want = b.tensors.at("out");
        continue;
      }
      if (p.to != Level::Kernel) continue;
      interpret(s.kernel, b);
      const HostTensor& got = b.tensors.at("out");
      ASSERT_EQ(got.data.size(), want.data.size());
      for (size_t i = 0; i < got.data.size(); ++i)
        ASSERT_NEAR(got.data[i], want.data[i], 1e-5 * std::max(1.0, std::fabs(want.data[i])))
            << "after " << p.id << " element " << i;
    }
  }
}

}  // namespace
}  // namespace loom
