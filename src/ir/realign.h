// Realigned 16-byte copies (Kernel IR): a slab row of 16-bit elements whose global start
// is only 2-byte aligned (B[K, N] with N odd: row r starts at byte 2*r*N) moves as
// aligned 16-byte loads plus a per-row shift, instead of one 2-byte load per element.
//
// Two statements, spelled as tagged Load and Write (Stmt::mode) so that every pass that
// does not know them treats them as the register-array load and store they are:
//
//  chunk load    `v[c, 0:2w] = load.chunks<w> src[g] valid n`
//     Load, mode "chunks", width 2w (w = 16 / element bytes), index {g}, value n.
//     The elements wanted are src[g .. g+n) (0 <= n <= w; g a flat offset). The statement
//     loads the two aligned 16-byte chunks that cover src[g .. g+w): elements
//     a .. a+2w of the tensor's flat storage, a = g - g % w, into v[c, 0 .. 2w). A chunk
//     is read only when it holds a wanted element, so no chunk lies wholly outside the
//     tensor; a chunk that straddles the tensor's end is read element by element up to
//     the end (codegen), so no byte outside the tensor is ever read, even where the
//     tensor is a view inside a larger allocation. The registers of unread chunks and
//     unread elements are unspecified: the interpreter fills them with NaN.
//  realigned store `shared[d] = realign<w>(v[c, 0:2w], g) valid n`
//     Write, mode "realign", width w, index {d} (a shared tensor), args {v[c, 0]},
//     src_index {g} (the offset the chunks were loaded for), value n.
//     shared[d + i] = v[c, g % w + i] for i < n, and 0 for n <= i < w: the shifted
//     window, zero past the row's (or the tensor's) edge. One 16-byte shared store
//     (funnel shifts, then st.shared.v4): d must start a 16-byte unit of the slab.
//
// k:015_lower_stages emits them (REALIGN=1); the interpreter executes and checks them
// (interpret_exec.cpp), codegen emits loom::ld_chunks16 / loom::st_realign16.
#pragma once

#include "ir/stmt.h"

namespace loom {

inline constexpr const char* kChunkLoadMode = "chunks";
inline constexpr const char* kRealignStoreMode = "realign";

inline bool is_chunk_load(const Stmt& s) {
  return s.kind == StmtKind::Load && s.mode == kChunkLoadMode;
}
inline bool is_realigned_store(const Stmt& s) {
  return s.kind == StmtKind::Write && s.mode == kRealignStoreMode;
}

// `array[slot..., 0 .. 2w) <- chunks of src covering [g, g + w)`, `valid` elements wanted.
inline Stmt ChunkLoad(std::string array, std::vector<Expr> slot, std::string src, Expr g,
                      int w, Expr valid) {
  Stmt s = Stmt::Load(std::move(array), std::move(src), {std::move(g)});
  slot.push_back(Expr(0));
  s.dst_index = std::move(slot);
  s.width = 2 * w;
  s.value = std::move(valid);
  s.mode = kChunkLoadMode;
  return s;
}

// `shared[d .. d + w) <- the window at g % w of array[slot..., 0 .. 2w)`, zero from `valid`.
inline Stmt RealignedStore(std::string shared, Expr d, std::string array, std::vector<Expr> slot,
                           Expr g, int w, Expr valid) {
  slot.push_back(Expr(0));
  Stmt s = Stmt::Write(std::move(shared), {std::move(d)}, Operand::value(std::move(array), std::move(slot)));
  s.width = w;
  s.src_index = {std::move(g)};
  s.value = std::move(valid);
  s.mode = kRealignStoreMode;
  return s;
}

}  // namespace loom
