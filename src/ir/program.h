// The containers of the three loop-nest levels, plus their printers and verifiers.
//
//   LoopProgram   tensors + one LoopOp per (unfused) graph op, in execution order
//   TileProgram   tensors + one TileOp per kernel (after fusion: usually one)
//   KernelProgram tensors + one KernelOp per kernel, with launch geometry and params
//
// Tensors are declared once per program with their storage shape (row-major,
// contiguous); an operand used transposed is loaded with permuted indices, never copied.
// Shapes may hold symbols (M, N, K) when the expression leaves sizes symbolic; those
// symbols become int parameters of the kernels.
#pragma once
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "ir/dtype.h"
#include "ir/expr.h"
#include "ir/stmt.h"

namespace loom {

enum class TensorRole { Input, Output, Temp, Shared };

// XOR swizzle of a shared tensor's element offsets, CuTe's Swizzle<B, M, S>: bits
// [M, M+B) of the offset are XORed with bits [M+S, M+S+B). bits == 0 is the identity.
struct Swizzle {
  int bits = 0, base = 0, shift = 0;
  int64_t apply(int64_t offset) const;
  bool operator==(const Swizzle&) const = default;
};

struct TensorDecl {
  std::string name;
  DType dtype = DType::F32;
  std::vector<Expr> shape;  // storage shape, row-major
  TensorRole role = TensorRole::Input;
  // Shared tensors only: `pad` elements appended to every row (the innermost dimension's
  // stride becomes shape.back() + pad, breaking power-of-two row strides that put a
  // column in one bank), then the swizzle applied to the padded offset.
  int64_t pad = 0;
  Swizzle swizzle = {};
  // Shared tensors only: which part of the kernel's shared memory holds it. Part 0 lays
  // its tensors out one after the other; every part k > 0 lays its own out from byte 0
  // again, over part 0's bytes, so the buffer is the union of the parts (CUTLASS's
  // SharedStorage union of mainloop and epilogue storage). Parts take turns: a barrier
  // must separate the last access of one from the first of the next, which the
  // interpreter checks, and the part left behind has lost its contents.
  int overlay = 0;
  // Shared tensors only: rows stored as column chunks of `row_chunk` elements (0: whole
  // rows). Chunk j of every row of a 2-D slab (the last two dimensions) is stored
  // together, rows one after the other: element (r, c) of an R x L slab sits at
  //   (c / row_chunk) * R * row_chunk + r * row_chunk + c % row_chunk
  // — the layout that TMA boxes one swizzle span wide, side by side, produce for a slab
  // whose rows are wider than the span (an N-major B operand of wgmma). Needs pad 0.
  int64_t row_chunk = 0;
  // Temps only: the tensor starts all zeros and every program run leaves it all zeros
  // again (split-K's fixup workspace and tile counters, which the kernel that uses them
  // resets). The runtime clears it once when it allocates it and never poisons it; the
  // interpreter creates it zeroed.
  bool zero_init = false;
  // Inputs and outputs only: the strides (in elements) of every dimension but the
  // innermost, outermost first — a row pitch of `shape.back()` or more, a batch stride of
  // at least a batch entry's extent — for a tensor that is a view into a larger buffer
  // (a column slice, the Q part of a fused QKV output, a KV cache with spare capacity).
  // Empty: dense row-major. The innermost stride is always 1. A separate field, not `pad`:
  // a pad is a layout the passes choose for shared memory (bank conflicts) and widens every
  // row of a dense slab, while a pitch is a fact of the caller's buffer, may differ per
  // dimension (a batch stride past rows x pitch) and never extends past the last row.
  std::vector<Expr> pitch = {};
  std::vector<Expr> strides() const;  // row-major strides of `shape`, padding or pitch included
  Expr numel() const;                 // elements of the shape (padding excluded)
  // Elements of storage: padding included; for a pitched tensor, one past the last
  // element it reaches (a column-slice view's last row ends at its width, not its pitch).
  Expr footprint() const;
  // Throws when a pitch makes two elements meet (a stride below the extent of the
  // dimensions inside it, e.g. a row pitch below the row's width), naming the dimension
  // and the smallest legal stride; a no-op for dense tensors. `env` binds the symbols.
  void check_pitch(const Expr::Env& env) const;
  bool pitched() const { return !pitch.empty(); }
  // Physical element offset of a (flat, padded) offset: the swizzle. Codegen, the
  // interpreter and the bank-conflict model all go through this one function.
  // With row_chunk, the chunking comes first, then the swizzle.
  int64_t physical(int64_t offset) const {
    return swizzle.apply(row_chunk > 0 ? chunked(offset) : offset);
  }
  int64_t chunked(int64_t offset) const;  // the row_chunk permutation alone (constant shape)
};

struct LoopOp {
  std::string name;                 // e.g. "matmul", "relu"
  std::vector<std::string> inputs;  // tensors read
  std::string output;               // tensor written
  Block body;
};

struct TileOp {
  std::string name;
  std::vector<std::string> inputs;
  std::string output;
  Block body;
};

// A TMA tensor map: how the copy engine reads boxes of a global tensor. The executor
// encodes it (cuTensorMapEncodeTiled) from the tensor's device pointer and shape; the
// kernel receives it by value, as a `const __grid_constant__` parameter after `params`
// (a tensor map must live in parameter, constant or global memory, never in registers).
struct TmaDescriptor {
  std::string name;          // parameter name, e.g. "A_tmap"; TmaLoad's `dst`
  std::string tensor;        // global tensor it reads
  std::string shared;        // shared tensor its boxes land in
  std::vector<int64_t> box;  // box extents, innermost (contiguous) dimension first
  int swizzle_bytes = 0;     // 0, 32, 64 or 128: the shared tensor's Swizzle span
};

// A warp-collective compute atom (mma.sync) as Kernel IR carries it. Its 32 lanes run
// one instruction together, each holding a fragment of A (M x K), B (K x N) and C/D
// (M x N) in registers, so what a statement means depends on the fragment layouts. They
// travel here, as data, because loom_ir sits below loom_atoms (the atom table): the
// verifier and the interpreter check and run the statement from this description alone.
// warp_atom() in src/atoms/atoms.h builds one from a table entry.
//
// The same struct carries the warpgroup atoms of sm_90a (wgmma): `threads` = 128 (four
// consecutive warps, the first a multiple of 4), a fragment of C spread over all of them,
// and A and/or B read from shared memory (a_shared / b_shared: that operand's map is
// empty and the statement names the shared tile instead, stmt.h).
struct WarpAtom {
  static constexpr int kLanes = 32;
  std::string id;  // the Atom statement's `atom`, e.g. "mma_m16n8k16_f32_f16"
  int threads = kLanes;  // 32 (mma.sync) or 128 (wgmma)
  bool a_shared = false, b_shared = false;
  int m = 0, n = 0, k = 0;
  DType a_type = DType::F16, b_type = DType::F16, acc_type = DType::F32;
  // a[lane * a_values + v] = (row, col) of the A element that value v of `lane` holds
  // (lane = the thread's index among `threads`);
  // likewise b (B is K x N) and c (C and D share one layout). Each map holds every
  // element of its tile exactly once.
  std::vector<std::pair<int, int>> a, b, c;
  int a_values = 0, b_values = 0, c_values = 0;
  // tf32 A from registers filled with the slab's raw f32 bits (TF32_ROUND=none, k:026):
  // no cvt.rna, so the tensor core reads each value's top 19 bits (truncation toward
  // zero, as it reads a shared tf32 operand). The fill's loads keep the raw bits.
  bool a_truncated = false;
};

// A warp-collective copy atom (ldmatrix) as Kernel IR carries it: the 32 lanes load a
// stacked tile of `rows` x `cols` elements (16-byte rows: 8 b16, or 4 b32 for the 32-bit
// view of tf32 fragments) from shared memory together. Each lane
// supplies the address of one row (the Atom statement's flat `index`, evaluated per lane)
// and receives `values` elements of the tile into its fragment. Like WarpAtom it travels
// as data (loom_ir sits below the atom table); warp_copy() in src/atoms/atoms.h builds
// one from a table entry. `to_shared` is the reverse direction (stmatrix): each lane
// gives `values` elements (the statement's operands) and the rows are stored; `dst` then
// says where each given value lands in the stacked tile.
struct WarpCopy {
  std::string id;          // the Atom statement's `atom`, e.g. "ldmatrix_x4"
  int rows = 0, cols = 0;  // the stacked tile: 8 * matrices rows of 8 elements
  int element_bytes = 2;   // 2 (.b16) or 4 (the same instruction on 32-bit data)
  // row_lane[r]: the lane whose address the hardware reads stacked row r from (lanes
  // beyond the rows supply addresses that are ignored).
  std::vector<int> row_lane;
  // dst[lane * values + v] = (stacked row, col) that value v of `lane` receives; the map
  // holds every element of the tile exactly once.
  std::vector<std::pair<int, int>> dst;
  int values = 0;
  bool to_shared = false;  // stmatrix: registers -> shared
};

struct KernelOp {
  std::string name;                  // CUDA symbol, e.g. "k_matmul_relu"
  std::vector<std::string> params;   // tensors (pointers) then symbols (ints), in order
  Expr grid[3] = {Expr(1), Expr(1), Expr(1)};  // blockIdx.x/y/z extents
  int block_threads = 1;             // threadIdx.x extent (1-D blocks)
  // CTAs per thread-block cluster along blockIdx x/y/z (sm_90; {1,1,1}: no clusters).
  // The grid is a whole number of clusters; the CTAs of one cluster are resident together,
  // their rank is blockIdx.x % cluster[0] (1-D clusters along x, which is all Loom makes).
  int cluster[3] = {1, 1, 1};
  int min_blocks_per_sm = 0;         // __launch_bounds__ second argument when > 0
  // Programmatic dependent launch (sm_90): a kernel that waits for the grid launched before
  // it in the program starts with `griddepcontrol.wait` and is launched with the
  // programmatic-serialization attribute, so its CTAs are scheduled while the previous
  // grid drains instead of after it (the launch latency overlaps); a kernel with
  // `trigger_dependents` lets the next grid launch as soon as all its CTAs are running.
  // The wait still sees every write of the previous grid (k:065_dependent_launch).
  bool wait_prior_grid = false;
  bool trigger_dependents = false;
  std::vector<TmaDescriptor> tma;    // tensor-map parameters, after `params`
  int mbarriers = 0;                 // 8-byte mbarriers in shared memory, slots 0..n-1
  // The warp atoms its Atom statements use. Per kernel, like its tensor maps: a pass
  // that emits mma into one kernel declares them there, and codegen, the verifier and
  // the interpreter each read one KernelOp (a split-K zero-fill or reduce kernel has none).
  std::vector<WarpAtom> warp_atoms;
  std::vector<WarpCopy> warp_copies;  // the warp copy atoms (ldmatrix, stmatrix) it uses, likewise
  Block body;
};

// The warp atom `id` that `k` declares; nullptr when it declares none by that name
// (the Atom statement is then a one-thread atom such as fma_f32).
const WarpAtom* find_warp_atom(const KernelOp& k, const std::string& id);
// The warp copy atom `id` that `k` declares; nullptr when none.
const WarpCopy* find_warp_copy(const KernelOp& k, const std::string& id);

struct ProgramBase {
  std::vector<TensorDecl> tensors;
  std::vector<std::string> symbols;  // problem-size symbols, e.g. {"M","N","K"}
  // A symbol spelled apart from a generated name (Graph::symbol_names): its IR spelling ->
  // the user's name. Bindings may give its value under either.
  std::map<std::string, std::string> symbol_names;
  const TensorDecl& tensor(const std::string& name) const;  // throws when unknown
  TensorDecl& tensor(const std::string& name);
  bool has_tensor(const std::string& name) const;
};

struct LoopProgram : ProgramBase { std::vector<LoopOp> ops; };
struct TileProgram : ProgramBase { std::vector<TileOp> ops; };
struct KernelProgram : ProgramBase { std::vector<KernelOp> kernels; };

// Where each shared tensor a kernel uses lives in its dynamic shared memory (one
// `extern __shared__` buffer, 128-byte aligned pieces, overlay parts on top of each
// other). Throws for non-constant sizes.
struct SharedLayout {
  std::map<std::string, int64_t> offset_bytes;
  int64_t total_bytes = 0;     // the largest part
  std::map<int, int64_t> part_bytes;  // bytes of each part (TensorDecl::overlay) it uses
};
SharedLayout shared_layout(const KernelProgram& p, const KernelOp& k);

// The kernel's mbarriers follow its shared tensors in the same dynamic buffer (no static
// __shared__, so the buffer starts where the block's shared window does and keeps the
// alignment TMA swizzles need); a block launches with kernel_smem_bytes.
inline int64_t mbarrier_offset_bytes(const SharedLayout& l) { return (l.total_bytes + 7) / 8 * 8; }
inline int64_t kernel_smem_bytes(const SharedLayout& l, const KernelOp& k) {
  return k.mbarriers > 0 ? mbarrier_offset_bytes(l) + 8 * int64_t(k.mbarriers) : l.total_bytes;
}

// Printers: stable, line-oriented text (the -vv diffs are diffs of these).
std::string print(const LoopProgram& p);
std::string print(const TileProgram& p);
std::string print(const KernelProgram& p);
std::string print_block(const Block& b, int indent = 0);

// Verifiers: throw loom::Error naming the first broken invariant and where it is.
void verify(const LoopProgram& p);
void verify(const TileProgram& p);
void verify(const KernelProgram& p);

}  // namespace loom
