// Factories of every pass, one per file under loop/, tile/, kernel/. The order that
// matters is the pipeline's (pipeline.cpp), not this list's.
#pragma once
#include "passes/pass.h"

namespace loom {

Pass pass_lower_graph();       // loop/000_lower_graph.cpp
Pass pass_online_softmax();    // loop/005_online_softmax.cpp
Pass pass_fuse_epilogue();     // loop/010_fuse_epilogue.cpp
Pass pass_swap_operands();     // loop/015_swap_operands.cpp
Pass pass_split_k();           // loop/020_split_k.cpp
Pass pass_cluster_k();         // loop/022_cluster_k.cpp
Pass pass_partition_loops();   // tile/010_partition_loops.cpp
Pass pass_partition_attention();  // tile/012_partition_attention.cpp
Pass pass_simplify_guards();   // tile/020_simplify_guards.cpp
Pass pass_rasterize();         // tile/025_rasterize.cpp
Pass pass_persistent();       // tile/027_persistent.cpp
Pass pass_register_tile();     // tile/030_register_tile.cpp
Pass pass_stage_inputs();      // tile/040_stage_inputs.cpp
Pass pass_pad_smem();          // tile/045_pad_smem.cpp
Pass pass_swizzle_smem();      // tile/046_swizzle_smem.cpp
Pass pass_stream_k();         // tile/048_stream_k.cpp
Pass pass_multibuffer();       // tile/050_multibuffer.cpp
Pass pass_lower_stages();      // kernel/015_lower_stages.cpp
Pass pass_bind_hardware();     // kernel/010_bind_hardware.cpp
Pass pass_lower_attention();   // kernel/012_lower_attention.cpp
Pass pass_lower_attention_wgmma();  // kernel/013_lower_attention_wgmma.cpp
Pass pass_select_atoms();      // kernel/020_select_atoms.cpp
Pass pass_lower_mma();         // kernel/025_lower_mma.cpp
Pass pass_lower_wgmma();       // kernel/026_lower_wgmma.cpp
Pass pass_frag_buffers();      // kernel/027_frag_buffers.cpp
Pass pass_warp_specialize();   // kernel/030_warp_specialize.cpp
Pass pass_tma_store_epilogue();  // kernel/053_tma_store_epilogue.cpp
Pass pass_tma_epilogue_operands();  // kernel/056_tma_epilogue_operands.cpp
Pass pass_stage_epilogue();    // kernel/054_stage_epilogue.cpp
Pass pass_unroll_registers();  // kernel/055_unroll_registers.cpp
Pass pass_vectorize();         // kernel/040_vectorize.cpp
Pass pass_pipeline();          // kernel/050_pipeline.cpp
Pass pass_interleave_loads();  // kernel/052_interleave_loads.cpp
Pass pass_cluster_reduce();    // kernel/057_cluster_reduce.cpp
Pass pass_splitk_fixup();      // kernel/058_splitk_fixup.cpp
Pass pass_launch_bounds();     // kernel/060_launch_bounds.cpp
Pass pass_dependent_launch();  // kernel/065_dependent_launch.cpp

// t:048_stream_k's f32 workspace of partial tiles (streamk_ws, streamk_ws0, ...): the
// kernel writes and reads it around its epilogue; it is never the epilogue's output (k:053).
inline bool is_stream_k_workspace(const std::string& tensor) {
  return tensor.rfind("streamk_ws", 0) == 0;
}

}  // namespace loom
