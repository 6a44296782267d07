// The verifier's rules for the sm_90 forms: warpgroup atoms and their shared operands,
// setmaxnreg, wgmma / bulk waits, TMA stores against their tensor maps, mbarrier
// arrivals, and the shape of a Specialize. Each broken kernel starts from one that
// verifies, so a rule that stopped firing fails its test.
#include "hopper_kernels.h"

namespace loom {
namespace {

using namespace hopper;

KernelProgram good() { return shared_gemm(SharedGemm{}); }
Stmt& atom_of(KernelProgram& p) {
  for (Stmt& s : p.kernels[0].body)
    if (s.kind == StmtKind::Atom) return s;
  throw Error("no atom");
}
std::string verify_error(const KernelProgram& p) {
  return error_of([&] { verify(p); });
}

TEST(VerifyHopper, GoodKernelsVerify) {
  verify(good());
  verify(specialized_gemm(SpecializedGemm{}));
}

TEST(VerifyHopper, SharedOperandsNameSharedTilesWithConstantStrides) {
  KernelProgram p = good();
  atom_of(p).args[0].name = "A";
  EXPECT_CONTAINS(verify_error(p), "but `A` is not a shared tensor");
  p = good();
  atom_of(p).args[1].index.pop_back();
  EXPECT_CONTAINS(verify_error(p), "a shared operand is `Bs[origin, row_stride, col_stride]` (3)");
  p = good();
  atom_of(p).args[0].index[1] = var("threadIdx.x");
  EXPECT_CONTAINS(verify_error(p), "so they must be constants");
  p = good();
  p.tensors[3].dtype = DType::F32;
  p.tensors[0].dtype = DType::F32;
  EXPECT_CONTAINS(verify_error(p), "reads f16 elements but `As` holds f32");
}

TEST(VerifyHopper, WarpgroupAtomDeclarations) {
  KernelProgram p = good();
  p.kernels[0].warp_atoms[0].threads = 32;
  EXPECT_CONTAINS(verify_error(p),
                  "only warpgroup atoms (wgmma, threads = 128) take shared operands");
  p = good();
  p.kernels[0].warp_atoms[0].threads = 64;
  EXPECT_CONTAINS(verify_error(p), "warp atoms run on 32 (mma.sync) or 128");
  p = good();
  p.kernels[0].warp_atoms[0].c.pop_back();
  EXPECT_CONTAINS(verify_error(p), "128 lanes x 4 values = 512 expected");
  p = good();
  p.kernels[0].warp_atoms[0].a_values = 8;
  EXPECT_CONTAINS(verify_error(p), "A is read from shared memory, so it has no fragment");
  // TF32_ROUND=none's mark: only a tf32 A from registers can be truncated (this one is f16
  // and shared).
  p = good();
  p.kernels[0].warp_atoms[0].a_truncated = true;
  EXPECT_CONTAINS(verify_error(p), "only a tf32 A read from registers by a warpgroup atom");
  p = good();
  p.kernels[0].block_threads = 96;
  EXPECT_CONTAINS(verify_error(p), "runs on whole warpgroups of 128 threads but the block has 96");
}

TEST(VerifyHopper, SetMaxNRegAndWaitCounts) {
  KernelProgram p = specialized_gemm(SpecializedGemm{});
  Stmt& consumer = p.kernels[0].body[2].body[1];
  consumer.body[0] = Stmt::SetMaxNReg(true, 100);
  EXPECT_CONTAINS(verify_error(p),
                  "setmaxnreg takes a multiple of 8 registers in [24, 256], not 100");
  consumer.body[0] = Stmt::SetMaxNReg(true, 264);
  EXPECT_CONTAINS(verify_error(p), "not 264");
  consumer.body[0] = Stmt::SetMaxNReg(true, 240);
  consumer.body[0].mode = "up";
  EXPECT_CONTAINS(verify_error(p), "setmaxnreg mode `up` is neither inc nor dec");
  consumer.body[0] = Stmt::WgmmaWait(-1);
  EXPECT_CONTAINS(verify_error(p), "wgmma.wait keeps a non-negative whole number of groups");
  consumer.body[0] = Stmt::BulkWait(-2);
  EXPECT_CONTAINS(verify_error(p), "bulk.wait.read keeps a non-negative whole number");
  consumer.body[0] = Stmt::BulkWait(1);
  verify(p);
}

// The split (producer 40, consumer 232 at 256 threads: 34816 registers) fits the 63488 the
// block holds at launch; two blocks an SM leave it 32768, where the consumers' increase
// would wait forever.
TEST(VerifyHopper, SetMaxNRegSplitFitsTheBlocksRegisters) {
  KernelProgram p = specialized_gemm(SpecializedGemm{});
  verify(p);
  p.kernels[0].min_blocks_per_sm = 2;
  EXPECT_CONTAINS(verify_error(p),
                  "setmaxnreg: one warpgroup at 40 and 128 threads at 232 need 34816 registers, and "
                  "a block of 256 threads holds 32768 at launch (128 a thread): the increase would "
                  "never complete");
}

TEST(VerifyHopper, HopperStatementsAreKernelIrOnly) {
  TileProgram p;
  p.tensors = {decl("C", DType::F32, {1}, TensorRole::Output)};
  p.ops.push_back(TileOp{
      "t", {}, "C", {Stmt::WgmmaCommit(), Stmt::Write("C", {Expr(0)}, Operand::constant(1.0))}});
  EXPECT_CONTAINS(error_of([&] { verify(p); }), "wgmma.commit appears only in Kernel IR");
}

TEST(VerifyHopper, TmaStoreUsesAMapFromItsSharedTile) {
  KernelProgram p = specialized_gemm(SpecializedGemm{});
  KernelOp& k = p.kernels[0];
  Stmt store = Stmt::TmaStore("As", Expr(0), "C", {Expr(0), Expr(0)}, "A_tmap");
  k.body.push_back(store);
  p.tensors[2].dtype = DType::F16;
  EXPECT_CONTAINS(verify_error(p),
                  "uses tensor map `A_tmap`, whose shared tensor is `As` and global "
                  "tensor `A`");
  k.body.back().dst = "nope";
  EXPECT_CONTAINS(verify_error(p), "tma.store names tensor map `nope`");
  k.tma.push_back(TmaDescriptor{"C_tmap", "C", "As", {8, 64}, 0});
  k.body.back().dst = "C_tmap";
  verify(p);
  k.body.back().src = "A";
  k.body.back().dst = "A_tmap";
  EXPECT_CONTAINS(verify_error(p), "tma.store writes input tensor `A`");
}

TEST(VerifyHopper, MbarArriveSlotInRange) {
  KernelProgram p = specialized_gemm(SpecializedGemm{});
  p.kernels[0].body.push_back(Stmt::MbarArrive(Expr(4)));
  EXPECT_CONTAINS(verify_error(p), "mbarrier slot 4 is outside the kernel's 4 mbarriers");
}

TEST(VerifyHopper, SpecializeArmsDoNotNest) {
  KernelProgram p = specialized_gemm(SpecializedGemm{});
  Stmt& spec = p.kernels[0].body[2];
  spec.body[1].body.push_back(Stmt::Specialize({Stmt::If(Expr(1), {})}));
  EXPECT_CONTAINS(verify_error(p), "arms do not nest");
}

}  // namespace
}  // namespace loom
