#include "atoms/atoms.h"

#include <map>

#include "ir/error.h"

namespace loom {
namespace {

using Coord = std::pair<int, int>;

OperandLayout scalar_layout(const char* name) {
  return {name, 1, 1, 1, [](int, int) { return Coord{0, 0}; }};
}

// One thread moving `bytes` contiguous bytes: a 1 x (bytes/elem) row.
OperandLayout row_layout(const char* name, int elems) {
  return {name, 1, elems, elems, [](int, int v) { return Coord{0, v}; }};
}

AtomDef fma_f32() {
  AtomDef a;
  a.id = "fma_f32";
  a.kind = AtomKind::Compute;
  a.ptx = "fma.rn.f32";
  a.ptx_section = "9.7.3.6 Floating Point Instructions: fma";
  a.wrapper = "loom::fma_f32";
  a.min_sm = 20;
  a.layouts = {scalar_layout("A"), scalar_layout("B"), scalar_layout("C")};
  return a;
}

AtomDef copy(const std::string& id, const std::string& ptx, const std::string& wrapper,
             MemSpace src, MemSpace dst, int bytes) {
  AtomDef a;
  a.id = id;
  a.kind = AtomKind::Copy;
  a.ptx = ptx;
  a.ptx_section = src == MemSpace::Register ? "9.7.9.9 Data Movement: st"
                                            : "9.7.9.8 Data Movement: ld";
  a.wrapper = wrapper;
  a.min_sm = 20;
  a.bytes = bytes;
  a.src = src;
  a.dst = dst;
  a.layouts = {row_layout("src", bytes / 4), row_layout("dst", bytes / 4)};
  return a;
}

// ---- tensor-core atoms: mma.sync (one warp, sm_80+) ----------------------------------
// The fragment layouts are the formulas of the PTX ISA (9.x numbering) sections
// 9.7.14.5.8 "Matrix Fragments for mma.m16n8k16 with floating point type" and
// 9.7.14.5.7 "Matrix Fragments for mma.m16n8k8" (.tf32). The warp is 8 groups of 4
// lanes: groupID = lane >> 2 picks a row (of A, C) or a column (of B);
// threadID_in_group = lane % 4 picks a pair of columns (A, C) or of rows (B).

int group_id(int lane) { return lane >> 2; }
int thread_in_group(int lane) { return lane % 4; }

// m16n8k16 A (16x16, a0..a7): a0,a1 at (g, 2t+{0,1}); a2,a3 eight rows down; a4..a7 the
// same, eight columns right.
OperandLayout m16n8k16_a() {
  return {"A", 16, 16, 8, [](int lane, int v) {
            return Coord{group_id(lane) + 8 * ((v >> 1) & 1),
                         2 * thread_in_group(lane) + (v & 1) + 8 * (v >> 2)};
          }};
}

// m16n8k16 B (K x N = 16x8, b0..b3): b0,b1 at rows 2t+{0,1}, b2,b3 eight rows down;
// column g.
OperandLayout m16n8k16_b() {
  return {"B", 16, 8, 4, [](int lane, int v) {
            return Coord{2 * thread_in_group(lane) + (v & 1) + 8 * (v >> 1), group_id(lane)};
          }};
}

// C/D of m16n8k16 and m16n8k8 (16x8, c0..c3): c0,c1 at (g, 2t+{0,1}); c2,c3 eight rows
// down. An f16 accumulator packs c0,c1 and c2,c3 into two .f16x2 registers.
OperandLayout m16n8_c() {
  return {"C", 16, 8, 4, [](int lane, int v) {
            return Coord{group_id(lane) + 8 * (v >> 1), 2 * thread_in_group(lane) + (v & 1)};
          }};
}

// m16n8k8 .tf32 A (16x8, a0..a3, one per .b32): a0 (g, t), a1 (g+8, t), a2 (g, t+4),
// a3 (g+8, t+4): unlike f16, consecutive values step down rows, not across columns.
OperandLayout m16n8k8_tf32_a() {
  return {"A", 16, 8, 4, [](int lane, int v) {
            return Coord{group_id(lane) + 8 * (v & 1), thread_in_group(lane) + 4 * (v >> 1)};
          }};
}

// m16n8k8 .tf32 B (K x N = 8x8, b0,b1): rows t and t+4, column g.
OperandLayout m16n8k8_tf32_b() {
  return {"B", 8, 8, 2, [](int lane, int v) {
            return Coord{thread_in_group(lane) + 4 * v, group_id(lane)};
          }};
}

AtomDef mma(const std::string& id, const std::string& ptx, int k, DType ab, DType acc,
            OperandLayout a_layout, OperandLayout b_layout) {
  AtomDef a;
  a.id = id;
  a.kind = AtomKind::Compute;
  a.ptx = ptx;
  a.ptx_section = std::string("Multiply-and-Accumulate Instruction: mma; ") +
                  (k == 16 ? "9.7.14.5.8 Matrix Fragments for mma.m16n8k16 with floating "
                             "point type"
                           : "9.7.14.5.7 Matrix Fragments for mma.m16n8k8");
  a.wrapper = "loom::" + id;
  // m16n8k16 of any type, bf16 and tf32 mma all arrived with sm_80.
  a.min_sm = 80;
  a.m = 16, a.n = 8, a.k = k;
  a.threads = 32;
  a.a_type = ab, a.b_type = ab, a.acc_type = acc;
  a.layouts = {std::move(a_layout), std::move(b_layout), m16n8_c()};
  return a;
}

// ---- ldmatrix (one warp, shared -> registers, sm_75+) -----------------------------------
// PTX ISA 9.7.14.5.15 "Warp-level matrix load instruction: ldmatrix": register i of each
// thread holds two b16 of matrix i; lane l gets row l/4, columns 2(l%4) and 2(l%4)+1.
// With .trans each matrix arrives transposed: lane l gets column l/4 of rows 2(l%4) and
// 2(l%4)+1 of the matrix as stored.
AtomDef ldmatrix_common(const std::string& id, int count, bool trans) {
  const std::string num = "x" + std::to_string(count);
  AtomDef a;
  a.id = id;
  a.kind = AtomKind::Copy;
  a.ptx = "ldmatrix.sync.aligned.m8n8." + num + (trans ? ".trans" : "") + ".shared.b16";
  a.ptx_section = "9.7.14.5.15 Warp-level matrix load instruction: ldmatrix";
  a.wrapper = "loom::" + a.id;
  a.min_sm = 75;
  a.threads = 32;
  a.bytes = 4 * count;  // received per thread: one .b32 register per matrix
  a.src = MemSpace::Shared;
  a.dst = MemSpace::Register;
  return a;
}

AtomDef ldmatrix(int count, bool trans) {
  AtomDef a = ldmatrix_common("ldmatrix_x" + std::to_string(count) + (trans ? "_trans" : ""),
                              count, trans);
  a.element_bytes = 2;
  // src: the 16-byte row a lane addresses, as 8 b16 values of the stacked tile.
  OperandLayout src{"src", 8 * count, 8, 8, [count](int lane, int v) {
                      return Coord{ldmatrix_row_provider(lane, count), v};
                    }};
  OperandLayout dst{"dst", 8 * count, 8, 2 * count, [trans](int lane, int v) {
                      const int matrix = v >> 1, pair = 2 * thread_in_group(lane) + (v & 1);
                      return trans ? Coord{8 * matrix + pair, group_id(lane)}
                                   : Coord{8 * matrix + group_id(lane), pair};
                    }};
  a.layouts = {std::move(src), std::move(dst)};
  return a;
}

// The plain (non-.trans) ldmatrix on 32-bit data: the 16-byte row is 4 words, and the
// two b16 a lane receives of each matrix (row l/4, halves 2(l%4), 2(l%4)+1) are exactly
// word l%4 of that row, whole. Each register is one 32-bit element of matrix i.
AtomDef ldmatrix_b32(int count) {
  AtomDef a = ldmatrix_common("ldmatrix_x" + std::to_string(count) + "_b32", count, false);
  a.element_bytes = 4;
  OperandLayout src{"src", 8 * count, 4, 4, [count](int lane, int v) {
                      return Coord{ldmatrix_row_provider(lane, count), v};
                    }};
  OperandLayout dst{"dst", 8 * count, 4, count, [](int lane, int v) {
                      return Coord{8 * v + group_id(lane), thread_in_group(lane)};
                    }};
  a.layouts = {std::move(src), std::move(dst)};
  return a;
}

// ---- stmatrix (one warp, registers -> shared, sm_90+) ------------------------------------
// PTX ISA 9.7.14.5.16 "Warp-level matrix store instruction: stmatrix": the inverse of
// ldmatrix — register i of each lane holds two b16 of matrix i (row l/4, columns 2(l%4),
// 2(l%4)+1; with .trans column l/4 of rows 2(l%4), 2(l%4)+1 as stored), and lane l gives
// the address of stacked row l (row l%8 of matrix l/8). Only .x4: an epilogue always has
// 8 values per lane to store, and one instruction moves them all. Layouts: "src" the
// registers ((lane, value) -> stacked (row, col), ldmatrix's "dst"), "dst" the row a lane
// addresses (ldmatrix's "src").
AtomDef stmatrix_x4(bool trans) {
  AtomDef a = ldmatrix(4, trans);
  a.id = std::string("stmatrix_x4") + (trans ? "_trans" : "");
  a.ptx = std::string("stmatrix.sync.aligned.m8n8.x4") + (trans ? ".trans" : "") + ".shared.b16";
  a.ptx_section = "9.7.14.5.16 Warp-level matrix store instruction: stmatrix";
  a.wrapper = "loom::" + a.id;
  a.min_sm = 90;
  a.src = MemSpace::Register;
  a.dst = MemSpace::Shared;
  OperandLayout rows = a.layouts[0], regs = a.layouts[1];
  rows.name = "dst";
  regs.name = "src";
  a.layouts = {std::move(regs), std::move(rows)};
  return a;
}

// ---- wgmma (one warpgroup, sm_90a) ------------------------------------------------------
// PTX ISA 9.7.15.5.1.1 "Register Fragments" (wgmma.mma_async .m64nNk16 / .m64nNk8): warp
// w = t / 32 of the warpgroup owns rows 16w..16w+15 of A (register variant) and of D, and
// within those rows each warp holds exactly the mma.sync fragment of the same type:
// m16n8k16 A (f16/bf16), m16n8k8 A (tf32), and the m16n8 C layout once per 8 columns,
// values 4j..4j+3 in column block j (CUTLASS's CLayout_64xN / ALayout_64x16 /
// ALayout_64x8 say the same). N/2 f32 accumulator values per thread.

constexpr int kWarpgroup = 128;

// A 16-row warp layout lifted to the warpgroup: warp w's rows moved down by 16w.
OperandLayout warpgroup_rows(OperandLayout warp) {
  auto map = warp.map;
  warp.rows = 64;
  warp.map = [map](int t, int v) {
    const Coord c = map(t % 32, v);
    return Coord{c.first + 16 * (t / 32), c.second};
  };
  return warp;
}

OperandLayout wgmma_c(int n) {
  const OperandLayout c = m16n8_c();
  return {"C", 64, n, n / 2, [c](int t, int v) {
            const Coord e = c.map(t % 32, v % 4);
            return Coord{e.first + 16 * (t / 32), e.second + 8 * (v / 4)};
          }};
}

AtomDef wgmma(DType in, int n) {
  const bool tf32 = in == DType::TF32;
  const std::string type = dtype_name(in);
  AtomDef a;
  a.kind = AtomKind::Compute;
  a.m = 64, a.n = n, a.k = tf32 ? 8 : 16;
  const std::string shape =
      "m64n" + std::to_string(n) + "k" + std::to_string(a.k);
  a.id = "wgmma_" + shape + "_f32_" + type;
  a.ptx = "wgmma.mma_async.sync.aligned." + shape + ".f32." + type + "." + type;
  a.ptx_section = "9.7.15.5 Asynchronous Warpgroup Level Matrix Multiply-Accumulate: "
                  "wgmma.mma_async; 9.7.15.5.1.1 Register Fragments";
  // Two wrappers per entry, generated per kernel (src/codegen/wgmma_wrappers.h): this
  // name with _ss (A from shared memory) or _rs (A from registers).
  a.wrapper = "loom::" + a.id;
  a.min_sm = 90;
  a.needs_arch_specific = true;
  a.threads = kWarpgroup;
  a.a_type = in, a.b_type = in, a.acc_type = DType::F32;
  a.layouts = {warpgroup_rows(tf32 ? m16n8k8_tf32_a() : m16n8k16_a()), wgmma_c(n)};
  return a;
}

}  // namespace

const std::vector<AtomDef>& atom_table() {
  static const std::vector<AtomDef> table = {
      fma_f32(),
      copy("ld_global_b32", "ld.global.b32", "loom::ld_global_b32", MemSpace::Global,
           MemSpace::Register, 4),
      copy("ld_global_v2_b32", "ld.global.v2.b32", "loom::ld_global_v2_b32", MemSpace::Global,
           MemSpace::Register, 8),
      copy("ld_global_v4_b32", "ld.global.v4.b32", "loom::ld_global_v4_b32", MemSpace::Global,
           MemSpace::Register, 16),
      copy("st_global_b32", "st.global.b32", "loom::st_global_b32", MemSpace::Register,
           MemSpace::Global, 4),
      copy("st_global_v2_b32", "st.global.v2.b32", "loom::st_global_v2_b32",
           MemSpace::Register, MemSpace::Global, 8),
      copy("st_global_v4_b32", "st.global.v4.b32", "loom::st_global_v4_b32",
           MemSpace::Register, MemSpace::Global, 16),
      copy("ld_shared_b32", "ld.shared.b32", "loom::ld_shared_b32", MemSpace::Shared,
           MemSpace::Register, 4),
      copy("ld_shared_v2_b32", "ld.shared.v2.b32", "loom::ld_shared_v2_b32", MemSpace::Shared,
           MemSpace::Register, 8),
      copy("ld_shared_v4_b32", "ld.shared.v4.b32", "loom::ld_shared_v4_b32", MemSpace::Shared,
           MemSpace::Register, 16),
      copy("st_shared_b32", "st.shared.b32", "loom::st_shared_b32", MemSpace::Register,
           MemSpace::Shared, 4),
      copy("st_shared_v2_b32", "st.shared.v2.b32", "loom::st_shared_v2_b32",
           MemSpace::Register, MemSpace::Shared, 8),
      copy("st_shared_v4_b32", "st.shared.v4.b32", "loom::st_shared_v4_b32",
           MemSpace::Register, MemSpace::Shared, 16),
      mma("mma_m16n8k16_f32_f16", "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", 16,
          DType::F16, DType::F32, m16n8k16_a(), m16n8k16_b()),
      mma("mma_m16n8k16_f32_bf16", "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32", 16,
          DType::BF16, DType::F32, m16n8k16_a(), m16n8k16_b()),
      mma("mma_m16n8k16_f16_f16", "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16", 16,
          DType::F16, DType::F16, m16n8k16_a(), m16n8k16_b()),
      mma("mma_m16n8k8_f32_tf32", "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32", 8,
          DType::TF32, DType::F32, m16n8k8_tf32_a(), m16n8k8_tf32_b()),
      ldmatrix(4, false),
      ldmatrix(2, false),
      ldmatrix(4, true),
      ldmatrix(2, true),
      ldmatrix_b32(4),
      ldmatrix_b32(2),
      stmatrix_x4(false),
      stmatrix_x4(true),
  };
  static const std::vector<AtomDef> with_wgmma = [] {
    std::vector<AtomDef> t = table;
    for (DType in : {DType::F16, DType::BF16, DType::TF32})
      for (int n = 8; n <= 256; n += 8) t.push_back(wgmma(in, n));
    return t;
  }();
  return with_wgmma;
}

const AtomDef* find_atom(const std::string& id) {
  for (const auto& a : atom_table())
    if (a.id == id) return &a;
  return nullptr;
}

const AtomDef& atom(const std::string& id) {
  if (const AtomDef* a = find_atom(id)) return *a;
  throw Error("unknown atom '" + id + "' (the atom table is src/atoms/atoms.cpp)");
}

const AtomDef& atom(const char* id) { return atom(std::string(id)); }

const OperandLayout& operand_layout(const AtomDef& a, const char* name) {
  std::string names;
  for (const auto& l : a.layouts) {
    if (l.name == name) return l;
    names += (names.empty() ? "" : ", ") + l.name;
  }
  throw Error("atom '" + a.id + "' has no operand '" + std::string(name) + "' (its operands: " + names +
              ")");
}

WarpAtom warp_atom(const AtomDef& a) {
  if (a.kind != AtomKind::Compute || a.threads != WarpAtom::kLanes)
    throw Error("atom '" + a.id + "' is not a warp-collective compute atom (it has " +
                std::to_string(a.threads) + " threads" +
                (a.kind == AtomKind::Copy ? " and is a copy" : "") +
                "); only mma atoms of 32 lanes have a Kernel IR warp-atom description" +
                (a.threads == kWarpgroup ? " (wgmma: warpgroup_atom)" : ""));
  WarpAtom w;
  w.id = a.id;
  w.m = a.m, w.n = a.n, w.k = a.k;
  w.a_type = a.a_type, w.b_type = a.b_type, w.acc_type = a.acc_type;
  auto sample = [](const OperandLayout& l, std::vector<Coord>& map, int& values) {
    values = l.values_per_thread;
    for (int lane = 0; lane < WarpAtom::kLanes; ++lane)
      for (int v = 0; v < values; ++v) map.push_back(l.map(lane, v));
  };
  sample(operand_layout(a, "A"), w.a, w.a_values);
  sample(operand_layout(a, "B"), w.b, w.b_values);
  sample(operand_layout(a, "C"), w.c, w.c_values);
  return w;
}

const AtomDef* wgmma_atom(DType in, int n) {
  if (n < 8 || n > 256 || n % 8 != 0) return nullptr;
  for (const AtomDef& a : atom_table())
    if (a.kind == AtomKind::Compute && a.threads == kWarpgroup && a.a_type == in && a.n == n)
      return &a;
  return nullptr;
}

std::string wgmma_variant_id(const AtomDef& a, bool a_in_registers) {
  return a.id + (a_in_registers ? "_rs" : "_ss");
}

const AtomDef* wgmma_variant(const std::string& id, bool* a_in_registers) {
  if (id.size() < 3) return nullptr;
  const std::string suffix = id.substr(id.size() - 3);
  if (suffix != "_ss" && suffix != "_rs") return nullptr;
  const AtomDef* a = find_atom(id.substr(0, id.size() - 3));
  if (!a || a->threads != kWarpgroup) return nullptr;
  if (a_in_registers) *a_in_registers = suffix == "_rs";
  return a;
}

WarpAtom warpgroup_atom(const AtomDef& a, bool a_in_registers) {
  if (a.kind != AtomKind::Compute || a.threads != kWarpgroup)
    throw Error("atom '" + a.id + "' is not a warpgroup (wgmma) atom: it has " +
                std::to_string(a.threads) + " threads; only the wgmma entries of the table "
                "(128 threads) have a warpgroup-atom description (mma.sync: warp_atom)");
  WarpAtom w;
  w.id = wgmma_variant_id(a, a_in_registers);
  w.threads = kWarpgroup;
  w.m = a.m, w.n = a.n, w.k = a.k;
  w.a_type = a.a_type, w.b_type = a.b_type, w.acc_type = a.acc_type;
  w.a_shared = !a_in_registers;
  w.b_shared = true;
  auto sample = [](const OperandLayout& l, std::vector<Coord>& map, int& values) {
    values = l.values_per_thread;
    for (int t = 0; t < kWarpgroup; ++t)
      for (int v = 0; v < values; ++v) map.push_back(l.map(t, v));
  };
  if (a_in_registers) sample(operand_layout(a, "A"), w.a, w.a_values);
  sample(operand_layout(a, "C"), w.c, w.c_values);
  return w;
}

AffineLaneForm affine_lane_form(const OperandLayout& l) {
  AffineLaneForm f;
  for (int v = 0; v < l.values_per_thread; ++v) f.offset.push_back(l.map(0, v));
  // Lane 4 is groupID 1, lane 1 threadID_in_group 1: the two unit steps.
  const Coord g = l.map(4, 0), t = l.map(1, 0);
  f.row_g = g.first - f.offset[0].first, f.col_g = g.second - f.offset[0].second;
  f.row_t = t.first - f.offset[0].first, f.col_t = t.second - f.offset[0].second;
  for (int lane = 0; lane < WarpAtom::kLanes; ++lane)
    for (int v = 0; v < l.values_per_thread; ++v) {
      const int gi = lane / 4, ti = lane % 4;
      const Coord want = l.map(lane, v);
      const Coord got{f.row_g * gi + f.row_t * ti + f.offset[size_t(v)].first,
                      f.col_g * gi + f.col_t * ti + f.offset[size_t(v)].second};
      if (got != want)
        throw Error("operand " + l.name + "'s layout is not affine in (lane / 4, lane % 4): "
                    "lane " + std::to_string(lane) + " value " + std::to_string(v) + " holds (" +
                    std::to_string(want.first) + ", " + std::to_string(want.second) +
                    "), the affine form of lanes 0, 1 and 4 predicts (" +
                    std::to_string(got.first) + ", " + std::to_string(got.second) + ")");
    }
  return f;
}

const AtomDef* vector_copy_atom(MemSpace src, MemSpace dst, int bytes) {
  const AtomDef* best = nullptr;
  for (const auto& a : atom_table())
    if (a.kind == AtomKind::Copy && a.threads == 1 && a.src == src && a.dst == dst &&
        bytes % a.bytes == 0 && (!best || a.bytes > best->bytes))
      best = &a;
  return best;
}

int ldmatrix_row_provider(int lane, int count) {
  if (count != 1 && count != 2 && count != 4)
    throw Error("ldmatrix loads 1, 2 or 4 matrices (.x1/.x2/.x4), not " +
                std::to_string(count));
  if (lane < 0 || lane >= 32)
    throw Error("ldmatrix lane " + std::to_string(lane) + " is outside the warp (0..31)");
  return lane % (8 * count);
}

std::vector<std::pair<int, int>> ldmatrix_row_starts(const AtomDef& ldm,
                                                     const OperandLayout& frag, Major major) {
  const OperandLayout& dst = operand_layout(ldm, "dst");
  const int count = dst.rows / 8, row = operand_layout(ldm, "src").cols;
  auto fail = [&](const std::string& why) {
    return Error(ldm.id + " cannot load the " + std::to_string(frag.rows) + "x" +
                 std::to_string(frag.cols) + " " + frag.name + " fragment from a " +
                 (major == Major::Row ? "row" : "column") + "-major tile: " + why);
  };
  if (dst.values_per_thread != frag.values_per_thread)
    throw fail("it gives " + std::to_string(dst.values_per_thread) +
               " values per thread, the fragment has " +
               std::to_string(frag.values_per_thread) + " (the .x" +
               std::to_string(frag.values_per_thread * count / dst.values_per_thread) +
               " variant would match)");
  // Every (lane, value) pins where its stacked row must start: the element it receives
  // lies `sc` elements along that row and must be the fragment's element (r, c).
  std::map<int, Coord> start;
  for (int lane = 0; lane < 32; ++lane)
    for (int v = 0; v < dst.values_per_thread; ++v) {
      const auto [sr, sc] = dst.map(lane, v);
      const auto [r, c] = frag.map(lane, v);
      const Coord s = major == Major::Row ? Coord{r, c - sc} : Coord{r - sc, c};
      const auto [it, fresh] = start.emplace(sr, s);
      if (!fresh && it->second != s)
        throw fail("stacked row " + std::to_string(sr) +
                   " would have to start at two places (try the other .trans variant)");
    }
  std::vector<Coord> out;
  for (int lane = 0; lane < 32; ++lane) {
    const Coord s = start.at(ldmatrix_row_provider(lane, count));
    const bool inside = major == Major::Row
                            ? s.first >= 0 && s.first < frag.rows && s.second >= 0 &&
                                  s.second + row <= frag.cols
                            : s.second >= 0 && s.second < frag.cols && s.first >= 0 &&
                                  s.first + row <= frag.rows;
    if (!inside) throw fail("lane " + std::to_string(lane) + "'s row would leave the tile");
    out.push_back(s);
  }
  return out;
}

WarpCopy warp_copy(const AtomDef& a) {
  const bool load = a.src == MemSpace::Shared && a.dst == MemSpace::Register;
  const bool store = a.src == MemSpace::Register && a.dst == MemSpace::Shared;
  if (a.kind != AtomKind::Copy || a.threads != WarpAtom::kLanes || !(load || store))
    throw Error("atom '" + a.id + "' is not a warp-collective copy between registers and "
                "shared memory; only ldmatrix and stmatrix entries have a Kernel IR warp-copy "
                "description");
  // `src`: the rows the lanes address; `dst`: the lanes' values in the stacked tile.
  const OperandLayout& src = operand_layout(a, load ? "src" : "dst");
  const OperandLayout& dst = operand_layout(a, load ? "dst" : "src");
  WarpCopy w;
  w.id = a.id;
  w.to_shared = store;
  w.rows = dst.rows, w.cols = dst.cols;
  w.element_bytes = a.element_bytes;
  w.values = dst.values_per_thread;
  // The lowest lane that supplies a row is the one the hardware reads it from.
  w.row_lane.assign(size_t(w.rows), -1);
  for (int lane = WarpAtom::kLanes - 1; lane >= 0; --lane)
    w.row_lane[size_t(src.map(lane, 0).first)] = lane;
  for (int lane = 0; lane < WarpAtom::kLanes; ++lane)
    for (int v = 0; v < w.values; ++v) w.dst.push_back(dst.map(lane, v));
  return w;
}

Expr lane_bits_expr(const std::vector<int>& per_lane, const Expr& lane) {
  constexpr int kBits = 5;
  if (per_lane.size() != size_t(WarpAtom::kLanes))
    throw Error("lane_bits_expr: a table of " + std::to_string(per_lane.size()) +
                " entries; one per lane of a warp (32) expected");
  int weight[kBits];
  for (int b = 0; b < kBits; ++b) weight[b] = per_lane[size_t(1 << b)] - per_lane[0];
  for (int l = 0; l < WarpAtom::kLanes; ++l) {
    int want = per_lane[0];
    for (int b = 0; b < kBits; ++b) want += ((l >> b) & 1) * weight[b];
    if (want != per_lane[size_t(l)])
      throw Error("lane_bits_expr: lane " + std::to_string(l) + " holds " +
                  std::to_string(per_lane[size_t(l)]) + ", the weights of lanes 1, 2, 4, 8, 16 "
                  "predict " + std::to_string(want) + ": the table is not linear in the lane bits");
  }
  Expr e(per_lane[0]);
  for (int lo = 0; lo < kBits;) {
    if (weight[lo] == 0) {
      ++lo;
      continue;
    }
    int len = 1;
    while (lo + len < kBits && weight[lo + len] == weight[lo] << len) ++len;
    Expr term = lane / Expr(int64_t(1) << lo);
    if (lo + len < kBits) term = term % Expr(int64_t(1) << len);
    e = e + term * Expr(weight[lo]);
    lo += len;
  }
  return e;
}

void c_to_a_pairs(const AtomDef& mma) {
  if (mma.threads != 32 || mma.k != 2 * mma.n)
    throw Error("the C -> A repack pairs two m" + std::to_string(mma.m) + "n" +
                std::to_string(mma.n) + " accumulator tiles into one k" +
                std::to_string(2 * mma.n) + " A fragment; " + mma.id + " is not a warp atom with k = 2n");
  const OperandLayout& A = operand_layout(mma, "A");
  const OperandLayout& C = operand_layout(mma, "C");
  if (A.values_per_thread != 2 * C.values_per_thread)
    throw Error("the C -> A repack needs A to hold two C fragments' values per lane; " +
                mma.id + " has " + std::to_string(A.values_per_thread) + " A and " +
                std::to_string(C.values_per_thread) + " C values");
  for (int lane = 0; lane < 32; ++lane)
    for (int v = 0; v < A.values_per_thread; ++v) {
      const int tile = v / C.values_per_thread;
      const auto [ra, ca] = A.map(lane, v);
      const auto [rc, cc] = C.map(lane, v % C.values_per_thread);
      if (ra != rc || ca != cc + tile * mma.n)
        throw Error(mma.id + ": A value " + std::to_string(v) + " of lane " + std::to_string(lane) +
                    " is element (" + std::to_string(ra) + ", " + std::to_string(ca) +
                    ") but C tile " + std::to_string(tile) + " holds (" + std::to_string(rc) +
                    ", " + std::to_string(cc + tile * mma.n) +
                    ") there: the accumulators cannot be read as the A fragment in place");
    }
}

}  // namespace loom
