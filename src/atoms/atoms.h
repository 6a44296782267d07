// The instruction table: every hardware instruction Loom can emit, described once as
// data. The tiler, the code generator, the resource model and the tuner read the same
// entries, so a new instruction (mma.sync, wgmma, ldmatrix, cp.async, TMA) joins Loom by
// adding an entry and its device-header wrapper — not by editing passes.
//
// An entry gives the instruction's shape, how many threads execute it together, the
// element types of its operands, and for each operand the (thread, value) -> (row, col)
// layout: which element of the operand tile value number `v` of thread `t` holds.
// For FMA the layouts are trivial (one thread, one value, element (0,0)); for mma.sync
// m16n8k16 they are the fragment layouts of the PTX ISA; for ldmatrix they say which
// element of the loaded 8x8 matrices each register half receives. docs/atoms.md lists
// every entry with its layouts.
#pragma once
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "ir/dtype.h"
#include "ir/program.h"

namespace loom {

enum class AtomKind { Compute, Copy };

// Where the operand lives before/after a copy atom.
enum class MemSpace { Register, Global, Shared };

struct OperandLayout {
  std::string name;          // "A", "B", "C", or "src"/"dst" for copies
  int rows = 1, cols = 1;    // operand tile shape (B of an mma is K x N)
  int values_per_thread = 1;
  // (thread, value) -> (row, col) within the operand tile. Values are numbered as the
  // PTX ISA numbers fragment elements (a0, a1, ... low to high): where an element is
  // narrower than 32 bits, value v sits in register v / (4 / bytes), lower-numbered
  // values in the lower bits (two f16/bf16 per .b32, one tf32/f32).
  std::function<std::pair<int, int>(int thread, int value)> map;
};

struct AtomDef {
  std::string id;            // "fma_f32", "ld_global_v4_b32", later "mma_m16n8k16_f32_f16"
  AtomKind kind = AtomKind::Compute;
  std::string ptx;           // mnemonic as the PTX ISA spells it
  std::string ptx_section;   // PTX ISA section that defines it
  std::string wrapper;       // device-header function Loom emits for it (loom_device.cuh)
  int min_sm = 50;           // lowest compute capability (x10) that has it
  bool needs_arch_specific = false;  // sm_90a-only instructions (wgmma, setmaxnreg)

  // Compute atoms: D[m,n] += A[m,k] * B[k,n]; `threads` threads execute it together.
  int m = 1, n = 1, k = 1;
  int threads = 1;
  DType a_type = DType::F32, b_type = DType::F32, acc_type = DType::F32;

  // Copy atoms: bytes moved per thread, the width of the elements its layouts count
  // (4: b32 words; 2: the b16 of ldmatrix) and the memories they join.
  int bytes = 0;
  int element_bytes = 4;
  MemSpace src = MemSpace::Register, dst = MemSpace::Register;

  std::vector<OperandLayout> layouts;
};

const std::vector<AtomDef>& atom_table();
const AtomDef* find_atom(const std::string& id);  // nullptr when unknown
const AtomDef& atom(const std::string& id);       // throws loom::Error when unknown
// The same for a literal id: binds no std::string temporary, so GCC 13's
// -Wdangling-reference does not flag `const AtomDef& d = atom("...")` (see operand_layout).
const AtomDef& atom(const char* id);

// The layout of operand `name` ("A", "B", "C", "src", "dst") of `a`; throws loom::Error
// when the atom has no such operand. The name is a C string: every caller names the operand
// with a literal, and a std::string temporary argument made GCC 13's -Wdangling-reference
// flag each binding of the returned reference (which points into `a`, not the name).
const OperandLayout& operand_layout(const AtomDef& a, const char* name);

// The Kernel IR description of a warp-collective compute atom (mma.sync): its shape,
// types and the A, B, C layouts sampled lane by lane into tables. A pass that emits an
// Atom statement for `a` adds this to the kernel's warp_atoms, so that the verifier and
// the CPU interpreter (in loom_ir, below this table) can check and run it. Throws
// loom::Error for an atom that is not a 32-thread compute atom (wgmma: warpgroup_atom).
WarpAtom warp_atom(const AtomDef& a);

// Attention's P repack (docs/attention.md): two m16n8 C/D fragments side by side along
// N (columns 0..n-1 and n..2n-1) are, value for value, the A fragment of one k = 2n step
// when value v of A is value v % c_values of C tile v / c_values on every lane — so the
// S accumulators feed O += P V with no shuffle and no shared memory. Checks that against
// the atom's maps and throws loom::Error naming the first (lane, value) where it fails
// (or an atom whose shape has no such pairing).
void c_to_a_pairs(const AtomDef& mma);

// ---- wgmma (one warpgroup of 128 threads, sm_90a) --------------------------------------
// wgmma.mma_async m64nNk16 (f16, bf16) and m64nNk8 (tf32), f32 accumulate, N = 8..256 in
// steps of 8: ids "wgmma_m64n<N>k<K>_f32_<type>". B is always read from shared memory
// through a matrix descriptor (src/atoms/wgmma_desc.h), so an entry has no B layout;
// A comes from shared memory too ("ss") or from registers ("rs"), whose fragment is the
// entry's "A" layout. "C" is the accumulator over all 128 threads: warp w = t / 32 holds
// rows 16w..16w+15 in the mma.sync m16n8 C layout, repeated over the N/8 column blocks.

// The table's wgmma entry multiplying `in` operands (F16, BF16, TF32) with N = `n`;
// nullptr when there is none (another type, or n not a multiple of 8 in 8..256).
const AtomDef* wgmma_atom(DType in, int n);

// The Kernel IR description of a wgmma variant: threads = 128, B from shared memory, A
// from registers when `a_in_registers` (the "A" layout sampled per thread) or from shared
// memory (a_shared, empty map); C sampled over the 128 threads. Its id is
// wgmma_variant_id(a, a_in_registers) — the name of the wrapper codegen calls
// (src/codegen/wgmma_wrappers.h) — so one kernel may use both variants of one shape.
// Throws loom::Error for an atom that is not a wgmma entry.
WarpAtom warpgroup_atom(const AtomDef& a, bool a_in_registers);

// "<table id>_ss" (A and B from shared memory) or "<table id>_rs" (A from registers).
std::string wgmma_variant_id(const AtomDef& a, bool a_in_registers);
// The table entry of a variant id (and, through `a_in_registers`, which variant it is);
// nullptr when `id` names no wgmma variant.
const AtomDef* wgmma_variant(const std::string& id, bool* a_in_registers = nullptr);

// A warp operand layout in affine form: value v of lane l holds element
//   row = row_g * (l / 4) + row_t * (l % 4) + offset[v].first
//   col = col_g * (l / 4) + col_t * (l % 4) + offset[v].second
// Every mma.sync fragment layout has this form (the groupID / threadID_in_group split of
// the PTX ISA), so a pass can turn a fragment into index expressions of the lane — one
// per value, with constant offsets — instead of hand-writing them per kernel.
struct AffineLaneForm {
  int row_g = 0, row_t = 0, col_g = 0, col_t = 0;
  std::vector<std::pair<int, int>> offset;  // per value: (row, col) of lane 0
};

// The affine form of a 32-lane layout, checked against `l.map` on every lane and value;
// throws loom::Error naming the first (lane, value) it does not reproduce.
AffineLaneForm affine_lane_form(const OperandLayout& l);

// The widest single-thread load/store atom whose width divides `bytes` (4, 8 or 16), for
// the vectorizer; nullptr when no entry fits. Warp-collective copies (ldmatrix) never
// qualify: they redistribute data across lanes.
const AtomDef* vector_copy_atom(MemSpace src, MemSpace dst, int bytes);

// ---- ldmatrix addressing -------------------------------------------------------------
// ldmatrix .x1/.x2/.x4 loads `count` 8x8 matrices of b16, stacked into a (8*count) x 8
// tile: stacked row r is row r%8 of matrix r/8. Each stacked row is 16 contiguous bytes
// of shared memory whose address one lane supplies; lanes 8i..8i+7 address the rows of
// matrix i (PTX ISA "Warp-level matrix load instruction: ldmatrix").
// The `_b32` entries are the same instruction on 32-bit data: a 16-byte row is 4 words,
// so the stacked tile is (8*count) x 4 words and lane l receives word l%4 of row l/4 of
// each matrix — the tf32 fragments' (groupID, threadID_in_group) placement. There is no
// .trans view: it would split each word's halves between two lanes.

// How an operand tile lies in shared memory: Row = the elements of a tile row are
// contiguous (a 16-byte ldmatrix row is 8, or 4 b32, consecutive columns); Col = those
// of a column.
enum class Major { Row, Col };

// The stacked row whose address `lane` supplies to ldmatrix .x`count` (count 1, 2 or 4).
// The hardware ignores the addresses of lanes >= 8*count; they are given the row of lane
// % (8*count) so every lane holds a valid shared address. Throws on a bad lane or count.
int ldmatrix_row_provider(int lane, int count);

// For each of the 32 lanes, the (row, col) in the operand tile where the 16-byte row it
// addresses starts, such that `ldmatrix` leaves every thread holding `fragment` (an mma
// operand layout) of a tile stored `major`. Derived from the ldmatrix "dst" layout and the
// fragment layout alone, so kernels never hand-write fragment index math; a row runs
// over the entry's `src` columns (8 b16 or 4 b32 elements). Throws loom::Error when no
// addressing does it (e.g. a 16x16 A fragment from ldmatrix_x2, or a row-major A through
// .trans).
std::vector<std::pair<int, int>> ldmatrix_row_starts(const AtomDef& ldmatrix,
                                                     const OperandLayout& fragment, Major major);

// The Kernel IR description of an ldmatrix entry (a warp-collective shared -> register
// copy): its stacked tile and element width, the lane whose address each stacked row is
// read from (the "src" layout) and the (lane, value) -> (row, col) "dst" map. A pass
// that emits the copy adds this to the kernel's warp_copies. A stmatrix entry (registers
// -> shared: "src" the values, "dst" the rows) gives the same description with
// to_shared set. Throws loom::Error for any other atom.
WarpCopy warp_copy(const AtomDef& a);

// A per-lane integer table (32 entries, e.g. one coordinate of ldmatrix_row_starts) as an
// index expression of `lane`: a sum of terms c * ((lane / 2^lo) % 2^len), one per run of
// lane bits whose weights double (l % 16 for 0..15 repeated, 8 * (l / 16), ...). Every
// lane is checked against the table; throws loom::Error when the table is not linear in
// the lane's bits, naming the lane it misses.
Expr lane_bits_expr(const std::vector<int>& per_lane, const Expr& lane);

}  // namespace loom
