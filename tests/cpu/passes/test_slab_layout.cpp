// SLAB_KOUTER (t:040_stage_inputs): which layout a staged slab has in shared memory.
// 1 keeps the reduction dimension outermost ([BK][BM] for A, the transposed-A layout of
// SIMT kernels, read with vector loads in the inner loop); 0 keeps the source's storage
// order. The defaults follow the transport (sync 1; cp.async, TMA 0); cp.async with 1
// transposes on the fly with 4-byte copies; TMA cannot transpose and says so.
#include <gtest/gtest.h>

#include "frontend/parser.h"
#include "ir/error.h"
#include "passes/pipeline.h"
#include "pass_check.h"

namespace loom {
namespace {

const Expr& shape_of(const CompileState& s, const std::string& t, size_t d) {
  return s.kernel.tensor(t).shape.at(d);
}

// Widest cp.async per slab (elements per copy).
std::map<std::string, int> async_widths(const CompileState& s) {
  std::map<std::string, int> w;
  for (const auto& k : s.kernel.kernels)
    walk(k.body, [&](const Stmt& st) {
      if (st.kind == StmtKind::AsyncCopy) w[st.tensor] = std::max(w[st.tensor], st.width);
    });
  return w;
}

const char* kGemm = "matmul(A[64,64]:f32, B[64,64]:f32)";

TEST(SlabLayout, SyncDefaultsToReductionOutermost) {
  CompileState s = passcheck::compile_sm90a(kGemm, "BM=32,BN=32,FM=4,FN=4,BK=8,STAGE=sync,STAGES=1");
  EXPECT_EQ(shape_of(s, "A_s", 0).const_value(), 8);   // [BK][BM]
  EXPECT_EQ(shape_of(s, "A_s", 1).const_value(), 32);
  EXPECT_EQ(s.used_knobs.at("SLAB_KOUTER"), "1");
}

TEST(SlabLayout, CpAsyncDefaultsToStorageOrderWith16ByteCopies) {
  CompileState s = passcheck::compile_sm90a(kGemm, "BM=32,BN=32,FM=4,FN=4,BK=8,STAGE=cp_async,STAGES=1");
  EXPECT_EQ(shape_of(s, "A_s", 0).const_value(), 32);  // [BM][BK]
  EXPECT_EQ(shape_of(s, "A_s", 1).const_value(), 8);
  EXPECT_EQ(async_widths(s).at("A_s"), 4);
}

TEST(SlabLayout, CpAsyncTransposesWithFourByteCopies) {
  CompileState s =
      passcheck::compile_sm90a(kGemm, "BM=32,BN=32,FM=4,FN=4,BK=8,STAGE=cp_async,STAGES=3,SLAB_KOUTER=1");
  EXPECT_EQ(shape_of(s, "A_s", 1).const_value(), 8);   // ring, then [BK][BM]
  EXPECT_EQ(shape_of(s, "A_s", 2).const_value(), 32);
  auto w = async_widths(s);
  EXPECT_EQ(w.at("A_s"), 1);  // one element per cp.async: the copy transposes
  EXPECT_EQ(w.at("B_s"), 4);  // B's reduction dimension is already outermost
}

TEST(SlabLayout, TransposedCpAsyncComputesTheSameAnswer) {
  for (const char* knobs : {"BM=32,BN=32,FM=4,FN=4,BK=8,STAGE=cp_async,STAGES=3,SLAB_KOUTER=1",
                            "BM=16,BN=32,FM=2,FN=4,BK=4,STAGE=cp_async,STAGES=2,SLAB_KOUTER=1,PAD_SMEM=4",
                            "BM=16,BN=16,FM=2,FN=2,BK=8,STAGE=sync,STAGES=2,SLAB_KOUTER=0"}) {
    SCOPED_TRACE(knobs);
    CompileState s;
    s.graph = parse_expression("relu(matmul(A[37,21]:f32, B[21,45]:f32))");
    s.knobs = Knobs::parse(knobs);
    s.target = Target::for_arch("sm_90a");
    Bindings inputs;
    HostTensor reference;
    for (const auto& p : pipeline()) {
      p.run(s);
      if (p.to == Level::Loop && reference.data.empty()) {
        make_random_inputs(s.loop, inputs, 11);
        reference = passcheck::run_level(s, Level::Loop, inputs);
        continue;
      }
    }
    passcheck::expect_close(passcheck::run_level(s, Level::Kernel, inputs), reference,
                            DType::F32, "kernel IR");
  }
}

TEST(SlabLayout, TmaCannotTranspose) {
  {
    const std::string e =
        passcheck::error_of(kGemm, "BM=32,BN=32,FM=4,FN=4,BK=8,STAGE=tma,SLAB_KOUTER=1");
    ASSERT_NE(e, "") << "expected an error";
    EXPECT_NE(e.find("SLAB_KOUTER=1 with STAGE=tma"), std::string::npos) << e;
    EXPECT_NE(e.find("SLAB_KOUTER=0"), std::string::npos) << e;
  }
}

}  // namespace
}  // namespace loom
