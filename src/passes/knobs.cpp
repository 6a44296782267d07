#include "passes/knobs.h"

#include <cstdlib>
#include <sstream>

#include "ir/error.h"

namespace loom {

const std::vector<KnobDef>& knob_registry() {
  // Order here is the order knobs print in. Each knob names the pass that reads it.
  static const std::vector<KnobDef> defs = {
      {"BM", "rows of C per thread block (block tile height)", "t:010_partition_loops", 1, 1024},
      {"BN", "columns of C per thread block (block tile width)", "t:010_partition_loops", 1, 1024},
      {"FM", "rows of C per thread (register tile height)", "t:010_partition_loops", 1, 64},
      {"FN", "columns of C per thread (register tile width)", "t:010_partition_loops", 1, 64},
      {"ATOM", "compute atom of the contraction: fma (SIMT) or mma.sync m16n8k16 f16/bf16, "
       "m16n8k8 tf32 (accumulator type: ACC; FM/FN then count atoms per warp)",
       "t:010_partition_loops", 0, 0, false, {"fma", "mma_f16", "mma_bf16", "mma_tf32"}},
      {"ACC", "accumulator type of the mma atoms: f32, or f16 (ATOM=mma_f16 only: "
       "m16n8k16 .f16 accumulate, half the accumulator registers, each mma's sums rounded "
       "to f16)",
       "k:025_lower_mma", 0, 0, false, {"f32", "f16"}},
      {"SPLITK", "CTAs sharing one output tile's K reduction (1 = no split)", "l:020_split_k",
       1, 256},
      {"SPLITK_MODE", "how split-K partial sums combine", "l:020_split_k", 0, 0, false,
       {"reduce", "atomic"}},
      {"GROUP_M", "M tiles a CTA group walks before stepping along N (1 = row-major)",
       "t:025_rasterize", 1, 64},
      {"WM", "warps along m per block (0 = threads laid out without a warp tier)",
       "t:010_partition_loops", 0, 32},
      {"WN", "warps along n per block (0 = threads laid out without a warp tier)",
       "t:010_partition_loops", 0, 32},
      {"BK", "reduction depth of one staged slab", "t:040_stage_inputs", 1, 256},
      {"STAGE", "how operand slabs reach shared memory", "t:040_stage_inputs", 0, 0, false,
       {"direct", "sync", "cp_async", "tma"}},
      {"SLAB_KOUTER", "staged slabs keep the reduction dimension outermost, [BK][BM] for A: "
       "the transposed-A layout of SIMT kernels (default 1 for STAGE=sync, 0 for cp_async "
       "and tma; with cp_async the transposing copy moves 4-byte elements)",
       "t:040_stage_inputs", 0, 1},
      {"SLAB_A", "layout of A's staged slab, overriding SLAB_KOUTER for it: kinner = "
       "[BM][BK] (K contiguous, what tf32 ldmatrix reads; an A given transposed is "
       "transposed by the copy), kouter = [BK][BM]", "t:040_stage_inputs", 0, 0, false,
       {"kinner", "kouter"}},
      {"SLAB_B", "layout of B's staged slab, overriding SLAB_KOUTER for it: kinner = "
       "[BN][BK] (K contiguous: the transposed B that tf32 ldmatrix reads; a row-major B "
       "is transposed by 4-byte cp.async copies, or through registers with STAGE=sync), "
       "kouter = [BK][BN]", "t:040_stage_inputs", 0, 0, false, {"kinner", "kouter"}},
      {"STAGES", "shared buffers per staged slab (a ring)", "t:050_multibuffer", 1, 8},
      {"PIPELINE", "issue the next slab's copy before the current slab's math (0/1)",
       "k:050_pipeline", 0, 1},
      {"PAD_SMEM", "elements of padding per shared-tile row (0 = none; breaks power-of-two "
       "row strides that put a column in one bank)", "t:045_pad_smem", 0, 32},
      {"PAD_KOUTER", "elements of padding per row of the slabs whose reduction dimension "
       "is outer (M or N contiguous: [BK][BN], [BK][BM]), taken instead of PAD_SMEM and "
       "SWIZZLE there (tf32 mma default 8 with PAD_SMEM=4: conflict-free 32-bit fragment "
       "reads of both layouts)", "t:045_pad_smem", 0, 32},
      {"SWIZZLE", "XOR swizzle of shared tiles: a TMA pattern, or xor = Swizzle<B,M,S> derived "
       "from each tile's row length (excludes PAD_SMEM)",
       "t:046_swizzle_smem", 0, 0, false, {"none", "32B", "64B", "128B", "xor"}},
      {"INTERLEAVE_LOADS", "issue each fragment load right before its first FMA, as "
       "handwritten SGEMMs do (0/1; 0 = all loads of a k step, then all FMAs)",
       "k:052_interleave_loads", 0, 1},
      {"LDMATRIX", "load mma fragments from shared memory with ldmatrix (0/1; default 1: "
       "used where legal, element-wise loads elsewhere; tf32 needs K contiguous in the "
       "slab: A [BM][BK], B [BN][BK])",
       "k:025_lower_mma", 0, 1},
      {"FRAG_BUFFERS", "mma fragment register sets per slab: 2 loads the next atom step's "
       "fragments before the current step's mmas (1 = load, then multiply)",
       "k:027_frag_buffers", 1, 2},
      {"EPILOGUE", "how the accumulator tile reaches global memory: direct (each thread "
       "stores its own cells) or smem (staged through a shared tile that reuses the "
       "mainloop's bytes, then row-contiguous stores of up to 16 bytes)",
       "k:054_stage_epilogue", 0, 0, false, {"direct", "smem"}},
      {"UNROLL_K", "fully unroll constant reductions up to this many steps (0 = none)",
       "k:055_unroll_registers", 0, 256},
      {"MIN_BLOCKS", "resident blocks per SM requested via __launch_bounds__ (0 = none)",
       "k:060_launch_bounds", 0, 32},
      {"VECTORIZE", "widest vector access in elements (1 = scalar; 16 bytes at most)",
       "k:015_lower_stages", 1, 8, true},
  };
  return defs;
}

const KnobDef* find_knob(const std::string& name) {
  for (const auto& d : knob_registry())
    if (d.name == name) return &d;
  return nullptr;
}

static std::string known_knob_list() {
  std::string s;
  for (const auto& d : knob_registry()) s += (s.empty() ? "" : ", ") + d.name;
  return s;
}

void Knobs::set(const std::string& name, const std::string& value) {
  const KnobDef* def = find_knob(name);
  if (!def)
    throw Error("unknown knob '" + name + "'; known knobs: " + known_knob_list() +
                " (see docs/knobs.md)");
  if (!def->choices.empty()) {
    for (const auto& c : def->choices)
      if (c == value) {
        values_[name] = value;
        return;
      }
    std::string list;
    for (const auto& c : def->choices) list += (list.empty() ? "" : ", ") + c;
    throw Error("knob " + name + "=" + value + " is not one of: " + list);
  }
  char* end = nullptr;
  long long v = std::strtoll(value.c_str(), &end, 10);
  if (value.empty() || *end != '\0')
    throw Error("knob " + name + "=" + value + " is not an integer (" + def->doc + ")");
  if (v < def->min || v > def->max)
    throw Error("knob " + name + "=" + value + " is outside its range [" +
                std::to_string(def->min) + ", " + std::to_string(def->max) + "] (" +
                def->doc + ")");
  if (def->power_of_two && (v & (v - 1)) != 0)
    throw Error("knob " + name + "=" + value + " must be a power of two");
  values_[name] = std::to_string(v);
}

Knobs Knobs::parse(const std::string& text) {
  Knobs k;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    auto trim = [](std::string s) {
      size_t a = s.find_first_not_of(" \t"), b = s.find_last_not_of(" \t");
      return a == std::string::npos ? std::string() : s.substr(a, b - a + 1);
    };
    item = trim(item);
    if (item.empty()) continue;
    size_t eq = item.find('=');
    if (eq == std::string::npos)
      throw Error("malformed knob '" + item + "': expected NAME=VALUE, e.g. BM=64");
    k.set(trim(item.substr(0, eq)), trim(item.substr(eq + 1)));
  }
  return k;
}

Knobs Knobs::from_env_and_cli(const std::string& cli) {
  Knobs k;
  if (const char* env = std::getenv("LOOM_KNOBS")) {
    try {
      k = parse(env);
    } catch (const Error& e) {
      throw Error(std::string("in LOOM_KNOBS: ") + e.what());
    }
  }
  k.merge(parse(cli));
  return k;
}

void Knobs::merge(const Knobs& over) {
  for (const auto& [n, v] : over.values_) values_[n] = v;
}

int64_t Knobs::get_int(const std::string& name, int64_t fallback) const {
  auto it = values_.find(name);
  return it == values_.end() ? fallback : std::stoll(it->second);
}

std::string Knobs::get_str(const std::string& name, const std::string& fallback) const {
  auto it = values_.find(name);
  return it == values_.end() ? fallback : it->second;
}

std::string Knobs::str() const {
  std::string s;
  for (const auto& d : knob_registry()) {
    auto it = values_.find(d.name);
    if (it != values_.end()) s += (s.empty() ? "" : ",") + d.name + "=" + it->second;
  }
  return s;
}

}  // namespace loom
