// The sm_90 forms of Kernel IR on the interpreter's machine: warpgroup MMA (wgmma) with
// its asynchrony, setmaxnreg, mbarrier arrivals, proxy fences and TMA stores with their
// bulk groups (semantics in stmt.h and interpret_shared.h).
//
// A wgmma is computed at issue — what a correct program sees — but stays in flight until
// a wgmma.wait retires its group: its shared operands are "being read" (a write to them is
// a race) and its accumulator registers are "being written" (any other statement touching
// them is an error). That is the window in which the hardware really does the work.
#include <algorithm>

#include "ir/error.h"
#include "ir/interpret_machine.h"

namespace loom::interp {
namespace {

constexpr int kWarpgroup = 128;

std::string first_line(const Stmt& s) {
  std::string text = print_block(Block{s});
  return text.substr(0, text.find('\n'));
}

// The value the tensor cores read from an operand of type `t` (tf32: cvt.rna's 19 bits;
// round_to_dtype treats tf32 as its f32 storage).
double round_to(DType t, double v) {
  return t == DType::TF32 ? double(round_to_tf32(float(v))) : round_to_dtype(t, v);
}

}  // namespace

void Machine::begin_hopper_block() {
  wgmmas_.clear();
  warpgroups_.assign(size_t(threads_ / kWarpgroup + 1), Warpgroup{});
  wgmma_in_flight_ = 0;
  bool wgmma = false;
  rs_wgmma_ = false;
  if (kernel_op_)
    for (const WarpAtom& w : kernel_op_->warp_atoms) {
      wgmma = wgmma || w.threads > WarpAtom::kLanes;
      rs_wgmma_ = rs_wgmma_ || (w.threads > WarpAtom::kLanes && !w.a_shared);
    }
  acc_writer_.assign(wgmma ? vals_.size() : 0, 0);
  fences_.assign(rs_wgmma_ ? size_t(threads_) : 0, 0);
  written_after_.assign(rs_wgmma_ ? vals_.size() : 0, 0);
}

void Machine::end_hopper_block() {
  if (wgmma_in_flight_ == 0) return;
  for (const Wgmma& w : wgmmas_)
    if (!w.retired)
      fail(*w.stmt,
           "this wgmma is still in flight when the block ends: commit it and retire its "
           "group (wgmma.commit, wgmma.wait 0) before the accumulators are stored");
}

int64_t Machine::tile_offset(const Node& n, const Access& a, int t, int64_t r, int64_t c) {
  const TensorSlot& ts = *a.tensor;
  const int64_t origin = eval(a.index[0], t), rs = eval(a.index[1], t), cs = eval(a.index[2], t);
  const int64_t off = origin + r * rs + c * cs;
  const std::string which = "element (" + std::to_string(r) + ", " + std::to_string(c) +
                            ") of the shared tile " + ts.decl->name + "[" + a.index[0].str() +
                            ", " + a.index[1].str() + ", " + a.index[2].str() + "]";
  if (off < 0 || off >= ts.size)
    fail(*n.s,
         which + " is at offset " + std::to_string(off) + ", outside the " +
             std::to_string(ts.size) + " elements of " + ts.decl->name + " " + ts.shape_str,
         t);
  if (ts.decl->pad && ts.shape.size() >= 2) {
    const int64_t row = ts.strides[ts.shape.size() - 2];
    if (off % row >= ts.shape.back())
      fail(*n.s,
           which + " is at offset " + std::to_string(off) + ", in the row padding of " +
               ts.decl->name,
           t);
  }
  return off;
}

// One wgmma per warpgroup among `active`: gather A and B (fragments through the maps, or
// shared tiles element by element), D = A·B + C with inputs rounded to the types the
// tensor cores read and the sum rounded to the accumulator type, scatter D.
void Machine::exec_wgmma(const Node& n, const std::vector<int>& active) {
  const WarpAtom& w = *n.warp;
  const Stmt& s = *n.s;
  const size_t T = size_t(threads_);
  const int G = w.threads;
  std::vector<double> a(size_t(w.m * w.k)), b(size_t(w.k * w.n)), c(size_t(w.m * w.n));
  auto gather = [&](std::vector<double>& tile, int cols,
                    const std::vector<std::pair<int, int>>& map, const ValueRef& r, int values,
                    DType type, int group, bool truncated) {
    for (int lane = 0; lane < G; ++lane) {
      const int t = group * G + lane;
      const int64_t first = fragment_slot(n, r, t, values);
      for (int v = 0; v < values; ++v) {
        const auto [row, col] = map[size_t(lane * values + v)];
        const double x = vals_[size_t(first + v) * T + size_t(t)];
        tile[size_t(row * cols + col)] =
            truncated ? double(truncate_to_tf32(float(x))) : round_to(type, x);
      }
    }
  };
  // A shared operand is one matrix descriptor for the whole warpgroup: its origin must
  // not differ between the threads that supply it.
  auto read_tile = [&](std::vector<double>& tile, int rows, int cols, const Access& at, DType type,
                       int group, int reader) {
    const int t0 = group * G;
    if (!at.index[0].uniform())
      for (int lane = 1; lane < G; ++lane)
        if (eval(at.index[0], t0 + lane) != eval(at.index[0], t0))
          fail(s,
               "the origin " + at.index[0].str() + " of shared operand " + at.tensor->decl->name +
                   " differs between threads of warpgroup " + std::to_string(group) +
                   "; wgmma takes one matrix descriptor per warpgroup",
               t0 + lane);
    for (int r = 0; r < rows; ++r)
      for (int col = 0; col < cols; ++col) {
        const int64_t off = tile_offset(n, at, t0, r, col);
        double v = shared_.async_read(reader, at.tensor->shared, off);
        if (at.tensor->decl->dtype == DType::TF32) v = double(round_to_tf32(float(v)));
        tile[size_t(r * cols + col)] = round_to(type, v);
      }
  };
  for_each_group(n, active, G, [&] { return "warpgroup atom " + w.id; }, [&](int group) {
    const int reader = w.a_shared || w.b_shared ? shared_.open_reader(group * G, s) : -1;
    if (w.a_shared) {
      read_tile(a, w.m, w.k, n.tiles[0], w.a_type, group, reader);
    } else {
      for (int lane = 0; lane < G; ++lane) {
        const int t = group * G + lane;
        const int64_t first = fragment_slot(n, n.args[0], t, w.a_values);
        for (int v = 0; v < w.a_values; ++v)
          if (written_after_[size_t(first + v) * T + size_t(t)] == fences_[size_t(t)] + 1)
            fail(s,
                 "A fragment " + n.args[0].name + " was written after this warpgroup's last "
                 "wgmma.fence: issue wgmma.fence between the fill of a register A operand and "
                 "the wgmma that reads it",
                 t);
      }
      // TF32_ROUND=none: the fill kept the raw f32 bits (no cvt.rna) and the tensor core
      // reads their top 19.
      gather(a, w.k, w.a, n.args[0], w.a_values, w.a_type, group, w.a_truncated);
    }
    if (w.b_shared)
      read_tile(b, w.k, w.n, n.tiles[1], w.b_type, group, reader);
    else
      gather(b, w.n, w.b, n.args[1], w.b_values, w.b_type, group, false);
    // scale-d 0: D = A·B, the accumulators not read (they may hold anything, e.g. the
    // NaN of a fresh alloc). One predicate for the warpgroup: it must agree.
    const int t0 = group * G;
    const int64_t accumulate = eval(n.scale_d, t0);
    for (int lane = 1; !n.scale_d.uniform() && lane < G; ++lane)
      if ((eval(n.scale_d, t0 + lane) != 0) != (accumulate != 0))
        fail(s,
             "scale_d " + s.scale_d.str() + " differs between threads of warpgroup " +
                 std::to_string(group) + "; wgmma takes one scale-d predicate per warpgroup",
             t0 + lane);
    if (accumulate != 0)
      gather(c, w.n, w.c, n.dst, w.c_values, w.acc_type, group, false);
    else
      std::fill(c.begin(), c.end(), 0.0);
    for (int row = 0; row < w.m; ++row)
      for (int col = 0; col < w.n; ++col) {
        double& d = c[size_t(row * w.n + col)];
        for (int k = 0; k < w.k; ++k) d += a[size_t(row * w.k + k)] * b[size_t(k * w.n + col)];
        d = round_to(w.acc_type, d);
      }
    const size_t op = wgmmas_.size();
    Wgmma issued{&s, reader, {}};
    // A register A is read asynchronously until the group retires, like the accumulators
    // are written: nothing may touch it before then.
    for (int lane = 0; !w.a_shared && lane < G; ++lane) {
      const int t = group * G + lane;
      const int64_t first = fragment_slot(n, n.args[0], t, w.a_values);
      for (int v = 0; v < w.a_values; ++v) {
        const size_t at = size_t(first + v) * T + size_t(t);
        acc_writer_[at] = int32_t(op + 1);
        issued.regs.push_back(at);
      }
    }
    for (int lane = 0; lane < G; ++lane) {
      const int t = group * G + lane;
      const int64_t first = fragment_slot(n, n.dst, t, w.c_values);
      for (int v = 0; v < w.c_values; ++v) {
        const auto [row, col] = w.c[size_t(lane * w.c_values + v)];
        const size_t at = size_t(first + v) * T + size_t(t);
        vals_[at] = c[size_t(row * w.n + col)];
        acc_writer_[at] = int32_t(op + 1);
        issued.regs.push_back(at);
      }
    }
    wgmmas_.push_back(std::move(issued));
    warpgroups_[size_t(group)].open.push_back(op);
    ++wgmma_in_flight_;
  });
}

void Machine::retire_wgmma(size_t op) {
  Wgmma& w = wgmmas_[op];
  if (w.retired) return;
  if (w.reader >= 0) shared_.close_reader(w.reader);
  for (size_t at : w.regs)
    if (acc_writer_[at] == int32_t(op + 1)) acc_writer_[at] = 0;
  w.regs.clear();
  w.retired = true;
  --wgmma_in_flight_;
}

// wgmma.fence / commit_group / wait_group and setmaxnreg are warpgroup-collective
// (.sync.aligned): every thread of the warpgroup executes them together.
void Machine::exec_wgmma_sync(const Node& n, const std::vector<int>& active) {
  const Stmt& s = *n.s;
  for_each_group(n, active, kWarpgroup, [&] { return first_line(s); }, [&](int group) {
    Warpgroup& g = warpgroups_[size_t(group)];
    switch (s.kind) {
      // The fence orders register accesses before the next wgmma; lockstep execution
      // already does, and setmaxnreg only moves the register budget between warpgroups.
      case StmtKind::WgmmaFence:
        for (int t = group * kWarpgroup; rs_wgmma_ && t < (group + 1) * kWarpgroup; ++t)
          ++fences_[size_t(t)];
        break;
      case StmtKind::SetMaxNReg:
        break;
      case StmtKind::WgmmaCommit:
        g.committed.push_back(std::move(g.open));
        g.open.clear();
        break;
      // Retires whole committed groups, oldest first; uncommitted wgmma stay in flight.
      case StmtKind::WgmmaWait:
        while (g.committed.size() > size_t(s.imm)) {
          for (size_t op : g.committed.front()) retire_wgmma(op);
          g.committed.pop_front();
        }
        break;
      default:
        LOOM_CHECK(false, "exec_wgmma_sync on another statement");
    }
  });
}

void Machine::check_accumulators(const Node& n, const std::vector<int>& active) {
  const Stmt& s = *n.s;
  const size_t T = size_t(threads_);
  // `a_read`: the access is another wgmma reading the registers as its A operand, which
  // an in-flight wgmma reading them as A does not conflict with (both only read: O += P V
  // split over N reads one P fragment from several wgmmas of one group).
  auto check = [&](int t, int64_t first, int64_t count, const std::string& name,
                   bool a_read = false) {
    // A register slot: -1 (no register operand) would index before the value array.
    LOOM_CHECK(first >= 0, "check_accumulators on a statement without registers there");
    for (int64_t i = 0; i < count; ++i) {
      const int32_t op = acc_writer_[size_t(first + i) * T + size_t(t)];
      if (op == 0) continue;
      const Stmt& w = *wgmmas_[size_t(op - 1)].stmt;
      if (w.args.at(0).name == name && a_read) continue;
      if (w.args.at(0).name == name)
        fail(s,
             "wgmma register A operand touched before wgmma.wait: register array " + name +
                 " is being read by `" + first_line(w) + "`, which is still in flight; "
                 "retire its group (wgmma.wait) before refilling the fragment, or fill "
                 "another one",
             t);
      fail(s,
           "wgmma accumulators read before wgmma.wait: register array " + name +
               " is being written by `" + first_line(w) +
               "`, which is still in flight; commit it and retire its group (wgmma.wait) "
               "before touching its accumulators",
           t);
    }
  };
  auto element = [&](const ValueRef& r, int t, int64_t width) {
    if (r.base >= 0) check(t, slot(n, r, t, width), width, r.name);
  };
  auto frag = [&](const ValueRef& r, int t, int values, bool a_read = false) {
    check(t, fragment_slot(n, r, t, values), values, r.name, a_read);
  };
  for (int t : active) switch (s.kind) {
      case StmtKind::Load:
        element(n.dst, t, s.width);
        break;
      case StmtKind::Write:
        if (!s.write_int()) element(n.args[0], t, s.width);  // an integer store reads no register
        break;
      case StmtKind::Compute:
      case StmtKind::Init:
      case StmtKind::Accum:
        element(n.dst, t, 1);
        for (const ValueRef& r : n.args) element(r, t, 1);
        break;
      case StmtKind::Alloc:
        check(t, n.dst.base, n.alloc_size, n.dst.name);
        break;
      case StmtKind::Atom:
        // A warp copy's registers: ldmatrix writes its dst fragment; stmatrix reads its
        // operands (an epilogue's accumulators: they must be retired first) and has no
        // register dst (n.dst is unset: fragment_slot would be -1, a slot before vals_).
        if (n.copy && n.copy->to_shared) {
          for (const ValueRef& r : n.args) element(r, t, 1);
        } else if (n.copy) {
          frag(n.dst, t, n.copy->values);
        } else if (n.warp) {
          const int values[2] = {n.warp->a_values, n.warp->b_values};
          const bool wgmma = n.warp->threads != WarpAtom::kLanes;
          for (int i = 0; i < 2; ++i)
            if (!n.tiles[i].tensor) frag(n.args[size_t(i)], t, values[i], wgmma && i == 0);
          // wgmma after wgmma on the same accumulators is ordered by the hardware: that
          // is how a K loop chains them within one group.
          if (!wgmma) frag(n.dst, t, n.warp->c_values);
        } else {
          element(n.dst, t, 1);
          for (const ValueRef& r : n.args) element(r, t, 1);
        }
        break;
      default:
        return;
    }
}

void Machine::note_register_writes(const Node& n, const std::vector<int>& active) {
  const Stmt& s = *n.s;
  const size_t T = size_t(threads_);
  auto stamp = [&](int t, int64_t first, int64_t count) {
    LOOM_CHECK(first >= 0, "note_register_writes on a statement without registers there");
    for (int64_t i = 0; i < count; ++i)
      written_after_[size_t(first + i) * T + size_t(t)] = fences_[size_t(t)] + 1;
  };
  for (int t : active) switch (s.kind) {
      case StmtKind::Load:
        if (n.dst.base >= 0) stamp(t, slot(n, n.dst, t, s.width), s.width);
        break;
      case StmtKind::Compute:
      case StmtKind::Init:
      case StmtKind::Accum:
        if (n.dst.base >= 0) stamp(t, slot(n, n.dst, t, 1), 1);
        break;
      case StmtKind::Atom:
        if (n.copy && !n.copy->to_shared)  // stmatrix writes shared memory, no register
          stamp(t, fragment_slot(n, n.dst, t, n.copy->values), n.copy->values);
        else if (!n.warp && n.dst.base >= 0)
          stamp(t, slot(n, n.dst, t, 1), 1);
        break;
      default:
        return;
    }
}

// Each issuing thread reads its box from shared memory (physical offsets, as a TMA load
// lands one) and writes the part inside the global tensor; the box stays "being read"
// until a bulk.wait.read retires the store's group.
void Machine::exec_tma_store(const Node& n, const std::vector<int>& active) {
  const Stmt& s = *n.s;
  const TensorSlot& from = *n.access.tensor;
  const TensorSlot& to = *n.src.tensor;
  const size_t rank = n.box.size();
  int64_t elems = 1;
  for (int64_t b : n.box) elems *= b;
  std::vector<int64_t> corner(rank), point(rank);
  for (int t : active) {
    const int64_t origin = offset(n, n.access, t, int(elems), true);
    for (size_t d = 0; d < rank; ++d) corner[d] = eval(n.corner[d], t);
    const int reader = shared_.open_reader(t, s);
    std::fill(point.begin(), point.end(), 0);
    for (int64_t e = 0; e < elems; ++e) {
      int64_t at = 0;
      bool inside = true;
      for (size_t d = 0; d < rank; ++d) {
        const int64_t i = corner[d] + point[d];
        inside = inside && i >= 0 && i < to.shape[d];
        at += i * to.strides[d];
      }
      const double v = shared_.async_read(reader, from.shared, origin + box_offset(from, point, n.box));
      // The tensor map clips the box at the tensor's edges: nothing outside is written.
      if (inside) to.data[size_t(at)] = round_to_dtype(to.decl->dtype, v);
      for (size_t d = rank; d-- > 0;) {
        if (++point[d] < n.box[d]) break;
        point[d] = 0;
      }
    }
    shared_.bulk_issue(t, reader);
  }
}

void Machine::exec_bulk(const Node& n, const std::vector<int>& active) {
  const Stmt& s = *n.s;
  for (int t : active) switch (s.kind) {
      case StmtKind::MbarArrive: {
        if (t == active[0]) check_elected_arrival(n, active);
        const int slot = int(eval(n.value, t));
        for (int cta : targets(n, t)) {
          if (cta != cta_) remote_[size_t(cta)] = RemoteArrival{cluster_gen_, t, slot, &s};
          shared_.mbar_arrive(slot, t, s, cta);
        }
        break;
      }
      case StmtKind::FenceProxyAsync:
        shared_.fence_proxy_async(t);
        break;
      case StmtKind::BulkCommit:
        shared_.bulk_commit(t);
        break;
      case StmtKind::BulkWait:
        shared_.bulk_wait(t, int(s.imm));
        break;
      default:
        LOOM_CHECK(false, "exec_bulk on another statement");
    }
}

}  // namespace loom::interp
