// Pitched operands (TensorDecl::pitch, `A[M,K|1056]`): views into larger buffers through
// every pass on the interpreter, against the naive Loop IR, for each GEMM family — SIMT,
// mma.sync, wgmma over TMA, wgmma over the threads' cp.async copies and the realigned
// copies of odd pitches — with transposed views, batch strides, a 3-D linear and pitched
// epilogue operands. The interpreter keeps a pitched tensor in its footprint with NaN
// between the rows, so a kernel that addressed it densely would read NaN (and it refuses
// an access between the rows by name); then the IR the pitch shows up in at each level.
#include <gtest/gtest.h>

#include "ir/error.h"
#include "ir/interpreter.h"
#include "ir/printable.h"
#include "pass_check.h"
#include "passes/defaults.h"

namespace loom {
namespace {

struct Case {
  std::string expr, knobs;
  std::map<std::string, int64_t> sizes = {};
  std::string arch = "sm_90a";
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.expr << " knobs " << c.knobs << " " << c.arch; }

class PitchEveryPass : public ::testing::TestWithParam<Case> {};

TEST_P(PitchEveryPass, MatchesTheNaiveProgram) {
  const Case& c = GetParam();
  const Target target = Target::for_arch(c.arch);
  // "defaults": the sm_90a wgmma defaults of the shape (what the driver picks for these
  // 16-bit shapes), with the atom the driver adds.
  const Knobs knobs =
      c.knobs == "defaults"
          ? Knobs::parse(default_knobs(parse_expression(c.expr), target).wgmma.str() + ",ATOM=wgmma_bf16")
          : Knobs::parse(c.knobs);
  CompileState s = passcheck::check_every_pass(c.expr, knobs, 97, c.sizes, {}, std::nullopt, target);
  bool pitched = false;
  for (const TensorDecl& t : s.kernel.tensors) pitched |= t.pitched();
  EXPECT_TRUE(pitched) << "no pitched tensor reached Kernel IR";
}

const std::string kWgmmaTma = "ATOM=wgmma_bf16,WM=1,WN=1,BN=64,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=2";
const std::string kWgmmaCp = "ATOM=wgmma_bf16,WM=1,WN=1,BN=64,STAGE=cp_async,SWIZZLE=128B,BK=64,STAGES=2,VECTORIZE=8";
const std::string kMma = "ATOM=mma_bf16,WM=2,WN=2,FM=2,FN=2,BK=16,STAGE=cp_async,STAGES=2";

INSTANTIATE_TEST_SUITE_P(
    Families, PitchEveryPass,
    ::testing::Values(
        // SIMT (f32 FFMA): odd pitches, both operands, a transposed view of a pitched tensor.
        Case{"matmul(A[37,20|23]:f32, B[20,29|31]:f32)", "BM=16,BN=16,FM=2,FN=2,BK=8"},
        Case{"matmul(A[20,37|40]:f32.T, B[29,20|21]:f32.T)", "BM=16,BN=16,FM=2,FN=2,BK=8"},
        Case{"matmul(A[M,K|40]:f32, B[K,N]:f32)", "BM=16,BN=16,FM=2,FN=2,BK=8,STAGE=sync",
             {{"M", 19}, {"N", 24}, {"K", 33}}},
        // mma.sync (sm_80 and sm_90a), 16-byte aligned and odd pitches.
        Case{"matmul(A[64,40|48]:bf16, B[40,72|80]:bf16)", kMma, {}, "sm_80"},
        Case{"matmul(A[70,40|41]:bf16, B[72,40|43]:bf16.T)", kMma},
        // wgmma with TMA: the tensor map's strides are the pitches.
        Case{"matmul(A[128,64|72]:bf16, B[64,128|136]:bf16)", kWgmmaTma},
        Case{"matmul(A[128,64|72]:bf16, B[96,64|104]:bf16.T)", kWgmmaTma},
        Case{"matmul(A[64,128|136]:bf16.T, B[64,128|192]:bf16)", kWgmmaTma},
        // wgmma with the threads' 16-byte cp.async copies, and odd pitches: realigned copies.
        Case{"matmul(A[100,64|80]:bf16, B[64,72|88]:bf16)", kWgmmaCp},
        Case{"matmul(A[100,64|67]:bf16, B[64,72|77]:bf16)", kWgmmaCp + ",REALIGN=1"},
        // Ragged widths in 16-byte pitches: a row's last 16-byte unit reaches into the gap.
        Case{"matmul(A[100,60|64]:bf16, B[60,70|80]:bf16)", kWgmmaCp},
        Case{"matmul(A[100,60|64]:bf16, B[60,70|80]:bf16)", kWgmmaTma},
        Case{"matmul(A[70,36|40]:f16, B[36,70|72]:f16)",
             "ATOM=mma_f16,WM=2,WN=2,FM=2,FN=2,BK=16,STAGE=cp_async,STAGES=2"},
        Case{"matmul(A[100,60|64]:bf16, B[60,70|80]:bf16)", "defaults"},
        Case{"matmul(A[100,64|67]:bf16, B[64,72|77]:bf16)", "defaults"},
        Case{"matmul(A[256,128|136]:bf16, B[128,256|264]:bf16)", "defaults"},
        Case{"linear(X[2,64,128|136]:bf16, W[64,128]:bf16, b[64]:bf16)", "defaults"},
        // Batched: a KV cache with capacity past its length (batch stride > rows x pitch).
        Case{"bmm(Q[3,64,64|4608,72]:bf16, K[3,64,80|8192,88]:bf16)", kWgmmaTma},
        Case{"bmm(Q[3,40,24|1000,24]:f32, K[3,24,17|500,20]:f32)", "BM=16,BN=16,FM=2,FN=2,BK=8"},
        // Pitched epilogue operands: a bias row and a residual view.
        Case{"add(relu(linear(X[64,64|72]:bf16, W[64,64|80]:bf16, b[64]:bf16)), R[64,64|96]:bf16)",
             kWgmmaTma},
        Case{"add(matmul(A[30,20|24]:f32, B[20,18]:f32), R[30,18|32]:f32)", "BM=16,BN=16,FM=2,FN=2,BK=8"},
        // 3-D linear: W shared by every batch entry; X a pitched [B,S,K] view.
        Case{"linear(X[2,64,64|72]:bf16, W[64,64]:bf16, b[64]:bf16)", kWgmmaTma},
        Case{"linear(X[2,3,17,20|24]:f32, W[12,20]:f32)", "BM=16,BN=16,FM=2,FN=2,BK=8"},
        // A pitched output (out_pitch=): the direct, staged and TMA-store epilogues, split-K.
        Case{"relu(matmul(A[37,20|24]:f32, B[20,29]:f32, out_pitch=36))", "BM=16,BN=16,FM=2,FN=2,BK=8"},
        Case{"matmul(A[37,20]:f32, B[20,29]:f32, out_pitch=32)",
             "BM=16,BN=16,FM=2,FN=2,BK=8,SPLITK=2,SPLITK_MODE=reduce"},
        Case{"bmm(A[2,30,20]:f32, B[2,20,12]:f32, out_pitch=16)", "BM=16,BN=16,FM=2,FN=2,BK=8"},
        Case{"add(matmul(A[128,64]:bf16, B[64,128]:bf16, out_pitch=136), b[128]:bf16)",
             kWgmmaTma + ",EPILOGUE=tma_store"},
        Case{"relu(matmul(A[100,64]:bf16, B[64,72]:bf16, out_pitch=80))", kMma + ",EPILOGUE=smem"},
        // A pitch that allows wider copies than the width: a 16-byte chunk from column 64 of
        // N = 68 (or 256 of 260) would write the caller's columns past N (the interpreter
        // refuses a write outside the view); the staged copies narrow to 8 bytes.
        Case{"relu(matmul(A[100,64]:bf16, B[64,68]:bf16, out_pitch=72))", kMma + ",EPILOGUE=smem"},
        Case{"relu(matmul(A[100,64]:bf16, B[64,68]:bf16, out_pitch=72))", kMma},
        Case{"matmul(A[100,64]:bf16, B[68,64]:bf16.T, out_pitch=72)", kWgmmaTma},
        Case{"linear(X[200,64]:bf16, W[260,64]:bf16, out_pitch=264)",
             "ATOM=wgmma_bf16,WM=2,WN=1,FM=1,FN=1,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=2,"
             "GROUP_M=8,WARP_SPECIALIZE=1,PERSISTENT=1,EPILOGUE=smem,BN=128,EPI_BUFFERS=2"}));

TEST(Pitch, TheStridesShowAtEveryLevel) {
  CompileState s;
  s.graph = parse_expression("matmul(A[M,1000|1024]:bf16, B[1000,N]:bf16)");
  s.knobs = Knobs::parse(kWgmmaTma);
  s.target = Target::for_arch("sm_90a");
  EXPECT_NE(s.graph.str().find("A: bf16[M, 1000|1024]"), std::string::npos) << s.graph.str();
  for (const auto& p : pipeline()) p.run(s);
  for (const std::string& text : {print(s.loop), print(s.tile), print(s.kernel)})
    EXPECT_NE(text.find("A: bf16[M, 1000] input strides=[1024, 1]"), std::string::npos) << text;
  EXPECT_EQ(print(s.kernel).find("B: bf16[1000, N] input strides"), std::string::npos);
}

// The sm_90a defaults judge a view by its strides, not its width: TMA needs every stride a
// multiple of 16 bytes, so a 128-byte row in a 136-byte pitch goes through the threads'
// copies (realigned: 4-byte but not 16-byte aligned rows need no realign, 2-byte ones do),
// the same row in a 144-byte pitch through TMA. Before the hook the defaults read the
// width and chose TMA for both, which the tensor map's encoding then refused on the GPU.
TEST(Pitch, DefaultsChooseTheCopiesFromTheStrides) {
  auto stage = [](const std::string& expr) {
    const Knobs k = default_knobs(parse_expression(expr), Target::for_arch("sm_90a")).wgmma;
    return k.get_str("STAGE", "?") + (k.get_int("REALIGN", 0) ? ",REALIGN=1" : "");
  };
  EXPECT_EQ(stage("matmul(A[1024,1024|1032]:bf16, B[1024,1024]:bf16)"), "tma");
  EXPECT_EQ(stage("matmul(A[1024,1024|1028]:bf16, B[1024,1024]:bf16)"), "cp_async");
  EXPECT_EQ(stage("matmul(A[1024,1024|1025]:bf16, B[1024,1024]:bf16)"), "cp_async,REALIGN=1");
}

// An explicit STAGE=tma on a view whose pitch is not 16-byte units is refused when the
// boxes are made (k:015), naming the pitch and the fix; its width alone (128 B) would pass.
TEST(Pitch, TmaRefusesAPitchOfOddSixteenByteUnits) {
  CompileState s;
  s.graph = parse_expression("matmul(A[128,64|68]:bf16, B[64,128]:bf16)");
  s.knobs = Knobs::parse(kWgmmaTma);
  s.target = Target::for_arch("sm_90a");
  try {
    for (const auto& p : pipeline()) p.run(s);
    ADD_FAILURE() << "STAGE=tma accepted a 136-byte pitch";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("STAGE=tma needs the strides of A to be multiples of 16 "
                                         "bytes; its row pitch is 136 B: use STAGE=cp_async"),
              std::string::npos) << e.what();
  }
}

// A Kernel IR program whose A is declared with a wider pitch than its accesses were
// flattened with: every row after the first lands between the view's rows.
TEST(Pitch, InterpreterRefusesAnAccessBetweenTheRows) {
  CompileState s;
  s.graph = parse_expression("matmul(A[16,8]:f32, B[8,16]:f32)");
  s.knobs = Knobs::parse("BM=16,BN=16,FM=2,FN=2,BK=8,STAGE=direct");
  s.target = Target::for_arch("sm_90a");
  for (const auto& p : pipeline()) p.run(s);
  Bindings b;
  make_random_inputs(s.kernel, b, 3);
  s.kernel.tensor("A").pitch = {Expr(6)};  // below the width: rows overlap
  try {
    Bindings c = b;
    interpret(s.kernel, c);
    ADD_FAILURE() << "an overlapping pitch was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tensor A: its row pitch is 6 elements, below the 8"),
              std::string::npos) << e.what();
  }
  s.kernel.tensor("A").pitch = {Expr(12)};
  try {
    interpret(s.kernel, b);
    ADD_FAILURE() << "an access between the rows of A was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("lands outside the view A[16, 8]"), std::string::npos)
        << e.what();
  }
}

TEST(Pitch, InterpreterRefusesAWriteBetweenTheRows) {
  // The output declared pitched after flattening: the kernel's dense offsets write rows
  // into the gaps of the view.
  CompileState s;
  s.graph = parse_expression("matmul(A[8,8]:f32, B[8,4]:f32)");
  s.knobs = Knobs::parse("BM=8,BN=4,FM=1,FN=1,BK=8,STAGE=direct");
  s.target = Target::for_arch("sm_90a");
  for (const auto& p : pipeline()) p.run(s);
  Bindings b;
  make_random_inputs(s.kernel, b, 5);
  s.kernel.tensor("out").pitch = {Expr(6)};
  EXPECT_THROW(interpret(s.kernel, b), Error);
}

TEST(Pitch, VerifierKeepsPitchesOnTheCallersTensors) {
  CompileState s;
  s.graph = parse_expression("matmul(A[8,8]:f32, B[8,4]:f32)");
  s.knobs = Knobs::parse("BM=8,BN=4,FM=1,FN=1,BK=8");
  s.target = Target::for_arch("sm_90a");
  for (const auto& p : pipeline()) {
    p.run(s);
    if (s.level == Level::Loop) break;
  }
  LoopProgram bad = s.loop;
  bad.tensor("A").pitch = {Expr(8), Expr(1)};
  EXPECT_THROW(verify(bad), Error);
  bad = s.loop;
  TensorDecl tmp;
  tmp.name = "tmp";
  tmp.shape = {Expr(4), Expr(4)};
  tmp.role = TensorRole::Temp;
  tmp.pitch = {Expr(8)};
  bad.tensors.push_back(tmp);
  try {
    verify(bad);
    ADD_FAILURE() << "a pitched temp was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("has strides but is a temp"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace loom
