// TMA stores on the interpreter (a box of shared memory written to global memory through
// a tensor map, clipped at the tensor's edges) with their bulk groups and proxy fence,
// and the chunked-row shared layout (TensorDecl::row_chunk) TMA boxes side by side make.
#include <cmath>

#include "hopper_kernels.h"

namespace loom {
namespace {

using namespace hopper;

// A 32-thread block stages X[16, 16] into Cs, then thread 0 stores it as two boxes of
// C[20, 24]: one at (8, 16) that hangs over the bottom and right edges, and the top-left
// 8 x 8 quarter-box at (-8, -8) that only its last rows and columns reach.
struct Store {
  bool fence = true;
  bool overwrite_before_wait = false;
  bool wait = true;
};

KernelProgram store_kernel(const Store& o) {
  KernelProgram p;
  p.tensors = {decl("X", DType::F32, {16, 16}, TensorRole::Input),
               decl("C", DType::F32, {20, 24}, TensorRole::Output),
               decl("Cs", DType::F32, {16, 16}, TensorRole::Shared)};
  KernelOp k;
  k.name = "k_store";
  k.params = {"X", "C"};
  k.block_threads = 32;
  k.tma = {TmaDescriptor{"C_tmap", "C", "Cs", {16, 16}, 0}};
  const Expr at = tid() + var("i") * 32;
  Block issue = {Stmt::TmaStore("Cs", Expr(0), "C", {Expr(8), Expr(16)}, "C_tmap"),
                 Stmt::TmaStore("Cs", Expr(0), "C", {Expr(-8), Expr(-8)}, "C_tmap"),
                 Stmt::BulkCommit()};
  if (o.overwrite_before_wait)
    issue.push_back(Stmt::Write("Cs", {Expr(17)}, Operand::constant(0.0)));
  if (o.wait) issue.push_back(Stmt::BulkWait(0));
  k.body = {
      loop("i", 8, {Stmt::Load("x", "X", {at}), Stmt::Write("Cs", {at}, Operand::value("x"))})};
  if (o.fence) k.body.push_back(Stmt::FenceProxyAsync());
  k.body.push_back(Stmt::Barrier());
  k.body.push_back(Stmt::If(eq(tid(), Expr(0)), issue));
  p.kernels.push_back(std::move(k));
  return p;
}

TEST(TmaStore, WritesTheBoxInsideTheTensorOnly) {
  KernelProgram p = store_kernel(Store{});
  verify(p);
  Bindings b;
  make_random_inputs(p, b, 1);
  interpret(p, b);
  const std::vector<double>& X = b.tensors.at("X").data;
  const std::vector<double>& C = b.tensors.at("C").data;
  int written = 0;
  for (int r = 0; r < 20; ++r)
    for (int c = 0; c < 24; ++c) {
      const double got = C[size_t(r * 24 + c)];
      if (r >= 8 && c >= 16) {
        EXPECT_EQ(got, X[size_t((r - 8) * 16 + c - 16)]) << r << ", " << c;
      } else if (r < 8 && c < 8) {
        EXPECT_EQ(got, X[size_t((r + 8) * 16 + c + 8)]) << r << ", " << c;
      } else {
        EXPECT_TRUE(std::isnan(got)) << "(" << r << ", " << c << ") is outside both boxes";
        continue;
      }
      ++written;
    }
  EXPECT_EQ(written, 12 * 8 + 8 * 8);
}

TEST(TmaStore, OverwritingTheTileBeforeBulkWaitIsARace) {
  KernelProgram p = store_kernel(Store{.overwrite_before_wait = true});
  verify(p);
  Bindings b;
  make_random_inputs(p, b, 2);
  try {
    interpret(p, b);
    FAIL() << "expected a RaceError";
  } catch (const RaceError& e) {
    const std::string msg = e.what();
    EXPECT_CONTAINS(msg, "write of Cs offset 17");
    EXPECT_CONTAINS(msg, "tma.store C[-8, -8] <- Cs[0] via C_tmap");
    EXPECT_CONTAINS(msg, "missing bulk.wait.read?");
  }
}

TEST(TmaStore, StoresStillReadingAtBlockEndAreAnError) {
  KernelProgram p = store_kernel(Store{.wait = false});
  Bindings b;
  make_random_inputs(p, b, 3);
  EXPECT_CONTAINS(error_of([&] { interpret(p, b); }),
                  "still reads shared memory when the block ends");
}

TEST(TmaStore, ThreadStoresNeedAProxyFence) {
  KernelProgram p = store_kernel(Store{.fence = false});
  Bindings b;
  make_random_inputs(p, b, 4);
  const std::string msg = error_of([&] { interpret(p, b); });
  EXPECT_CONTAINS(msg, "tma.store C[8, 16] <- Cs[0] via C_tmap");
  EXPECT_CONTAINS(msg, "no fence.proxy.async since");
}

TEST(TmaStore, MissingBarrierAfterTheFenceIsARace) {
  KernelProgram p = store_kernel(Store{});
  Block& body = p.kernels[0].body;
  body.erase(body.begin() + 2);  // the barrier
  Bindings b;
  make_random_inputs(p, b, 5);
  EXPECT_THROW(interpret(p, b), RaceError);
}

TEST(RowChunk, ChunksOfEveryRowAreStoredTogether) {
  TensorDecl t = decl("Bs", DType::F16, {2, 4, 16}, TensorRole::Shared);
  t.row_chunk = 8;
  std::vector<int> seen(128, 0);
  for (int slab = 0; slab < 2; ++slab)
    for (int r = 0; r < 4; ++r)
      for (int c = 0; c < 16; ++c) {
        const int64_t phys = t.physical(slab * 64 + r * 16 + c);
        EXPECT_EQ(phys, slab * 64 + c / 8 * 32 + r * 8 + c % 8) << slab << ", " << r << ", " << c;
        ++seen[size_t(phys)];
      }
  for (int n : seen) EXPECT_EQ(n, 1);  // a permutation of the slab

  // The swizzle applies to the chunked offset: Swizzle<1, 3, 3> flips bit 3 with bit 6.
  // Element (1, 1, 9) chunks to 64 + 32 + 8 + 1 = 105, whose bit 6 clears bit 3.
  t.swizzle = Swizzle{1, 3, 3};
  EXPECT_EQ(t.physical(64 + 16 + 9), 97);
  EXPECT_EQ(t.physical(16 + 9), 41);  // bit 6 clear: unchanged
}

TEST(RowChunk, VerifierRequiresDenseRowsOfWholeChunks) {
  KernelProgram p = store_kernel(Store{});
  verify(p);
  p.tensors[2].row_chunk = 6;
  EXPECT_CONTAINS(error_of([&] { verify(p); }), "not a multiple of its row_chunk 6");
  p.tensors[2].row_chunk = 8;
  p.tensors[2].pad = 4;
  EXPECT_CONTAINS(error_of([&] { verify(p); }), "chunked rows are dense");
  p.tensors[2].pad = 0;
  verify(p);
  p.tensors[1].row_chunk = 8;
  EXPECT_CONTAINS(error_of([&] { verify(p); }), "shared-memory layouts only");
}

TEST(RowChunk, InterpreterReadsChunkedTilesThroughPhysicalOffsets) {
  // The same store from a chunked Cs: threads write logical offsets, the store reads
  // logical offsets, so the answer is unchanged while the cells underneath moved.
  KernelProgram p = store_kernel(Store{});
  p.tensors[2].row_chunk = 4;
  verify(p);
  Bindings b;
  make_random_inputs(p, b, 6);
  interpret(p, b);
  const std::vector<double>& X = b.tensors.at("X").data;
  EXPECT_EQ(b.tensors.at("C").data[size_t(9 * 24 + 21)], X[size_t(1 * 16 + 5)]);
}

}  // namespace
}  // namespace loom
