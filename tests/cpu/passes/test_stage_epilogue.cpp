// The staged epilogue (EPILOGUE=smem, k:054): every pass's output runs on the CPU
// interpreter against the naive Loop IR for the mma atoms and SIMT, ragged and aligned
// shapes, transposed operands, fused bias/activation, batch, symbolic sizes and tiles
// wider than the output. Then what k:054 leaves: the tile's shape, overlay and layout,
// the copy's widths and guards, conflict-free banks by the model, the barriers the
// interpreter insists on, and the kernels it refuses or leaves alone.
#include <gtest/gtest.h>

#include "frontend/parser.h"
#include "ir/error.h"
#include "ir/interpreter.h"
#include "pass_check.h"
#include "passes/pipeline.h"
#include "passes/bank_conflicts.h"

namespace loom {
namespace {

// The staging tile k:054 declared (the shared tensor named `<out>_s`), or null.
const TensorDecl* staging_tile(const KernelProgram& p, const std::string& out = "out") {
  for (const TensorDecl& t : p.tensors)
    if (t.name == out + "_s" && t.role == TensorRole::Shared) return &t;
  return nullptr;
}

// The copy-out loop's global store (the Write to `out` inside the `epilogue.store` loop).
const Stmt* copy_store(const KernelOp& k, const std::string& out = "out") {
  const Stmt* found = nullptr;
  walk(k.body, [&](const Stmt& s) {
    if (s.kind == StmtKind::For && s.axis == "epilogue.store")
      walk(s.body, [&](const Stmt& w) {
        if (w.kind == StmtKind::Write && w.tensor == out) found = &w;
      });
  });
  return found;
}

// Every pass's output matches the naive program, and k:054 staged the kernel.
CompileState check_case(const std::string& expr, const std::string& knobs, uint64_t seed,
                        const std::map<std::string, int64_t>& sizes = {},
                        const std::string& out = "out") {
  SCOPED_TRACE(expr + " knobs=" + knobs);
  CompileState s = passcheck::check_every_pass(expr, Knobs::parse(knobs + ",EPILOGUE=smem"),
                                               seed, sizes);
  EXPECT_NE(staging_tile(s.kernel, out), nullptr) << print(s.kernel);
  return s;
}

TEST(StageEpilogue, MmaEveryPassMatchesTheNaiveLoopIr) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      // Ragged in M, N and K like 1000x333x777, odd N: scalar copies.
      {"matmul(A[100,37]:f16, B[37,77]:f16)", "ATOM=mma_f16,WM=2,WN=2,FM=2,FN=2,BK=16,STAGE=cp_async,STAGES=3"},
      // N even but not a multiple of 8: 4-byte copies; pipeline off, one ring buffer.
      {"matmul(A[70,40]:f16, B[40,70]:f16)", "ATOM=mma_f16,WM=2,WN=1,FM=2,FN=2,BK=16,STAGE=cp_async,STAGES=1"},
      // Both operands transposed, sync staging with register double buffering.
      {"matmul(A[37,100]:f16.T, B[72,37]:f16.T)", "ATOM=mma_f16,WM=2,WN=2,FM=1,FN=2,BK=16,STAGE=sync,STAGES=2"},
      // bias + relu in fragment order, bf16, f32 bias.
      {"relu(add(matmul(A[100,40]:bf16, B[72,40]:bf16.T), bias[72]:f32))", "ATOM=mma_bf16,WM=2,WN=2,FM=2,FN=2,BK=16,STAGE=cp_async,STAGES=2"},
      // linear + gelu, element-wise fragments, fragment double buffering.
      {"gelu(linear(X[33,64]:f16, W[40,64]:f16, bias[40]:f16))", "ATOM=mma_f16,LDMATRIX=0,FRAG_BUFFERS=2,WM=1,WN=2,FM=2,FN=1,BK=32,STAGE=sync"},
      // Batch, residual, f32 output of f16 inputs.
      {"add(bmm(A[3,40,24]:f16, B[3,24,48]:f16, out=f32), R[3,40,48]:f32)", "ATOM=mma_f16,WM=1,WN=2,FM=2,FN=2,BK=16,STAGE=cp_async,STAGES=2"},
      // tf32: f32 tile, 16-byte copies of 4 floats.
      {"matmul(A[50,24]:tf32, B[24,40]:tf32)", "ATOM=mma_tf32,WM=2,WN=1,FM=1,FN=2,BK=8,STAGE=sync"},
      // Rasterized grid.
      {"matmul(A[96,32]:f16, B[32,64]:f16)", "ATOM=mma_f16,WM=1,WN=1,FM=2,FN=2,BK=16,STAGE=sync,GROUP_M=2"},
      // A tile wider than the output: with N = 16 the step n_w * 16 is a multiple of N,
      // and only the column guard says it is a column.
      {"matmul(A[40,24]:f16, B[24,16]:f16)", "ATOM=mma_f16,WM=2,WN=2,FM=1,FN=2,BK=16,STAGE=sync"},
      {"matmul(A[40,24]:bf16, B[24,8]:bf16)", "ATOM=mma_bf16,WM=1,WN=2,FM=1,FN=2,BK=16,STAGE=sync"},
  };
  for (size_t i = 0; i < cases.size(); ++i) check_case(cases[i].first, cases[i].second, 5400 + i);
}

TEST(StageEpilogue, SymbolicSizesEveryPassMatchesTheNaiveLoopIr) {
  CompileState s = check_case("bmm(A[2,M,K]:f16, B[2,K,N]:f16)",
                              "ATOM=mma_f16,WM=2,WN=1,FM=1,FN=2,BK=16,STAGE=cp_async,STAGES=2", 5420,
                              {{"M", 37}, {"N", 40}, {"K", 20}});
  // A symbolic row stride proves no alignment: one element per copy.
  const Stmt* st = copy_store(s.kernel.kernels.at(0));
  ASSERT_NE(st, nullptr);
  EXPECT_EQ(st->width, 1);
}

TEST(StageEpilogue, SimtEveryPassMatchesTheNaiveLoopIr) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"matmul(A[70,45]:f32, B[45,66]:f32)", "BM=32,BN=32,FM=4,FN=4,BK=8,STAGE=sync,STAGES=2"},
      {"relu(add(matmul(A[70,45]:f32, B[45,64]:f32), bias[64]:f32))", "BM=32,BN=32,FM=2,FN=4,BK=8,STAGE=cp_async,STAGES=3"},
      // Warp tier, f16 output of a fused linear.
      {"gelu(linear(X[33,20]:f16, W[24,20]:f16, bias[24]:f16))", "BM=32,BN=32,FM=2,FN=2,WM=4,WN=2,BK=8,STAGE=sync"},
      // No shared memory in the mainloop: the tile is the kernel's only shared tensor.
      {"matmul(A[20,12]:f32, B[12,36]:f32)", "BM=16,BN=16,FM=2,FN=2,STAGE=direct"},
      // TMA staging (mbarriers after the union).
      {"matmul(A[64,64]:f32, B[64,64]:f32)", "BM=32,BN=32,FM=4,FN=4,BK=32,STAGE=tma,STAGES=2"},
  };
  for (size_t i = 0; i < cases.size(); ++i) check_case(cases[i].first, cases[i].second, 5430 + i);
}

// SPLITK_MODE=reduce: the split GEMM's partial sums go through a tile (its output is the
// temp `partial`); the splitk_reduce kernel, which multiplies nothing, keeps its stores.
TEST(StageEpilogue, SplitKReduceStagesTheSplitGemmOnly) {
  CompileState s = check_case("matmul(A[16,256]:f32, B[256,24]:f32)",
                              "BM=16,BN=16,FM=2,FN=2,BK=16,STAGE=sync,SPLITK=2,SPLITK_MODE=reduce",
                              5440, {}, "partial");
  ASSERT_EQ(s.kernel.kernels.size(), 2u);
  EXPECT_NE(copy_store(s.kernel.kernels[0], "partial"), nullptr);
  EXPECT_EQ(copy_store(s.kernel.kernels[1]), nullptr);
}

// `e` with every constant `from` replaced by `to`.
Expr replace_const(const Expr& e, int64_t from, int64_t to) {
  if (e.is_const()) return e.const_value() == from ? Expr(to) : e;
  if (e.is_var()) return e;
  return Expr::make(e.kind(), replace_const(e.lhs(), from, to), replace_const(e.rhs(), from, to));
}

// The mma default tile (128 x 128, 2 x 2 warps of 4 x 8 atoms) of an aligned f16 GEMM:
// an f16 tile of the whole block inside the mainloop's bytes, 16-byte copies, no guards,
// and no bank conflicts on either side of the tile by the model.
TEST(StageEpilogue, MmaDefaultTileLayoutWidthAndBanks) {
  CompileState s =
      passcheck::compile_sm90a("matmul(A[256,256]:f16, B[256,256]:f16)",
                               "WM=2,WN=2,FM=4,FN=8,BK=32,STAGE=cp_async,STAGES=3,PAD_SMEM=8,"
                               "VECTORIZE=8,ATOM=mma_f16,EPILOGUE=smem");
  const KernelOp& k = s.kernel.kernels.at(0);
  const TensorDecl* tile = staging_tile(s.kernel);
  ASSERT_NE(tile, nullptr);
  EXPECT_EQ(tile->dtype, DType::F16);
  EXPECT_EQ(tile->shape[0].const_value(), 128);
  EXPECT_EQ(tile->shape[1].const_value(), 128);
  EXPECT_EQ(tile->overlay, 1);
  const SharedLayout l = shared_layout(s.kernel, k);
  EXPECT_EQ(l.offset_bytes.at(tile->name), 0);
  // The tile (128 rows of 128 + pad f16) fits in the slabs: the block does not grow.
  EXPECT_LE(l.part_bytes.at(1), l.part_bytes.at(0));
  EXPECT_EQ(l.total_bytes, l.part_bytes.at(0));
  const Stmt* st = copy_store(k);
  ASSERT_NE(st, nullptr);
  EXPECT_EQ(st->width, 8);
  const std::string ir = print(s.kernel);
  EXPECT_EQ(ir.find("if out_s_e"), std::string::npos) << "aligned shapes need no copy guard\n" << ir;
  int accesses = 0;
  for (const SharedAccessReport& r : bank_conflicts(s.kernel, k)) {
    if (r.tensor != tile->name) continue;
    ++accesses;
    EXPECT_EQ(r.wavefronts, r.ideal) << r.stmt;
  }
  EXPECT_EQ(accesses, 3) << "two fragment stores (rows g, g + 8) and the copy's load";

  // The model sees what the layout buys: the same tile unpadded (row stride 128 in every
  // offset) puts the 8 rows of a fragment store into one bank group.
  ASSERT_EQ(tile->pad, 8);
  KernelProgram plain = s.kernel;
  plain.tensor(tile->name).pad = 0;
  walk(plain.kernels[0].body, [&](Stmt& st) {
    if (st.tensor == tile->name) st.index[0] = replace_const(st.index[0], 136, 128);
  });
  bool conflicted = false;
  for (const SharedAccessReport& r : bank_conflicts(plain, plain.kernels[0]))
    conflicted |= r.tensor == tile->name && r.wavefronts > r.ideal;
  EXPECT_TRUE(conflicted) << "a layout search that changes nothing is not tested";
}

// The fused ops run before the tile, on the same values in the same order: staging
// changes where a value goes, never what it is. The mma default tile (4 x 8 atoms per
// warp, one ragged 128 x 128 block and its neighbours) and a SIMT tile.
TEST(StageEpilogue, StagedResultsAreBitForBitTheDirectOnes) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"relu(add(matmul(A[136,40]:f16, B[40,130]:f16), bias[130]:f32))",
       "WM=2,WN=2,FM=4,FN=8,BK=32,STAGE=cp_async,STAGES=3,PAD_SMEM=8,VECTORIZE=8,ATOM=mma_f16"},
      {"gelu(linear(X[70,33]:bf16, W[66,33]:bf16, bias[66]:bf16))",
       "BM=32,BN=32,FM=4,FN=4,BK=8,STAGE=sync,STAGES=2"},
  };
  for (const auto& [e, kn] : cases) {
    SCOPED_TRACE(e);
    CompileState direct = passcheck::compile_sm90a(e, kn + ",EPILOGUE=direct");
    CompileState staged = passcheck::compile_sm90a(e, kn + ",EPILOGUE=smem");
    ASSERT_NE(staging_tile(staged.kernel), nullptr);
    Bindings in;
    make_random_inputs(direct.kernel, in, 54);
    Bindings a = in, b = in;
    interpret(direct.kernel, a);
    interpret(staged.kernel, b);
    EXPECT_EQ(a.tensors.at("out").data, b.tensors.at("out").data);
  }
}

// The chosen layout is conflict-free for the shapes the mma path produces: f16 and f32
// tiles, wide and narrow rows (a narrow one needs a swizzle: padding cannot keep both
// the fragment rows and a quarter-warp that spans two rows apart).
TEST(StageEpilogue, ChosenLayoutsAreConflictFree) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"matmul(A[128,64]:f16, B[64,128]:f16)", "ATOM=mma_f16,WM=2,WN=2,FM=2,FN=4,BK=32,STAGE=sync"},
      {"matmul(A[128,64]:f16, B[64,128]:f16)", "ATOM=mma_f16,WM=2,WN=2,FM=2,FN=2,BK=32,STAGE=sync"},
      {"matmul(A[128,64]:bf16, B[64,128]:bf16, out=f32)", "ATOM=mma_bf16,WM=2,WN=2,FM=2,FN=4,BK=32,STAGE=sync"},
      {"matmul(A[128,64]:tf32, B[64,128]:tf32)", "ATOM=mma_tf32,WM=2,WN=2,FM=2,FN=4,BK=32,STAGE=sync"},
      {"matmul(A[128,64]:f32, B[64,128]:f32)", "BM=64,BN=64,FM=4,FN=4,BK=16,STAGE=sync"},
  };
  for (const auto& [e, kn] : cases) {
    SCOPED_TRACE(e + " " + kn);
    CompileState s = passcheck::compile_sm90a(e, kn + ",EPILOGUE=smem");
    const TensorDecl* tile = staging_tile(s.kernel);
    ASSERT_NE(tile, nullptr);
    for (const SharedAccessReport& r : bank_conflicts(s.kernel, s.kernel.kernels.at(0)))
      if (r.tensor == tile->name) {
        EXPECT_EQ(r.wavefronts, r.ideal) << r.stmt;
      }
  }
}

// The copy is as wide as the output's row stride proves: 16 bytes, or narrower.
TEST(StageEpilogue, CopyWidthFollowsTheProvableAlignment) {
  const std::string k = "WM=2,WN=1,FM=1,FN=2,BK=16,STAGE=sync,EPILOGUE=smem,ATOM=";
  const std::vector<std::tuple<std::string, std::string, int>> cases = {
      {"matmul(A[40,16]:f16, B[16,72]:f16)", "mma_f16", 8},
      {"matmul(A[40,16]:f16, B[16,70]:f16)", "mma_f16", 2},
      {"matmul(A[40,16]:f16, B[16,77]:f16)", "mma_f16", 1},
      {"matmul(A[40,16]:tf32, B[16,40]:tf32)", "mma_tf32", 4},
      {"matmul(A[40,16]:bf16, B[16,36]:bf16, out=f32)", "mma_bf16", 4},
  };
  for (const auto& [e, atom, width] : cases) {
    SCOPED_TRACE(e);
    CompileState s = passcheck::compile_sm90a(e, k + atom);
    const Stmt* st = copy_store(s.kernel.kernels.at(0));
    ASSERT_NE(st, nullptr);
    EXPECT_EQ(st->width, width);
  }
}

// Guards where the direct stores had them: rows for a ragged M, columns for a ragged N.
TEST(StageEpilogue, CopyGuardsFollowTheDirectStores) {
  const std::string k = ",ATOM=mma_f16,WM=2,WN=1,FM=1,FN=2,BK=16,STAGE=sync,EPILOGUE=smem";
  auto guard_of = [&](const std::string& e) {
    CompileState s = passcheck::compile_sm90a(e, k);
    std::string cond;
    walk(s.kernel.kernels.at(0).body, [&](const Stmt& st) {
      if (st.kind == StmtKind::For && st.axis == "epilogue.store")
        for (const Stmt& b : st.body)
          if (b.kind == StmtKind::If) cond = b.cond.str();
    });
    return cond;
  };
  EXPECT_EQ(guard_of("matmul(A[64,16]:f16, B[16,32]:f16)"), "");
  EXPECT_EQ(guard_of("matmul(A[40,16]:f16, B[16,32]:f16)"), "out_s_e / 2 < 40 - m_b * 32");
  EXPECT_EQ(guard_of("matmul(A[64,16]:f16, B[16,24]:f16)"), "out_s_e % 2 * 8 < 24 - n_b * 16");
  EXPECT_EQ(guard_of("matmul(A[40,16]:f16, B[16,24]:f16)"),
            "out_s_e / 2 < 40 - m_b * 32 && out_s_e % 2 * 8 < 24 - n_b * 16");
}

// A staged epilogue needs both barriers: the mainloop's slabs die before the tile is
// written over them, and the tile is whole before it is copied out. Without either the
// interpreter reports the race.
TEST(StageEpilogue, InterpreterCatchesAMissingBarrier) {
  const std::string e = "matmul(A[64,32]:f16, B[32,32]:f16)";
  const std::string kn = "ATOM=mma_f16,WM=2,WN=2,FM=1,FN=2,BK=16,STAGE=cp_async,STAGES=2,EPILOGUE=smem";
  CompileState s = passcheck::compile_sm90a(e, kn, "k:054_stage_epilogue");
  Bindings b;
  make_random_inputs(s.kernel, b, 7);
  {
    Bindings ok = b;
    EXPECT_NO_THROW(interpret(s.kernel, ok));
  }
  Block& body = s.kernel.kernels.at(0).body;
  std::vector<size_t> barriers;
  for (size_t i = 0; i < body.size(); ++i)
    if (body[i].kind == StmtKind::Barrier) barriers.push_back(i);
  ASSERT_EQ(barriers.size(), 2u) << print(s.kernel);
  for (size_t drop : barriers) {
    KernelProgram p = s.kernel;
    p.kernels[0].body.erase(p.kernels[0].body.begin() + long(drop));
    Bindings racy = b;
    EXPECT_THROW(interpret(p, racy), RaceError) << "without the barrier at " << drop;
  }
}

// Reading a slab after the tile took its bytes reads what is gone.
TEST(StageEpilogue, InterpreterForgetsTheSlabsTheTileTookOver) {
  CompileState s = passcheck::compile_sm90a(
      "matmul(A[32,16]:f16, B[16,16]:f16)",
      "ATOM=mma_f16,WM=1,WN=1,FM=2,FN=2,BK=16,STAGE=sync,EPILOGUE=smem", "k:054_stage_epilogue");
  KernelOp& k = s.kernel.kernels.at(0);
  k.body.push_back(Stmt::Barrier());
  k.body.push_back(Stmt::Load("late", "A_s", {Expr::var("threadIdx.x")}));
  Bindings b;
  make_random_inputs(s.kernel, b, 8);
  try {
    interpret(s.kernel, b);
    ADD_FAILURE() << "a read of A_s after out_s took its bytes passed";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("overlay out_s took over"), std::string::npos) << err.what();
  }
}

TEST(StageEpilogue, DirectLeavesKernelsAloneAndRecordsTheKnob) {
  CompileState s = passcheck::compile_sm90a("relu(matmul(A[40,16]:f16, B[16,24]:f16))",
                                            "ATOM=mma_f16,WM=2,WN=1,FM=1,FN=2,BK=16,STAGE=sync");
  EXPECT_EQ(staging_tile(s.kernel), nullptr);
  EXPECT_EQ(s.used_knobs.at("EPILOGUE"), "direct");
  walk(s.kernel.kernels.at(0).body, [](const Stmt& st) {
    EXPECT_FALSE(st.kind == StmtKind::For && st.axis == "epilogue.store");
  });
}

TEST(StageEpilogue, RefusalsNameTheReasonAndTheWayOut) {
  const std::string atomic =
      passcheck::error_of("matmul(A[16,256]:f32, B[256,16]:f32)",
                          "BM=16,BN=16,FM=2,FN=2,BK=16,SPLITK=2,SPLITK_MODE=atomic,EPILOGUE=smem");
  EXPECT_NE(atomic.find("atomically"), std::string::npos) << atomic;
  EXPECT_NE(atomic.find("SPLITK_MODE=reduce"), std::string::npos) << atomic;
  EXPECT_NE(atomic.find("EPILOGUE=direct"), std::string::npos) << atomic;
  // A 256 x 256 f32 tile (256 KiB) is more than any GPU's block may have.
  const std::string big = passcheck::error_of("matmul(A[256,64]:f32, B[64,256]:f32)",
                                              "BM=256,BN=256,FM=16,FN=16,BK=8,STAGE=sync,EPILOGUE=smem");
  EXPECT_NE(big.find("EPILOGUE=smem"), std::string::npos) << big;
  EXPECT_NE(big.find("B per block"), std::string::npos) << big;
  // A warp-specialized wgmma kernel stores from inside its consumers' arm: k:053 stages it
  // in its per-warpgroup strips (tests/cpu/passes/test_tma_store_epilogue.cpp), so this
  // pass leaves it (the strips' knobs on a kernel this pass stages are refused by the
  // driver: tests/cpu/driver/test_knob_scope.cpp).
  EXPECT_EQ(passcheck::error_of("matmul(A[256,128]:bf16, B[128,256]:bf16)",
                                "ATOM=wgmma_bf16,WM=2,WN=1,FM=1,FN=1,BN=128,BK=64,STAGE=tma,"
                                "STAGES=2,SWIZZLE=128B,WARP_SPECIALIZE=1,EPILOGUE=smem"),
            "");
}

}  // namespace
}  // namespace loom
