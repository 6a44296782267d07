#include "passes/bank_conflicts.h"

#include <algorithm>
#include <cstdio>
#include <set>
#include <sstream>

#include "ir/error.h"

namespace loom {

int64_t warp_wavefronts(const std::vector<std::vector<int64_t>>& lane_bytes, int elem_bytes,
                        int bytes_per_lane) {
  // 32 banks x 4 bytes = 128 bytes per wavefront: a phase holds as many lanes as fit.
  const int phase_lanes = std::max(1, 32 / std::max(1, bytes_per_lane / 4));
  int64_t total = 0;
  for (size_t first = 0; first < lane_bytes.size(); first += size_t(phase_lanes)) {
    std::vector<int64_t> words;
    size_t end = std::min(lane_bytes.size(), first + size_t(phase_lanes));
    for (size_t lane = first; lane < end; ++lane)
      for (int64_t a : lane_bytes[lane])
        for (int64_t w = a / 4; w <= (a + elem_bytes - 1) / 4; ++w) words.push_back(w);
    std::sort(words.begin(), words.end());
    words.erase(std::unique(words.begin(), words.end()), words.end());
    int64_t per_bank[32] = {};
    for (int64_t w : words) ++per_bank[w % 32];
    total += *std::max_element(per_bank, per_bank + 32);
  }
  return total;
}

namespace {

struct Frame {
  enum Kind { Loop, Let, Cond } kind;
  std::string var;  // Loop, Let
  Expr e;           // extent, value or condition
};

// One variable the access depends on and the values it takes.
struct Axis {
  std::string name;
  int64_t extent = 1;  // 0 = unknown (only the first value is taken)
  std::vector<int64_t> values;
};

class Model {
 public:
  Model(const KernelProgram& p, const KernelOp& k, const Expr::Env& symbols)
      : p_(p), k_(k), symbols_(symbols) {}

  std::vector<SharedAccessReport> run() {
    visit(k_.body);
    return out_;
  }

 private:
  void visit(const Block& b) {
    size_t mark = frames_.size();
    for (const Stmt& st : b) {
      switch (st.kind) {
        case StmtKind::Let:
          // An integer read from memory (a page number) is unknown here; 0 stands for it.
          frames_.push_back({Frame::Let, st.var, st.value});
          break;
        case StmtKind::For:
          frames_.push_back({Frame::Loop, st.var, st.extent});
          visit(st.body);
          frames_.pop_back();
          break;
        case StmtKind::If:
          frames_.push_back({Frame::Cond, "", st.cond});
          visit(st.body);
          frames_.pop_back();
          break;
        case StmtKind::Stage: visit(st.body); break;
        case StmtKind::Load:
        case StmtKind::Write:
        case StmtKind::AsyncCopy:
          if (p_.has_tensor(st.tensor) && p_.tensor(st.tensor).role == TensorRole::Shared)
            out_.push_back(analyze(st, nullptr));
          break;
        case StmtKind::Atom:
          if (const WarpCopy* w = find_warp_copy(k_, st.atom))
            if (p_.has_tensor(st.tensor) && p_.tensor(st.tensor).role == TensorRole::Shared)
              out_.push_back(analyze(st, w));
          break;
        default: break;
      }
    }
    frames_.resize(mark);
  }

  // `copy`: the declaration of a warp copy (ldmatrix), else nullptr.
  SharedAccessReport analyze(const Stmt& st, const WarpCopy* copy) {
    const TensorDecl& t = p_.tensor(st.tensor);
    SharedAccessReport r;
    r.stmt = print_block({st});
    while (!r.stmt.empty() && r.stmt.back() == '\n') r.stmt.pop_back();
    r.tensor = st.tensor;
    r.op = copy                        ? (copy->to_shared ? "stmatrix" : "ldmatrix")
           : st.kind == StmtKind::Load  ? "load"
           : st.kind == StmtKind::Write ? "store"
                                        : "cp.async";
    r.width = copy ? copy->cols : st.width;
    const int eb = dtype_bytes(t.dtype);
    r.bytes_per_lane = r.width * eb;
    // ldmatrix reads only the rows some lane addresses for a stacked row (lanes 0..8x-1).
    if (copy) {
      row_lanes_.assign(32, false);
      for (int l : copy->row_lane) row_lanes_[size_t(l)] = true;
    } else {
      row_lanes_.assign(32, true);
    }

    // exprs[0] is the offset, the rest gate the lane. A cp.async writes its destination
    // (zeros) even when its predicate is false, so only a Load's predicate gates.
    std::vector<Expr> exprs = {flat_offset(t, st.index)};
    if (st.kind == StmtKind::Load) exprs.push_back(st.pred);
    std::vector<std::pair<std::string, Expr>> loops;  // innermost first
    for (size_t i = frames_.size(); i-- > 0;) {
      const Frame& f = frames_[i];
      if (f.kind == Frame::Let) {
        std::map<std::string, Expr> repl = {{f.var, f.e}};
        for (Expr& e : exprs) e = e.substitute(repl);
        for (auto& l : loops) l.second = l.second.substitute(repl);
      } else if (f.kind == Frame::Loop) {
        loops.push_back({f.var, f.e});
      } else {
        exprs.push_back(f.e);
      }
    }

    std::set<std::string> used;
    for (const Expr& e : exprs) e.collect_vars(used);
    std::vector<Axis> axes = bind_axes(used, loops);
    std::set<std::string> bound = {"threadIdx.x"};
    for (const auto& [n, v] : symbols_) bound.insert(n);
    for (const Axis& a : axes) bound.insert(a.name);
    auto evaluable = [&](const Expr& e) {
      std::set<std::string> v;
      e.collect_vars(v);
      return std::all_of(v.begin(), v.end(), [&](const std::string& n) { return bound.count(n) != 0; });
    };
    if (!evaluable(exprs[0])) {
      r.evaluated = false;
      return r;
    }
    // A condition that cannot be evaluated counts the lane as active: drop it.
    std::vector<Expr> conds;
    for (size_t i = 1; i < exprs.size(); ++i)
      if (evaluable(exprs[i]) && !(exprs[i].is_const() && exprs[i].const_value() != 0))
        conds.push_back(exprs[i]);

    enumerate(r, t, exprs[0], conds, axes);
    return r;
  }

  Expr flat_offset(const TensorDecl& t, const std::vector<Expr>& index) const {
    if (index.size() == 1) return index[0];
    LOOM_CHECK(index.size() == t.shape.size(), "shared access rank differs from " + t.name + "'s");
    auto strides = t.strides();
    Expr off = 0;
    for (size_t d = 0; d < index.size(); ++d) off = off + index[d] * strides[d];
    return off;
  }

  // The loop variables and blockIdx components in `used`, with their values: all of
  // them when the combinations are few, else first/middle/last of each.
  std::vector<Axis> bind_axes(const std::set<std::string>& used,
                              const std::vector<std::pair<std::string, Expr>>& loops) {
    std::vector<Axis> axes;
    std::set<std::string> seen;
    auto add = [&](const std::string& name, const Expr& extent) {
      if (!used.count(name) || !seen.insert(name).second) return;
      Axis a{name, 0, {}};
      std::set<std::string> v;
      extent.collect_vars(v);
      bool known = std::all_of(v.begin(), v.end(), [&](const std::string& n) { return symbols_.count(n) != 0; });
      if (known) a.extent = std::max<int64_t>(1, extent.eval(symbols_));
      axes.push_back(a);
    };
    for (const auto& [var, extent] : loops) add(var, extent);
    const char* block_ids[3] = {"blockIdx.x", "blockIdx.y", "blockIdx.z"};
    for (int d = 0; d < 3; ++d) add(block_ids[d], k_.grid[d]);

    int64_t total = 1;
    for (const Axis& a : axes) total = std::min<int64_t>(total * std::max<int64_t>(1, a.extent), int64_t(1) << 40);
    bool all = total <= kExhaustiveLimit;
    for (Axis& a : axes) {
      if (a.extent == 0) {
        a.values = {0};
      } else if (all) {
        for (int64_t i = 0; i < a.extent; ++i) a.values.push_back(i);
      } else {
        std::set<int64_t> s = {0, (a.extent - 1) / 2, a.extent - 1};
        a.values.assign(s.begin(), s.end());
      }
    }
    return axes;
  }

  void enumerate(SharedAccessReport& r, const TensorDecl& t, const Expr& offset,
                 const std::vector<Expr>& conds, const std::vector<Axis>& axes) {
    const int eb = dtype_bytes(t.dtype);
    r.exhaustive = true;
    r.bindings_total = 1;
    for (const Axis& a : axes) {
      r.vars += (r.vars.empty() ? "" : ", ") + a.name;
      r.exhaustive &= a.extent != 0 && int64_t(a.values.size()) == a.extent;
      r.bindings_total = std::min<int64_t>(r.bindings_total * std::max<int64_t>(1, a.extent), int64_t(1) << 40);
    }
    r.wavefronts = 0;
    r.ideal = 1;
    Expr::Env env = symbols_;
    std::vector<size_t> at(axes.size(), 0);
    const int warps = (k_.block_threads + 31) / 32;
    std::vector<std::vector<int64_t>> lanes(32);
    for (;;) {
      for (size_t i = 0; i < axes.size(); ++i) env[axes[i].name] = axes[i].values[at[i]];
      ++r.bindings;
      for (int w = 0; w < warps; ++w) {
        int active = 0;
        for (int lane = 0; lane < 32; ++lane) {
          lanes[size_t(lane)].clear();
          int64_t tid = 32 * w + lane;
          if (tid >= k_.block_threads || !row_lanes_[size_t(lane)]) continue;
          env["threadIdx.x"] = tid;
          bool on = std::all_of(conds.begin(), conds.end(), [&](const Expr& c) { return c.eval(env) != 0; });
          if (!on) continue;
          ++active;
          int64_t off = offset.eval(env);
          for (int i = 0; i < r.width; ++i) lanes[size_t(lane)].push_back(t.physical(off + i) * eb);
        }
        int64_t wf = warp_wavefronts(lanes, eb, r.bytes_per_lane);
        int64_t ideal = std::max<int64_t>(1, (int64_t(active) * r.bytes_per_lane + 127) / 128);
        if (wf > r.wavefronts || (wf == r.wavefronts && ideal > r.ideal)) {
          r.wavefronts = wf;
          r.ideal = ideal;
        }
      }
      size_t i = 0;
      for (; i < axes.size(); ++i) {
        if (++at[i] < axes[i].values.size()) break;
        at[i] = 0;
      }
      if (i == axes.size()) break;
    }
  }

  const KernelProgram& p_;
  const KernelOp& k_;
  const Expr::Env& symbols_;
  std::vector<Frame> frames_;
  std::vector<SharedAccessReport> out_;
  std::vector<bool> row_lanes_;  // lanes whose address the access reads (analyze)
};

}  // namespace

std::vector<SharedAccessReport> bank_conflicts(const KernelProgram& p, const KernelOp& k,
                                               const Expr::Env& symbols) {
  return Model(p, k, symbols).run();
}

std::string format_bank_conflicts(const std::vector<SharedAccessReport>& reports) {
  std::vector<std::vector<std::string>> rows = {
      {"access", "tensor", "width", "wavefronts", "ideal", "factor", "bindings"}};
  for (const auto& r : reports) {
    char factor[32];
    std::snprintf(factor, sizeof factor, "%.2fx", r.factor());
    std::string binding =
        r.vars.empty() ? "-"
        : r.exhaustive ? "all " + std::to_string(r.bindings) + " of " + r.vars
                       : "sampled " + std::to_string(r.bindings) + "/" +
                             std::to_string(r.bindings_total) + " of " + r.vars;
    // Long statements (cp.async with its source and predicate) would widen every row.
    std::string access = r.stmt.size() > 72 ? r.stmt.substr(0, 69) + "..." : r.stmt;
    rows.push_back({access, r.tensor,
                    std::to_string(r.width) + " (" + std::to_string(r.bytes_per_lane) + " B)",
                    r.evaluated ? std::to_string(r.wavefronts) : "?", std::to_string(r.ideal),
                    r.evaluated ? factor : "? (unbound symbol)", binding});
  }
  std::vector<size_t> width(rows[0].size(), 0);
  for (const auto& row : rows)
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  std::ostringstream os;
  os << "shared-memory wavefronts per warp instruction (32 banks x 4 B; worst warp):\n";
  for (const auto& row : rows) {
    for (size_t c = 0; c < row.size(); ++c) {
      os << row[c];
      if (c + 1 < row.size()) os << std::string(width[c] - row[c].size() + 2, ' ');
    }
    os << "\n";
  }
  return os.str();
}

}  // namespace loom
