#include "passes/pipeline.h"

#include <cstdlib>
#include <set>

#include "ir/error.h"
#include "passes/passes.h"
#include "passes/symbol_spelling.h"

namespace loom {

namespace {

// Attention has its own tile and kernel lowering (t:012, k:012); the other tile and kernel
// passes are the GEMM's, whose patterns (contraction nests, slabs, epilogues) it does not
// have. Of those, k:055 (unrolling) and k:065 (launch order of a program's kernels)
// finish any program and apply to it as well; k:012 makes its own launch bounds
// (MIN_BLOCKS).
bool gemm_only(const Pass& p) {
  if (p.from == Level::Graph || p.from == Level::Loop) return p.id == "t:010_partition_loops";
  return p.id != "k:012_lower_attention" && p.id != "k:013_lower_attention_wgmma" &&
         p.id != "k:055_unroll_registers" &&
         p.id != "k:065_dependent_launch";
}

// The GEMM-only passes do nothing to a program with attention (its t:012 and k:012 run
// in their place), in run_pipeline and wherever a test runs the passes one by one.
std::vector<Pass> for_attention_or_gemm(std::vector<Pass> passes) {
  for (Pass& p : passes) {
    if (!gemm_only(p)) continue;
    p.run = [run = std::move(p.run)](CompileState& s) {
      if (!s.graph.attention()) run(s);
    };
  }
  return passes;
}

}  // namespace

// The whole compiler, in order. Each line says why the pass sits where it does.
const std::vector<Pass>& pipeline() {
  static const std::vector<Pass> gated = for_attention_or_gemm({
      // Graph -> Loop IR: every op as loops over its output, nothing decided yet.
      pass_lower_graph(),
      // Attention's two contractions and softmax become one online-softmax op first, so
      // the GEMM passes below (epilogue fusion, SWAP_AB, split-K), which look for
      // contractions, never take its pieces for GEMMs.
      pass_online_softmax(),
      // Fuse before tiling, so bias/activation/scaling ride in the GEMM's epilogue
      // and the intermediate never reaches memory.
      pass_fuse_epilogue(),
      // Swap after fusion, so the epilogue (a bias indexed by the output column) is renamed
      // with the rest of the cell, and before split-K and tiling, which then see an
      // ordinary GEMM whose rows are the output's columns.
      pass_swap_operands(),
      // Split K after fusion, so the epilogue it moves into splitk_reduce is whole, and
      // before partitioning, which tiles `s` as a grid tier like a batch loop.
      pass_split_k(),
      // The cluster's split of K after l:020's, so it splits the chunk each split-K CTA
      // owns (S clusters of c CTAs), and before partitioning, which puts q on the CLUSTER
      // tier.
      pass_cluster_k(),
      // Loop -> Tile IR: choose the grid/thread/register factorization (BM BN FM FN);
      // guards make every shape correct from here on.
      pass_partition_loops(),
      // Attention's Loop -> Tile IR (its own kernel shape: CTA per query block, warps of
      // m16 rows), where t:010 left it alone.
      pass_partition_attention(),
      // Right after partitioning, while loop ranges are still explicit: drop the
      // guards the ranges prove.
      pass_simplify_guards(),
      // Rasterize after t:020 has proven guards from the m_b/n_b loop ranges (a Let
      // states none) and before the passes below, which only look inside the tiles.
      pass_rasterize(),
      // Persistence wraps the rasterized tile loop's cell, after the tile order exists
      // and before staging, so the slab ring (t:050) sees the tile loop it turns across.
      pass_persistent(),
      // Outer-product accumulation once the cell grid and its guards are final: the
      // guards become load predicates here.
      pass_register_tile(),
      // Staging after register tiling: the hoisted per-row/per-column loads are what
      // the slabs must cover.
      pass_stage_inputs(),
      // Padding once the slabs exist, before rings copy their declarations and k:010
      // flattens accesses with the padded strides (vector widths are proven later).
      pass_pad_smem(),
      // Swizzle after padding, whose knob it must reject alongside its own, and at the
      // same point: the XOR must be on the declarations before any offset is final.
      pass_swizzle_smem(),
      // Stream-K once the slab loop exists (its units are runs of slabs) and before the
      // rings, whose count it sets per unit (ring_base).
      pass_stream_k(),
      // Rings after the slabs exist and before flattening fixes their strides.
      pass_multibuffer(),
      // Tile -> Kernel IR: tiers become blockIdx/threadIdx; accesses become offsets.
      pass_bind_hardware(),
      // Attention's Tile -> Kernel IR, right after the GEMM's (which left it alone): the
      // whole mma.sync kernel (its copies, fragments and softmax), which the GEMM passes
      // below leave alone too.
      pass_lower_attention(),
      // Its sm_90a alternative (ATTN_MMA=wgmma; k:012 then leaves the program alone): the
      // same tiled form on TMA and warpgroup MMAs.
      pass_lower_attention_wgmma(),
      // Stages become cooperative copies once threads are explicit (threadIdx splits
      // the slab among the block).
      pass_lower_stages(),
      // Atoms are chosen on kernel IR, where each statement is one thread's work.
      pass_select_atoms(),
      // Warp atoms right after the scalar ones: an mma is an ATOM nest of FMAs handed to
      // the lanes by the fragment layouts, once threads (lane) and flat offsets exist and
      // before the vectorizer looks at the per-lane fragment loads and epilogue stores.
      pass_lower_mma(),
      // The warpgroup atoms (wgmma) the same way, on the same ATOM nests: their operands
      // stay in shared memory, so only C is spread over threads.
      pass_lower_wgmma(),
      // Fragment double buffering right after the fragments exist, on the step loop as
      // k:025 shaped it (allocs, fills, mmas), before k:050 hoists the allocs it adds
      // out of the slab loop and k:055 unrolls the steps so `k_i % 2` is a constant.
      pass_frag_buffers(),
      // Roles once the mainloop is final in form (the TMA issue of k:015, the wgmma
      // group and its wait of k:026), before the vectorizer and k:050, which leaves a
      // specialized loop alone: the producer runs ahead by the ring on its own.
      pass_warp_specialize(),
      // Vector loads once accesses are flat offsets, where alignment can be proven.
      pass_vectorize(),
      // Pipelining reorders whole copy loops; it runs on their final (vector) form.
      pass_pipeline(),
      // On the final (vector) fragment loads; k:055 then marks the loops it left rolled.
      pass_interleave_loads(),
      // The TMA-store epilogue of wgmma kernels once the mainloop and the roles are final
      // (k:030's consumer arm and tile loop hold it) and k:040 has paired the stores,
      // which then go to shared memory two values at a time.
      pass_tma_store_epilogue(),
      // The staged epilogue once the mainloop is final (k:050's drain wait, k:052's
      // order): it must know what the mainloop leaves in flight and in shared memory.
      // Before k:055, which unrolls its register loops with everyone else's.
      pass_stage_epilogue(),
      // Epilogue operands by TMA once the epilogue is final in order (k:053 sorted it by
      // column strip, which the operand's strip buffers follow) and the producer exists
      // (k:030); before k:055 unrolls what is left.
      pass_tma_epilogue_operands(),
      // Unrolling is a codegen hint and must see the final register loops.
      pass_unroll_registers(),
      // Split-K's fixup joins the split kernel once both are final in form (nothing after
      // it must understand the fused kernel), before the launch bounds of the result.
      // The cluster's DSMEM reduction joins the split kernel once both are final in form,
      // like the fixup below, and before it: the fixup finishes what the clusters summed.
      pass_cluster_reduce(),
      pass_splitk_fixup(),
      // Occupancy request: a property of the finished kernel.
      pass_launch_bounds(),
      // How the finished kernels follow one another: only their number and order matter.
      pass_dependent_launch(),
  });
  return gated;
}

const Pass* find_pass(const std::string& id) {
  for (const auto& p : pipeline())
    if (p.id == id) return &p;
  return nullptr;
}

namespace {
void verify_level(const CompileState& s, Level l) {
  switch (l) {
    case Level::Graph: s.graph.verify(); break;
    case Level::Loop: verify(s.loop); break;
    case Level::Tile: verify(s.tile); break;
    case Level::Kernel: verify(s.kernel); break;
  }
}
// Loop, let and copy variables are names the passes choose (`m`, `k_i`, `m_b`, `tile`,
// `A_s_c`), and a size symbol of the same name would be shadowed inside its loop; so are
// the names of the tensors they declare. The verifiers would stop there with an
// internal-sounding message; the user gets what to rename instead.
// l:000 spelled every symbol apart that a pass would generate (symbol_spelling.h); one
// that still shares a generated name is a defect of that look-ahead.
void check_symbols_spelled_apart(const CompileState& s, const Pass& p) {
  if (const std::optional<SymbolClash> c = find_symbol_clash(s, p.id))
    throw Error("internal error: the size symbol " + c->symbol + " has the name of " + c->what +
                ", and l:000_lower_graph did not spell it apart");
}

}  // namespace

void run_pipeline(CompileState& s, const std::string& last_id, const PassObserver& observer) {
  if (!last_id.empty() && !find_pass(last_id))
    throw Error("unknown pass '" + last_id + "' (loom passes lists them)");
  for (const auto& p : pipeline()) {
    // A lowering whose level another pass already produced (t:012 and k:012 after a
    // GEMM's t:010 and k:010) is shown against that level, where it changes nothing.
    std::string before = observer ? print_level(s, s.level >= p.to ? p.to : p.from) : "";
    p.run(s);
    check_symbols_spelled_apart(s, p);
    try {
      // LOOM_VERIFY=0 skips the verifiers: a debugging aid for pass authors only.
      static const bool skip = std::getenv("LOOM_VERIFY") && std::string(std::getenv("LOOM_VERIFY")) == "0";
      if (!skip) verify_level(s, p.to);
    } catch (const Error& e) {
      // LOOM_DEBUG=1 appends the IR the verifier rejected (for whoever writes passes).
      std::string ir = std::getenv("LOOM_DEBUG") ? "\n--- IR after " + p.id + " ---\n" +
                                                       print_level(s, p.to)
                                                 : "";
      throw Error("after pass " + p.id + ": " + e.what() + ir);
    }
    // A lowering that left the program alone without reaching its level (t:010 and k:010
    // on attention) is shown unchanged too.
    if (observer) observer(p, before, s.level >= p.to ? print_level(s, p.to) : before);
    if (p.id == last_id) break;
  }
}

}  // namespace loom
