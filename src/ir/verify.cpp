// Verifiers of the three loop-nest levels (the invariants are listed in stmt.h and in
// program.h): declarations, ops and launches here, statements in verify_body.cpp. They
// run between passes, so a message must let the pass author find the statement: each
// names the level, the op or kernel, the offending statement as it prints, and the
// rule it broke.
#include <set>

#include "ir/error.h"
#include "ir/program.h"
#include "ir/verify_body.h"

namespace loom {
namespace {

using verifier::Level;
using verifier::level_name;

void verify_shared_decl(const TensorDecl& t, Level level, const std::string& pre) {
  if (level == Level::Loop)
    throw Error(pre + "shared tensor `" + t.name +
                "` in Loop IR; shared memory appears from Tile IR on (staging passes)");
  // The block's shared memory is sized when the kernel is compiled.
  for (const Expr& d : t.shape)
    if (!d.is_const() || d.const_value() < 1)
      throw Error(pre + "shared tensor `" + t.name + "` has dimension " + d.str() +
                  "; shared tensors need positive constant shapes");
  if (t.pad < 0) throw Error(pre + "shared tensor `" + t.name + "` has a negative pad");
  if (t.overlay < 0) throw Error(pre + "shared tensor `" + t.name + "` has a negative overlay");
  if (t.row_chunk < 0) throw Error(pre + "shared tensor `" + t.name + "` has a negative row_chunk");
  if (t.row_chunk > 0) {
    // Chunks cut rows into equal column blocks stored densely one after the other.
    if (t.pad != 0)
      throw Error(pre + "shared tensor `" + t.name + "` has row_chunk " +
                  std::to_string(t.row_chunk) + " and pad " + std::to_string(t.pad) +
                  "; chunked rows are dense (TMA boxes), drop the pad");
    if (t.shape.back().const_value() % t.row_chunk != 0)
      throw Error(pre + "shared tensor `" + t.name + "` has rows of " + t.shape.back().str() +
                  " elements, not a multiple of its row_chunk " + std::to_string(t.row_chunk));
  }
  const Swizzle& z = t.swizzle;
  if (z.bits < 0 || z.base < 0 || (z.bits > 0 && z.shift < z.bits))
    throw Error(pre + "shared tensor `" + t.name + "` has swizzle<" + std::to_string(z.bits) +
                "," + std::to_string(z.base) + "," + std::to_string(z.shift) +
                ">; it needs bits, base >= 0 and shift >= bits (else the XOR is no permutation)");
  // The XOR permutes offsets within aligned blocks of 2^(base+shift+bits) elements; a
  // footprint that is not a multiple of one has offsets the swizzle moves outside it.
  int64_t n = t.footprint().const_value();
  if (z.bits > 0)
    for (int64_t o = 0; o < n; ++o)
      if (t.physical(o) >= n)
        throw Error(pre + "shared tensor `" + t.name + "`: its swizzle moves offset " +
                    std::to_string(o) + " to " + std::to_string(t.physical(o)) +
                    ", outside its " + std::to_string(n) + " elements");
}

void verify_decls(const ProgramBase& p, Level level) {
  const std::string pre = std::string(level_name(level)) + " verifier: ";
  std::set<std::string> symbols;
  for (const std::string& s : p.symbols)
    if (!symbols.insert(s).second) throw Error(pre + "symbol `" + s + "` is declared twice");
  std::set<std::string> names;
  for (const TensorDecl& t : p.tensors) {
    if (!names.insert(t.name).second)
      throw Error(pre + "tensor `" + t.name + "` is declared twice");
    if (symbols.count(t.name))
      throw Error(pre + "tensor `" + t.name + "` has the name of a symbol");
    for (const Expr& d : t.shape) {
      std::set<std::string> vars;
      d.collect_vars(vars);
      for (const std::string& v : vars)
        if (!symbols.count(v))
          throw Error(pre + "shape of tensor `" + t.name + "` uses `" + v +
                      "`, which is not a program symbol; add it to symbols");
    }
    if (t.pitched()) {
      if (t.role != TensorRole::Input && t.role != TensorRole::Output)
        throw Error(pre + "tensor `" + t.name + "` has strides but is " +
                    (t.role == TensorRole::Shared ? "shared (its layout is pad, swizzle and row_chunk)"
                                                  : "a temp (Loom allocates temps dense)") +
                    "; only inputs and the output are views of the caller's buffers");
      if (t.pitch.size() + 1 != t.shape.size())
        throw Error(pre + "tensor `" + t.name + "` has " + std::to_string(t.pitch.size()) +
                    " strides for rank " + std::to_string(t.shape.size()) +
                    "; a pitch gives the stride of every dimension but the innermost");
      for (const Expr& d : t.pitch) {
        std::set<std::string> vars;
        d.collect_vars(vars);
        for (const std::string& v : vars)
          if (!symbols.count(v))
            throw Error(pre + "strides of tensor `" + t.name + "` use `" + v +
                        "`, which is not a program symbol; add it to symbols");
      }
    }
    if (t.role == TensorRole::Shared)
      verify_shared_decl(t, level, pre);
    else if (t.pad != 0 || t.swizzle.bits != 0 || t.row_chunk != 0)
      throw Error(pre + "tensor `" + t.name + "` has a row pad or swizzle" +
                  (t.row_chunk ? " (row_chunk)" : "") +
                  "; those describe shared-memory layouts only (global tensors are dense "
                  "row-major)");
    else if (t.overlay != 0)
      throw Error(pre + "tensor `" + t.name + "` has an overlay part; only shared tensors "
                  "share storage (global tensors are separate allocations)");
  }
}

// Outputs and temps that nothing writes would be read (or returned) as garbage.
void verify_all_written(const ProgramBase& p, Level level, const std::set<std::string>& written) {
  // A zeroed temp holds zeros before any write (split-K's tile counters, which only a
  // tile.arrive updates, from k:058 on).
  for (const TensorDecl& t : p.tensors)
    if (t.role != TensorRole::Input && !t.zero_init && !written.count(t.name))
      throw Error(std::string(level_name(level)) + " verifier: " +
                  (t.role == TensorRole::Output   ? "output"
                   : t.role == TensorRole::Shared ? "shared"
                                                  : "temp") +
                  " tensor `" + t.name +
                  "` is never written; only inputs may be left unwritten (drop its "
                  "declaration if no op needs it)");
}

template <class Op>
void verify_ops(const ProgramBase& p, const std::vector<Op>& ops, Level level) {
  verify_decls(p, level);
  std::set<std::string> written;
  for (const Op& op : ops) {
    const std::string where = "op " + op.name;
    const std::string pre = std::string(level_name(level)) + " verifier: " + where + ": ";
    for (const std::string& in : op.inputs)
      if (!p.has_tensor(in)) throw Error(pre + "input tensor `" + in + "` is not declared");
    if (!p.has_tensor(op.output))
      throw Error(pre + "output tensor `" + op.output + "` is not declared");
    if (p.tensor(op.output).role == TensorRole::Input)
      throw Error(pre + "output `" + op.output + "` is an input tensor; inputs are read-only");
    verifier::BodyFacts c = verifier::check_body(p, level, where, op.body);
    if (!c.written.count(op.output))
      throw Error(pre + "never writes its output `" + op.output + "`");
    written.insert(c.written.begin(), c.written.end());
  }
  verify_all_written(p, level, written);
}

// Tensor maps and mbarriers against the kernel that declares them: each map reads a
// global tensor into a shared one with a box cuTensorMapEncodeTiled accepts (rank 1..5,
// 1..256 elements per dimension), every tma.load names one of them, and constant
// mbarrier slots lie below KernelOp::mbarriers.
void verify_tma(const ProgramBase& p, const KernelOp& k, const std::string& pre,
                const std::set<std::string>& params) {
  if (k.mbarriers < 0) throw Error(pre + "negative mbarrier count");
  std::set<std::string> maps;
  for (const TmaDescriptor& d : k.tma) {
    const std::string m = "tensor map `" + d.name + "`";
    if (!maps.insert(d.name).second) throw Error(pre + m + " is declared twice");
    if (params.count(d.name) || p.has_tensor(d.name))
      throw Error(pre + m + " has the name of a parameter or tensor");
    if (!p.has_tensor(d.tensor) || p.tensor(d.tensor).role == TensorRole::Shared)
      throw Error(pre + m + " reads `" + d.tensor + "`, which is not a global tensor");
    if (!p.has_tensor(d.shared) || p.tensor(d.shared).role != TensorRole::Shared)
      throw Error(pre + m + " fills `" + d.shared + "`, which is not a shared tensor");
    if (d.box.size() != p.tensor(d.tensor).shape.size() || d.box.empty() || d.box.size() > 5)
      throw Error(pre + m + " has a box of rank " + std::to_string(d.box.size()) + " for `" +
                  d.tensor + "` of rank " + std::to_string(p.tensor(d.tensor).shape.size()) +
                  "; TMA boxes have the tensor's rank, 1 to 5");
    for (int64_t b : d.box)
      if (b < 1 || b > 256)
        throw Error(pre + m + " has a box extent of " + std::to_string(b) +
                    "; TMA allows 1 to 256 elements per dimension");
    if (d.swizzle_bytes != 0 && d.swizzle_bytes != 32 && d.swizzle_bytes != 64 &&
        d.swizzle_bytes != 128)
      throw Error(pre + m + " has swizzle " + std::to_string(d.swizzle_bytes) +
                  " B; TMA swizzles 32, 64 or 128 B");
  }
  auto check_slot = [&](const Stmt& s) {
    if (k.mbarriers == 0) {
      std::string line = print_block({s});
      throw Error(pre + "`" + line.substr(0, line.find('\n')) +
                  "` uses an mbarrier but the kernel declares none (KernelOp::mbarriers)");
    }
    if (s.value.is_const() && (s.value.const_value() < 0 || s.value.const_value() >= k.mbarriers))
      throw Error(pre + "mbarrier slot " + s.value.str() + " is outside the kernel's " +
                  std::to_string(k.mbarriers) + " mbarriers");
  };
  walk(k.body, [&](const Stmt& s) {
    switch (s.kind) {
      case StmtKind::TmaLoad: {
        check_slot(s);
        const TmaDescriptor* d = nullptr;
        for (const TmaDescriptor& x : k.tma)
          if (x.name == s.dst) d = &x;
        if (!d) throw Error(pre + "tma.load names tensor map `" + s.dst + "`, which the kernel "
                            "does not declare");
        if (d->tensor != s.src || d->shared != s.tensor)
          throw Error(pre + "tma.load from `" + s.src + "` into `" + s.tensor +
                      "` uses tensor map `" + d->name + "`, which maps `" + d->tensor +
                      "` into `" + d->shared + "`");
        break;
      }
      case StmtKind::TmaStore: {
        const TmaDescriptor* d = nullptr;
        for (const TmaDescriptor& x : k.tma)
          if (x.name == s.dst) d = &x;
        if (!d) throw Error(pre + "tma.store names tensor map `" + s.dst + "`, which the kernel "
                            "does not declare");
        // A store's map reads boxes of its `shared` tensor and writes them into `tensor`.
        if (d->shared != s.tensor || d->tensor != s.src)
          throw Error(pre + "tma.store from `" + s.tensor + "` into `" + s.src +
                      "` uses tensor map `" + d->name + "`, whose shared tensor is `" + d->shared +
                      "` and global tensor `" + d->tensor + "`; declare a map with shared = `" +
                      s.tensor + "` and tensor = `" + s.src + "`");
        break;
      }
      case StmtKind::MbarInit:
      case StmtKind::MbarArriveExpectTx:
      case StmtKind::MbarArrive:
      case StmtKind::MbarWait: check_slot(s); break;
      default: break;
    }
  });
}

// Thread-block clusters (sm_90): Loom makes 1-D clusters along x, the CTAs blockIdx.x =
// c*C .. c*C+C-1; the launch needs a grid of whole clusters.
void verify_cluster(const KernelOp& k, const std::string& pre) {
  const std::string dims = "cluster {" + std::to_string(k.cluster[0]) + ", " +
                           std::to_string(k.cluster[1]) + ", " + std::to_string(k.cluster[2]) + "}";
  for (int c : k.cluster)
    if (c < 1) throw Error(pre + dims + ": CTAs per cluster are at least 1 in every dimension");
  if (k.cluster[1] != 1 || k.cluster[2] != 1)
    throw Error(pre + dims + ": clusters are 1-D along x (rank = blockIdx.x % cluster[0]); "
                "y and z must be 1");
  // sm_90 schedules at most 16 CTAs as one cluster (8 without the non-portable opt-in).
  if (k.cluster[0] > 16)
    throw Error(pre + dims + ": sm_90 allows at most 16 CTAs per cluster (8 portably)");
  if (k.grid[0].is_const() && k.grid[0].const_value() % k.cluster[0] != 0)
    throw Error(pre + "grid.x = " + k.grid[0].str() + " is not a multiple of the " + dims +
                "; a grid is a whole number of clusters");
}

}  // namespace

void verify(const LoopProgram& p) { verify_ops(p, p.ops, Level::Loop); }
void verify(const TileProgram& p) { verify_ops(p, p.ops, Level::Tile); }

void verify(const KernelProgram& p) {
  verify_decls(p, Level::Kernel);
  const std::set<std::string> symbols(p.symbols.begin(), p.symbols.end());
  std::set<std::string> written;
  for (const KernelOp& k : p.kernels) {
    const std::string where = "kernel " + k.name;
    const std::string pre = "Kernel IR verifier: " + where + ": ";
    // 1024 threads per block is the CUDA limit on every architecture Loom targets.
    if (k.block_threads < 1 || k.block_threads > 1024)
      throw Error(pre + "block of " + std::to_string(k.block_threads) +
                  " threads; CUDA allows 1 to 1024");
    if (k.min_blocks_per_sm < 0) throw Error(pre + "min_blocks_per_sm is negative");
    // Programmatic dependent launch orders kernels of one program only: the first kernel
    // follows whatever the caller launched before, which it must not overlap.
    if (k.wait_prior_grid && &k == &p.kernels.front())
      throw Error(pre + "waits for a prior grid but is the program's first kernel; only a "
                        "later kernel of the same program may (k:065_dependent_launch)");
    verify_cluster(k, pre);
    for (const Expr& g : k.grid) {
      std::set<std::string> vars;
      g.collect_vars(vars);
      for (const std::string& v : vars)
        if (!symbols.count(v))
          throw Error(pre + "grid dimension " + g.str() + " uses `" + v +
                      "`, which is not a program symbol");
    }
    std::set<std::string> params;
    for (const std::string& prm : k.params) {
      if (!params.insert(prm).second) throw Error(pre + "parameter `" + prm + "` is listed twice");
      if (!p.has_tensor(prm) && !symbols.count(prm))
        throw Error(pre + "parameter `" + prm + "` is neither a tensor nor a symbol");
      if (p.has_tensor(prm) && p.tensor(prm).role == TensorRole::Shared)
        throw Error(pre + "parameter `" + prm +
                    "` is a shared tensor; shared memory is declared inside the kernel, "
                    "not passed to it");
    }
    verify_tma(p, k, pre, params);
    verifier::BodyFacts c = verifier::check_body(p, Level::Kernel, where, k.body, &k);
    for (const std::string& t : c.used)
      if (!params.count(t))
        throw Error(pre + "uses tensor `" + t + "` but does not list it in its parameters");
    for (const std::string& s : p.symbols)
      if (!params.count(s))
        throw Error(pre + "symbol `" + s + "` is missing from its parameters");
    written.insert(c.written.begin(), c.written.end());
  }
  verify_all_written(p, Level::Kernel, written);
}

}  // namespace loom
