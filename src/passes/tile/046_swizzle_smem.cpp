// t:046_swizzle_smem — XOR-swizzle every shared tile with a TMA pattern (SWIZZLE).
//
// Padding breaks the power-of-two row stride by wasting space; a swizzle permutes the
// 16-byte chunks of each row instead, so the same chunk column of 8 consecutive rows
// lands on 8 different groups of 4 banks at no capacity cost — what 16-byte accesses
// down a column (ldmatrix, float4 loads of a transposed operand) need.
//
// The pattern is the one TMA writes (CU_TENSOR_MAP_SWIZZLE_{32,64,128}B), so a slab
// filled by TMA and one filled by threads read back the same way. On byte addresses it
// XORs the 16-byte chunk index (bits 4..) with the index of the 128-byte line (bits 7..),
// CuTe's Swizzle<B, 4, 3>:
//     128B: B = 3  chunk (0..7 of a 128 B span) ^= line % 8   repeats every 1024 B
//      64B: B = 2  chunk (0..3 of a  64 B span) ^= line % 4   repeats every  512 B
//      32B: B = 1  chunk (0..1 of a  32 B span) ^= line % 2   repeats every  256 B
// Loom's Swizzle acts on element offsets, so the byte bit positions drop by
// log2(element bytes): base = 4 - log2(bytes) (f32: 2, f16/bf16: 3), bits = B, and
// shift = 3 (the distance from chunk bits to line bits does not depend on the unit).
// For f32 and 128B: Swizzle<3, 2, 3> — elements 4c..4c+3 of 128-byte line l move to
// chunk c ^ (l % 8). With rows of exactly the span this is "row index mod 8" (mod 4, 2
// of line pairs / quads for 64B, 32B); rows longer than the span see the line index
// instead, so a column of 256-byte rows gets 4 distinct XOR values, not 8.
//
// Steps:
//  1. Read SWIZZLE (none: nothing changes); PAD_SMEM > 0 as well is an error (the pad
//     would shift rows off the span the XOR pattern assumes: choose one).
//  2. For every shared tensor of rank >= 2, require rows (last dimension) that are a
//     whole number of spans — the XOR stays inside one span, so the footprint then holds
//     every permuted offset — and, for STAGE=tma, rows of exactly one span (a TMA box's
//     inner dimension may not exceed its swizzle span). When PAD_KOUTER is given, the
//     slabs with the reduction dimension outer take that pad instead (t:045) and are
//     skipped: a swizzle of 16-byte chunks cannot spread 4-byte reads down their columns.
//  3. Set its swizzle. Chunks of 16 bytes move whole, so vector accesses of up to 16
//     bytes stay contiguous (k:015 and k:040 check TensorDecl::swizzle.base anyway).
#include "ir/error.h"
#include "passes/analysis.h"
#include "passes/passes.h"

namespace loom {
namespace {

int log2_exact(int64_t v) {
  int l = 0;
  while ((int64_t(1) << l) < v) ++l;
  LOOM_CHECK((int64_t(1) << l) == v, "not a power of two: " + std::to_string(v));
  return l;
}

void swizzle_tensor(TensorDecl& t, const std::string& mode, int64_t span, bool tma) {
  const int64_t eb = dtype_bytes(t.dtype);
  const Expr& last = t.shape.back();
  if (!last.is_const())
    throw Error("SWIZZLE=" + mode + ": shared tensor " + t.name + " has a symbolic row (" +
                last.str() + "); swizzled tiles need constant shapes");
  int64_t row = last.const_value() * eb;
  if (row % span != 0)
    throw Error("SWIZZLE=" + mode + " needs shared rows that are a multiple of " +
                std::to_string(span) + " bytes; " + t.name + " has rows of " +
                std::to_string(row) + " B (" + std::to_string(last.const_value()) + " " +
                dtype_name(t.dtype) +
                "): use a smaller SWIZZLE, SWIZZLE=none, or a tile whose row spans it (BK/BN)");
  if (tma && row != span)
    throw Error("SWIZZLE=" + mode + " with STAGE=tma: " + t.name + " has rows of " +
                std::to_string(row) + " B, and a TMA box's inner dimension may not exceed its " +
                std::to_string(span) + "-byte swizzle span: use SWIZZLE=" +
                (row >= 128 ? std::string("128B") : std::to_string(row) + "B") +
                " or a narrower tile");
  t.swizzle.bits = log2_exact(span / 16);
  t.swizzle.base = 4 - log2_exact(eb);
  t.swizzle.shift = 3;
}

}  // namespace

Pass pass_swizzle_smem() {
  return Pass{"t:046_swizzle_smem", Level::Tile, Level::Tile,
              "shared tiles of rank >= 2 carry the TMA XOR swizzle SWIZZLE selects",
              {"SWIZZLE", "PAD_KOUTER"},
              [](CompileState& s) {
                std::string mode = s.knobs.get_str("SWIZZLE", "none");
                s.used_knobs["SWIZZLE"] = mode;
                if (mode == "none") return;
                if (int64_t pad = s.knobs.get_int("PAD_SMEM", 0); pad > 0)
                  throw Error("PAD_SMEM=" + std::to_string(pad) + " and SWIZZLE=" + mode +
                              " both remove bank conflicts and do not compose (the pad moves "
                              "rows off the swizzle's span): choose one");
                int64_t span = std::stoll(mode.substr(0, mode.size() - 1));
                bool tma = s.knobs.get_str("STAGE", "sync") == "tma";
                std::map<std::string, bool> k_inner;
                if (s.knobs.has("PAD_KOUTER")) k_inner = shared_k_innermost(s.tile);
                for (TensorDecl& t : s.tile.tensors)
                  if (t.role == TensorRole::Shared && t.shape.size() >= 2 &&
                      !(k_inner.count(t.name) && !k_inner.at(t.name)))
                    swizzle_tensor(t, mode, span, tma);
              }};
}

}  // namespace loom
