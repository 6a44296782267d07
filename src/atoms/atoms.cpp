#include "atoms/atoms.h"

#include "ir/error.h"

namespace loom {
namespace {

OperandLayout scalar_layout(const char* name) {
  return {name, 1, 1, 1, [](int, int) { return std::pair<int, int>{0, 0}; }};
}

// One thread moving `bytes` contiguous bytes: a 1 x (bytes/elem) row.
OperandLayout row_layout(const char* name, int elems) {
  return {name, 1, elems, elems, [](int, int v) { return std::pair<int, int>{0, v}; }};
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
  };
  return table;
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

const AtomDef* vector_copy_atom(MemSpace src, MemSpace dst, int bytes) {
  const AtomDef* best = nullptr;
  for (const auto& a : atom_table())
    if (a.kind == AtomKind::Copy && a.src == src && a.dst == dst && bytes % a.bytes == 0 &&
        (!best || a.bytes > best->bytes))
      best = &a;
  return best;
}

}  // namespace loom
