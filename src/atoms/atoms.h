// The instruction table: every hardware instruction Loom can emit, described once as
// data. The tiler, the code generator, the resource model and the tuner read the same
// entries, so a new instruction (mma.sync, wgmma, ldmatrix, cp.async, TMA) joins Loom by
// adding an entry and its device-header wrapper — not by editing passes.
//
// An entry gives the instruction's shape, how many threads execute it together, the
// element types of its operands, and for each operand the (thread, value) -> (row, col)
// layout: which element of the operand tile value number `v` of thread `t` holds.
// For FMA the layouts are trivial (one thread, one value, element (0,0)); for mma.sync
// m16n8k16 they are the fragment layouts of the PTX ISA.
#pragma once
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "ir/dtype.h"

namespace loom {

enum class AtomKind { Compute, Copy };

// Where the operand lives before/after a copy atom.
enum class MemSpace { Register, Global, Shared };

struct OperandLayout {
  std::string name;          // "A", "B", "C", or "src"/"dst" for copies
  int rows = 1, cols = 1;    // operand tile shape
  int values_per_thread = 1;
  // (thread, value) -> (row, col) within the operand tile.
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

  // Copy atoms: bytes moved per thread and the memories they join.
  int bytes = 0;
  MemSpace src = MemSpace::Register, dst = MemSpace::Register;

  std::vector<OperandLayout> layouts;
};

const std::vector<AtomDef>& atom_table();
const AtomDef* find_atom(const std::string& id);  // nullptr when unknown
const AtomDef& atom(const std::string& id);       // throws loom::Error when unknown

// The widest global load/store atom whose width divides `bytes` (4, 8 or 16), for the
// vectorizer; nullptr when no entry fits.
const AtomDef* vector_copy_atom(MemSpace src, MemSpace dst, int bytes);

}  // namespace loom
