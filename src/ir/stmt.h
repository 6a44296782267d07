// The statement tree shared by Loop IR, Tile IR and Kernel IR.
//
// The three levels use one node type so that a pass can be shown as a line diff of the
// printed tree and the CPU interpreter can execute all three; what distinguishes the
// levels is which statement kinds and loop tiers they admit, and that is what each
// level's verifier checks (src/ir/verify.cpp):
//
//   Loop IR   For(tier None, kind Parallel|Reduce), Load, Compute, Init, Accum, Write, If
//   Tile IR   + For loops with a hardware tier (Grid, Thread, Register, ...), Let,
//             register arrays (Alloc), predicated loads, Stage bundles (a slab of a
//             global tensor staged into a shared tensor before the bundle's body runs)
//   Kernel IR no Grid/Thread loops: they became Let bindings of blockIdx/threadIdx;
//             indices are flat offsets (one Expr per access); Atom statements
//             (incl. warp mma and warp copies such as ldmatrix);
//             Barrier, AsyncCopy/AsyncCommit/AsyncWait (explicit data movement),
//             TmaLoad and the mbarriers it completes on (MbarInit, FenceMbarInit,
//             MbarArriveExpectTx, MbarWait; KernelOp::mbarriers counts them)
//
// Scalar values are named (SSA-like: each name is assigned by one statement in its
// scope) and hold the compute type, f32 on the GPU (the interpreter uses double). A
// value may be a register array: `Alloc` declares `acc[4, 4]`, and statements address
// one element through `dst_index` / `Operand::index` (indices are register-loop
// variables and constants, so the array stays in registers after unrolling).
#pragma once
#include <string>
#include <vector>

#include "ir/expr.h"

namespace loom {

enum class StmtKind {
  For, If, Let, Load, Compute, Init, Accum, Write, Atom,
  Alloc,        // register array `dst[index...]` (index = constant extents)
  Stage,        // Tile IR: copy slabs into shared tensors, then run body
  Barrier,      // all threads of the block (bar.sync 0), or a named barrier: `imm` threads
                // (a multiple of 32, imm > 0) meet at barrier `value` (1..15), the others
                // run on; per-warpgroup hand-offs inside a specialize arm use these
  AsyncCopy,    // cp.async: tensor[index] <- src[src_index], `width` elements, 0 when !pred
  AsyncCommit,  // cp.async.commit_group: close the group of copies issued so far
  AsyncWait,    // cp.async.wait_group imm: wait until at most `imm` groups are in flight
  // TMA (sm_90): one thread copies a whole box global -> shared; the copy completes on
  // an mbarrier, whose phase flips once every expected arrival and byte has come in.
  // The barrier slot is `value` (an index into the kernel's KernelOp::mbarriers).
  TmaLoad,             // tensor[index[0]..] <- box of src at src_index via descriptor `dst`; imm bytes
  MbarInit,            // mbarrier.init: slot `value` expects `imm` arrivals per phase
  FenceMbarInit,       // fence.mbarrier_init: the inits are visible to the TMA unit
  MbarArriveExpectTx,  // mbarrier.arrive.expect_tx: arrive on slot `value`, expect `imm` bytes
  MbarWait,            // mbarrier.try_wait.parity loop: wait until the phase of parity `cond` completed
  MbarArrive,          // mbarrier.arrive: each executing thread arrives once on slot `value`
  // Hopper (sm_90a) warpgroup MMA and the ordering it needs. A wgmma Atom (a warp atom
  // with threads = 128, program.h) is asynchronous: it reads its shared operands and
  // writes its accumulators some time between issue and the wait that retires its group.
  WgmmaFence,          // wgmma.fence: register writes to accumulators are ordered before the next wgmma
  WgmmaCommit,         // wgmma.commit_group: close the group of wgmma issued so far
  WgmmaWait,           // wgmma.wait_group imm: until at most `imm` groups are in flight
  FenceProxyAsync,     // fence.proxy.async.shared::cta: thread writes to shared memory are
                       // visible to the async proxy (a TMA store that reads them)
  SetMaxNReg,          // setmaxnreg.{inc,dec} (mode "inc" | "dec") to `imm` registers per thread
  // TMA store (sm_90): one thread copies a box shared -> global; bulk groups track them.
  TmaStore,            // box of src at src_index via descriptor `dst` <- tensor[index[0]..]
  BulkCommit,          // cp.async.bulk.commit_group: close the group of TMA stores
  BulkWait,            // cp.async.bulk.wait_group.read imm: until at most `imm` groups still read smem
  // Warp specialization: the arms (If statements whose conditions split the block's
  // threads by warp or warpgroup) run concurrently, not one after the other: a producer
  // arm and a consumer arm hand shared buffers to each other through mbarriers, so each
  // may wait for the other. Tile IR and Kernel IR both admit it.
  Specialize,          // body: the arms (If), disjoint thread sets
  // Thread-block clusters (sm_90, KernelOp::cluster): the CTAs of a cluster run at the
  // same time and may write each other's shared memory (a multicast TmaLoad) and arrive
  // on each other's mbarriers (MbarArrive with a `multicast` mask).
  ClusterSync,         // barrier.cluster.arrive (.relaxed when mode is "relaxed") + wait: every
                       // thread of every CTA of the cluster
  // Split-K's in-kernel combine: the CTAs of one output tile count their arrivals on a
  // global counter, and the last one to arrive finishes the tile. The first `value`
  // threads of the block (a constant; all of them, or the consumer warpgroups of a
  // specialized kernel) execute it together: they wait for each other (so every partial
  // sum they wrote is ordered before the arrival), one adds 1 to the f32 counter
  // `tensor[index]` (a release fence and a relaxed atom.add.gpu: it releases this CTA's
  // writes; the last CTA then fences again to acquire those of the CTAs that arrived
  // before), and each binds the integer `var` to 1 when
  // that made `imm` arrivals, else 0. The last arrival resets the counter to 0, so the
  // next launch finds it cleared.
  TileArrive,
  // Warp shuffle reduction (shfl.sync.bfly): `dst = op over the lanes of arg`, among the
  // groups of `imm` consecutive lanes (a power of two, 2..32) of each warp; every lane of
  // a group receives the group's result. Attention's row max and row sum: an m16n8 C
  // fragment spreads a row over the 4 lanes of a quad (imm = 4). Warp-collective: the
  // whole warp executes it (never under a lane-dependent If).
  LaneReduce,
};

enum class LoopKind { Parallel, Reduce };

// Hardware level a loop is bound to (docs/architecture.md: GRID > CLUSTER > BLOCK > WARPGROUP >
// WARP > THREAD > REGISTER > ATOM). None = not yet bound (Loop IR, or a serial loop).
enum class Tier { None, Grid, Cluster, Warpgroup, Warp, Thread, Register, Atom };

const char* tier_name(Tier t);        // "grid", "thread", ...
const char* loop_kind_name(LoopKind k);  // "parallel", "reduce"

// Elementwise scalar operations (the epilogue vocabulary; more join as ops need them).
// Exp, Exp2 and Log are attention's softmax: exp2 because the GPU has it as one
// instruction (ex2.approx), so the online-softmax form folds log2(e) into the scale.
enum class ScalarOp { Add, Sub, Mul, Div, Max, Min, Neg, Relu, Gelu, GeluTanh, Silu, Exp, Exp2, Log };
const char* scalar_op_name(ScalarOp op);  // "add", "multiply", "relu", ...
int scalar_op_arity(ScalarOp op);
// The ops an Accum may combine with: associative and commutative, so a reduce loop may
// be split or reordered (add, max, min, multiply).
bool is_accumulate_op(ScalarOp op);
double eval_scalar_op(ScalarOp op, double a, double b = 0.0);  // reference semantics

// A scalar operand: a named value (an element of a register array when `index` is
// non-empty) or an immediate.
struct Operand {
  std::string name;   // empty when immediate
  double imm = 0.0;
  std::vector<Expr> index;
  static Operand value(std::string n, std::vector<Expr> idx = {}) {
    return Operand{std::move(n), 0.0, std::move(idx)};
  }
  static Operand constant(double v) { return Operand{"", v, {}}; }
  bool is_imm() const { return name.empty(); }
  std::string str() const;  // name, name[i, j], or the constant printed exactly (e.g. 0.5)
};

// One slab of a Stage bundle: `shared[vars...] = src[src_index]` for every point of
// the box vars in [0, extents); a source index outside the source's shape reads 0 (the
// zero fill that makes any M, N, K work without guards in the reduction).
struct StageCopy {
  std::string shared;             // shared tensor (shape = prefix dims + extents)
  // Leading indices of the shared tensor before the box: the ring slot (e.g. k_o % 2)
  // of a multi-buffered stage. Empty for a single buffer.
  std::vector<Expr> shared_prefix;
  std::vector<std::string> vars;  // box variables, outermost first
  std::vector<Expr> extents;
  std::string src;                // global tensor
  std::vector<Expr> src_index;    // over vars and enclosing loop variables
};

struct Stmt {
  StmtKind kind = StmtKind::Load;

  // For: `for var in 0..extent` bound to `tier`; `axis` names the Loop IR loop it came
  // from (m, n, k, b), kept through factorization for printing and for passes that
  // look for "the N axis". `unroll` asks codegen for #pragma unroll, `no_unroll` for
  // #pragma unroll 1 (a loop whose body must stay one copy: k:013's key loop, whose
  // unrolled copies at a small constant trip count spilled at the 240-register cap).
  std::string var;
  Expr extent;
  LoopKind loop_kind = LoopKind::Parallel;
  Tier tier = Tier::None;
  std::string axis;
  bool unroll = false;
  bool no_unroll = false;
  // #pragma unroll N (N > 1): copies of the body per iteration (k:026's WGMMA_FILLS=slab
  // slab loop: each parity's fragment registers are then their own instructions' in PTX).
  int unroll_by = 0;

  // If: `if cond:` body.  Let: `var = value` (an integer binding, Tile and Kernel IR), or,
  // with `tensor` set, `var = tensor[index]`: an integer read from an i32 tensor (paged
  // attention's block table and key lengths; Loop IR too), indexed as a Load is.
  // Mbar*/TmaLoad: `value` is the mbarrier slot, MbarWait's `cond` the phase parity.
  // Barrier: `value` is the barrier id and `imm` the thread count of a named barrier.
  Expr cond;
  Expr value;

  // Load `dst = load tensor[index]`; Write `tensor[index] = args[0]`.
  // Compute `dst = op(args)`; Init `dst = imm`; Accum `dst <- op(dst, args[0])` with op
  // add (every contraction), max (a row max) or multiply (online softmax's rescale of
  // a running sum by exp(m_old - m_new)) — a loop-carried update of a value defined
  // outside the loop, where a Compute would define a new value in the loop's scope.
  // Atom `atom(dst; args)`: an instruction from the atom table (src/atoms), e.g. the FMA
  // atom `dst <- fma(args[0], args[1], dst)`.
  // A warp atom (one the kernel declares in KernelOp::warp_atoms: mma.sync) computes
  // D = A·B + C with D = C: `dst` is the C/D fragment, args = {A fragment, B fragment}.
  // Each names a register array and a prefix of its indices (dst_index / Operand::index,
  // possibly empty); the fragment is the elements of the remaining trailing dimensions,
  // value v the v-th of them in row-major order, and there must be exactly as many as the
  // atom's values per lane. E.g. with `alloc acc[FM, FN, 4]`, `acc[i, j]` is the 4-value
  // fragment (i, j); with `alloc a_frag[8]`, `a_frag` (no index) is all 8 values.
  // A warpgroup atom (wgmma: a declared warp atom with threads = 128) may take A and/or
  // B from shared memory instead of a fragment (WarpAtom::a_shared / b_shared): that
  // operand is `Operand::value(shared tensor, {origin, row_stride, col_stride})`, element
  // (r, c) of the operand tile (A: M x K, B: K x N) being the shared tensor's element at
  // flat offset origin + r * row_stride + c * col_stride (then TensorDecl::physical). Codegen
  // turns that into a wgmma matrix descriptor; the interpreter reads the elements.
  // A warp copy atom (one the kernel declares in KernelOp::warp_copies: ldmatrix) fills
  // the fragment `dst` / dst_index from shared tensor `tensor`; args are empty and
  // `index` holds one flat offset, evaluated per lane like a Load's: the start of the
  // 16-byte row this lane supplies. Which lane's row becomes which stacked row, and which
  // element each lane receives, is the declaration's business (WarpCopy).
  // A storing warp copy (stmatrix, WarpCopy::to_shared) is the reverse: `dst` is empty and
  // `args` are the lane's values, one scalar operand each, in the atom's value order; the
  // lane's row address is `index` as above.
  std::string dst;
  std::string tensor;
  std::vector<Expr> index;
  ScalarOp op = ScalarOp::Add;
  std::vector<Operand> args;
  double imm = 0.0;
  std::string atom;

  // Register-array element written by Load/Compute/Init/Accum/Atom (empty = scalar).
  // Alloc: `index` holds the array's constant extents.
  std::vector<Expr> dst_index;
  // Load/Write/AsyncCopy: elements moved by one access (a vector access when > 1; the
  // register elements are dst_index .. dst_index + width - 1 along the last dimension).
  int width = 1;
  // Load: predicate; when it is false the load does not touch memory and yields 0.
  // AsyncCopy: when false the destination is zero-filled (src-size 0).
  Expr pred = Expr(1);
  // Write: atomically add the value instead of storing it (split-K's atomic combine).
  bool atomic_add = false;
  // A tensor-core atom's scale-d: where it is non-zero the atom accumulates (D = A·B + D);
  // where 0 it computes D = A·B, the accumulators' old contents neither read nor required
  // — the first k-step of an accumulation, which then needs no zeroing before it.
  //  - warpgroup atom (wgmma): a predicate, uniform over the warpgroup (one predicate
  //    register per wgmma); the tile's first k-step uses it instead of a zeroing (k:026).
  //  - warp atom (mma.sync): the constant 0 or 1 only — mma.sync has no scale-d operand,
  //    its zero C is another form of the instruction (constant-zero C registers), chosen
  //    at compile time (attention's S under ZERO_INIT=mma, k:012).
  // Every other statement leaves it 1.
  Expr scale_d = Expr(1);
  // TmaLoad / MbarArrive in a cluster: the CTAs (bit r = cluster rank r) that receive the
  // box at the same shared offset, each counting its bytes on its own mbarrier `value`
  // (cp.async.bulk.tensor .multicast::cluster), or on whose mbarrier `value` the thread
  // arrives (mapa + mbarrier.arrive.shared::cluster). 0: this CTA only.
  Expr multicast = Expr(0);
  // Write with `remote`: an asynchronous store (st.async) of f32 elements into the copy of
  // shared `tensor` held by the CTA of rank `value` (this CTA's own included), completing
  // 4 * width bytes on that CTA's mbarrier slot `mbar`: the receiver reads them after
  // waiting for the phase, with no cluster barrier (and no memory fence) between. (A pull
  // form, loads from a peer's shared memory, existed until CLUSTER_K's exchange moved to
  // these pushes; the verifier refuses `remote` on anything but a Write.)
  bool remote = false;
  Expr mbar = Expr(0);
  // AsyncCopy source.
  std::string src;
  std::vector<Expr> src_index;
  // Stage: the slabs it fills and how ("sync", "cp_async", "tma").
  std::vector<StageCopy> copies;
  std::string mode;

  std::vector<Stmt> body;  // For, If, Stage

  // Factories: the only way passes should build statements.
  static Stmt For(std::string var, Expr extent, LoopKind kind, std::string axis,
                  std::vector<Stmt> body, Tier tier = Tier::None);
  static Stmt If(Expr cond, std::vector<Stmt> body);
  static Stmt Let(std::string var, Expr value);
  // `var` = the integer tensor[index] (an i32 tensor: a block table, a length).
  static Stmt LetLoad(std::string var, std::string tensor, std::vector<Expr> index);
  bool let_load() const { return kind == StmtKind::Let && !tensor.empty(); }
  // `var` = the old value of the i32 global counter tensor[index], which one atomic step
  // (atom.inc: old + 1 == wrap ? 0 : old + 1) advances — a work queue whose last of `wrap`
  // fetches per launch leaves it zero for the next (a zero_init temp). Where `when` is
  // false no fetch happens and `var` is 0. Kept in `value` (wrap) and `pred` (when).
  static Stmt LetFetchInc(std::string var, std::string counter, std::vector<Expr> index,
                          Expr wrap, Expr when = Expr(1));
  bool let_fetch() const { return let_load() && atomic_add; }
  // `tensor[index] = value`, an integer expression, into an i32 tensor (a shared one: the
  // persistent attention walk's producer hands each unit's index to its consumers). A
  // Write with mode "int", `value` the expression and no operands.
  static Stmt WriteInt(std::string tensor, std::vector<Expr> index, Expr value);
  bool write_int() const { return kind == StmtKind::Write && mode == "int"; }
  // `if (cond) break;` out of the innermost For: an If with mode "break" and no body, a
  // statement of the loop's own body (verified: not under an If); the loop's threads must
  // agree on `cond`. A loop whose trip count is found on the way (a work queue's walk).
  static Stmt BreakIf(Expr cond);
  bool break_if() const { return kind == StmtKind::If && mode == "break"; }
  static Stmt Load(std::string dst, std::string tensor, std::vector<Expr> index);
  static Stmt Compute(std::string dst, ScalarOp op, std::vector<Operand> args);
  static Stmt Init(std::string acc, double value);
  // `acc <- op(acc, value)`; op is Add, Max, Min or Mul (accumulate_ops_ok).
  static Stmt Accum(std::string acc, Operand value, ScalarOp op = ScalarOp::Add);
  static Stmt Write(std::string tensor, std::vector<Expr> index, Operand value);
  static Stmt Atom(std::string atom, std::string dst, std::vector<Operand> args);
  // A warp copy atom: fragment `dst`[dst_prefix] <- `atom`(shared[row_offset]), with
  // row_offset the flat offset of the row the executing lane supplies.
  static Stmt CopyAtom(std::string atom, std::string dst, std::vector<Expr> dst_prefix,
                       std::string shared, Expr row_offset);
  // A storing warp copy atom: `atom`(values) -> shared[row_offset], row_offset the flat
  // offset of the row the executing lane addresses.
  static Stmt StoreCopyAtom(std::string atom, std::string shared, Expr row_offset,
                            std::vector<Operand> values);
  static Stmt Alloc(std::string name, std::vector<Expr> extents);
  static Stmt Stage(std::string mode, std::vector<StageCopy> copies, std::vector<Stmt> body);
  static Stmt Barrier();
  // bar.sync id, threads: the `threads` threads (whole warps) that execute it with this
  // id wait for each other; threads of other warps are not held. `id` may depend on the
  // thread (e.g. 1 + threadIdx.x / 128: each warpgroup its own barrier).
  static Stmt NamedBarrier(Expr id, int threads);
  // bar.arrive id, threads: counts this thread's warp toward barrier `id`'s `threads`
  // without waiting (PTX ISA 9.7.13.1): the producer's half of a hand-off whose consumer
  // executes bar.sync id, threads. Its accesses before the arrive happen-before the
  // waiters' accesses after the barrier completes; nothing orders the other way.
  static Stmt NamedBarrierArrive(Expr id, int threads);
  bool named_barrier() const { return kind == StmtKind::Barrier && imm > 0; }
  bool named_arrive() const { return named_barrier() && mode == "arrive"; }
  static Stmt AsyncCopy(std::string dst, Expr dst_offset, std::string src, Expr src_offset,
                        int width, Expr pred);
  static Stmt AsyncCommit();
  static Stmt AsyncWait(int keep_in_flight);
  // `box_origin`: flat offset in `shared` of the box's first element; `corner`: the box's
  // first coordinate per dimension of `src` (outermost first, may lie outside `src`:
  // TMA fills out-of-range elements with zeros); `bytes`: the whole box's.
  static Stmt TmaLoad(std::string shared, Expr box_origin, std::string src,
                      std::vector<Expr> corner, std::string descriptor, Expr mbar, int64_t bytes);
  static Stmt MbarInit(Expr mbar, int arrivals);
  static Stmt FenceMbarInit();
  static Stmt MbarArriveExpectTx(Expr mbar, int64_t bytes);
  static Stmt MbarWait(Expr mbar, Expr parity);
  static Stmt MbarArrive(Expr mbar);
  static Stmt WgmmaFence();
  static Stmt WgmmaCommit();
  // `after`: f32 register values computed before the wait (codegen makes the wait depend
  // on them, so ptxas cannot hoist it above the math that produces them; see
  // loom::wgmma_wait_group_after). No effect on the interpreter.
  static Stmt WgmmaWait(int keep_in_flight, std::vector<Operand> after = {});
  static Stmt FenceProxyAsync();
  static Stmt SetMaxNReg(bool increase, int registers);
  // The reverse of TmaLoad: the box at `corner` of global `dst_tensor` <- `shared` from
  // flat offset `box_origin`, through tensor map `descriptor` (out-of-range elements of
  // the box are not written).
  static Stmt TmaStore(std::string shared, Expr box_origin, std::string dst_tensor,
                       std::vector<Expr> corner, std::string descriptor);
  static Stmt BulkCommit();
  static Stmt BulkWait(int keep_reading);
  static Stmt Specialize(std::vector<Stmt> arms);
  // mode "warpgroups": the interpreter runs each arm as one task per warpgroup (they
  // proceed independently, as on the GPU: one may wait at a named barrier for another's
  // bar.arrive); codegen is the same.
  bool per_warpgroup() const { return kind == StmtKind::Specialize && mode == "warpgroups"; }
  // relaxed: the arrive orders none of the thread's memory accesses (barrier.cluster.arrive
  // .relaxed): a barrier that only says "every CTA has started" (its mbarriers are
  // initialized: fence.mbarrier_init orders those).
  static Stmt ClusterSync(bool relaxed = false);
  // `var` = 1 in the last of `arrivals` arrivals on counter[offset], else 0. The threads
  // that reach it arrive in groups of `threads` (aligned: threadIdx.x / threads is the
  // group; the first `threads` threads of the block for split-K's fixup, one consumer
  // warpgroup for stream-K's): a group waits for its members, then arrives once. `when`
  // (s.cond, uniform over a group) false: no arrival, `var` = 1 (the group finishes alone).
  // In Tile IR each execution is one group's arrival.
  static Stmt TileArrive(std::string var, std::string counter, Expr offset, int64_t arrivals,
                         int threads, Expr when = Expr(1));
  // `dst` = op (Add, Max or Min) of `value` over each group of `lanes` consecutive lanes.
  static Stmt LaneReduce(std::string dst, ScalarOp op, Operand value, int lanes);
};

using Block = std::vector<Stmt>;

// Rewrite helpers used by many passes.
// Substitute index variables in every Expr of the subtree (extents, conds, indices, lets,
// dst_index, operand indices, pred, src_index, stage copies).
void substitute_block(Block& b, const std::map<std::string, Expr>& repl);
// Depth-first visit (pre-order); the callback may modify the statement in place.
void walk(Block& b, const std::function<void(Stmt&)>& fn);
void walk(const Block& b, const std::function<void(const Stmt&)>& fn);

}  // namespace loom
