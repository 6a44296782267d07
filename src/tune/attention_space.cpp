#include "tune/attention_space.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <set>

#include "driver/compile.h"
#include "driver/run.h"
#include "ir/error.h"
#include "passes/attention_decode.h"
#include "passes/families/family.h"
#include "tune/compile_pool.h"

namespace loom::tune {

const std::vector<AttentionFamily>& attention_families() {
  // The attention kernel families' tuner spaces, declared with each family
  // (src/passes/families/attention_wgmma.cpp, attention_mma_sync.cpp), in registry order;
  // a family without one (decode attention: the split rule picks SPLIT_KV) is not searched
  // here. The table's names drop the "attention_" prefix ("wgmma", "mma_sync").
  static const std::vector<AttentionFamily> families = [] {
    std::vector<AttentionFamily> out;
    const std::string prefix = "attention_";
    for (const auto& f : kernel_families()) {
      if (f.op != FamilyOp::attention || f.tuner_space.empty()) continue;
      AttentionFamily a;
      a.name = f.name.rfind(prefix, 0) == 0 ? f.name.substr(prefix.size()) : f.name;
      a.min_cc = f.tuner_min_cc;
      a.needs_arch_accelerated = f.tuner_needs_accelerated;
      for (const auto& d : f.tuner_space) a.dims.push_back({d.knob, d.values});
      for (const auto& r : f.tuner_rules) a.only.push_back({r.knob, r.needs, r.value});
      out.push_back(std::move(a));
    }
    return out;
  }();
  return families;
}

const std::vector<AttentionDim>& attention_default_variants() {
  // The articles' rungs that are not in the families' products: output staging, SMEM->RF
  // double buffering (FRAG_BUFFERS=2 needs INTERLEAVE_LOADS=1, the default), the zeroing
  // of S, and launch bounds. Read by k:012 only (k:013 refuses them by name), so they
  // vary the mma.sync defaults only.
  static const std::vector<AttentionDim> variants = {
      {"STAGE_OUTPUT", {"1", "0"}},
      {"FRAG_BUFFERS", {"2", "1"}},
      {"ZERO_INIT", {"init", "mma"}},
      {"MIN_BLOCKS", {"1", "2"}},
  };
  return variants;
}

namespace {

bool accelerated(const Target& t) { return !t.arch.empty() && t.arch.back() == 'a'; }

// Sets knob=value on `k`, or says why it cannot: Knobs::set's message for an unknown knob
// or a value outside the knob's range.
std::string set_knob(Knobs& k, const AttentionDim& d, const std::string& value) {
  try {
    k.set(d.knob, value);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// The knobs a compilation used, defaults included (space.cpp's full_set).
Knobs full_set(const CompileState& s) {
  Knobs k;
  for (const auto& [n, v] : s.used_knobs)
    if (find_knob(n)) k.set(n, v);
  return k;
}

bool covers(const Knobs& point, const Knobs& full) {
  for (const auto& [name, value] : point.values())
    if (full.has(name) && full.get_str(name, "") != value) return false;
  return true;
}

struct Built {
  Knobs full;
  std::string why;
};

Built build(const Graph& g, const Target& target, const Knobs& k) {
  Built b;
  try {
    CompileOptions copt;
    copt.knobs = k;
    copt.target = target;
    b.full = full_set(compile_graph(g, copt).state);
  } catch (const Error& e) {
    b.why = e.what();
  }
  return b;
}

}  // namespace

std::string attention_family_of(const Knobs& k) {
  return k.get_str("ATTN_MMA", "mma_sync") == "wgmma" ? "wgmma" : "mma_sync";
}

std::vector<AttentionPoint> attention_points(const AttentionFamily& f, const Target& t) {
  std::vector<AttentionPoint> out;
  if (t.compute_capability() < f.min_cc || (f.needs_arch_accelerated && !accelerated(t)))
    return out;
  // A point with a value out of its knob's range is still enumerated, with the first
  // reason, so the report counts it as pruned (it holds the knobs that could be set).
  std::function<void(size_t, Knobs, std::string, std::string)> safe = [&](size_t i, Knobs k,
                                                                         std::string why,
                                                                         std::string asked) {
    if (i == f.dims.size()) {
      out.push_back({k, why, f.name, asked});
      return;
    }
    const AttentionDim& d = f.dims[i];
    std::vector<std::string> values = d.values;
    for (const auto& o : f.only)
      if (o.knob == d.knob && k.get_str(o.on, "") != o.value) values.resize(1);
    for (const auto& v : values) {
      Knobs next = k;
      std::string w = set_knob(next, d, v);
      safe(i + 1, next, why.empty() ? w : why, asked + (i ? "," : "") + d.knob + "=" + v);
    }
  };
  safe(0, Knobs(), "", "");
  return out;
}

double predict_attention_us(const Graph& g, const Knobs& k, const DeviceInfo& dev) {
  const Node* a = g.attention();
  if (!a) throw Error("predict_attention_us: the graph has no attention op");
  const Node& q = g.node(a->inputs[0]);
  const int cc = dev.cc_major * 10 + dev.cc_minor;
  const bool wgmma = attention_family_of(k) == "wgmma";
  // Reached fraction of the atom's dense peak, measured (see the header): the rank
  // between the families, not a promise.
  const double flop_per_clk = wgmma ? 4096 * 0.6 : (cc >= 90 ? 2620 : 2048) * 0.42;
  const double clock_hz = (dev.clock_khz > 0 ? dev.clock_khz : 1500000) * 1e3;
  const int64_t sms = std::max(1, dev.sm_count);
  const int64_t block_m =
      wgmma ? 64 * k.get_int("ATTN_WG", 2) : std::max<int64_t>(16, k.get_int("BLOCK_M", 64));
  const int64_t block_n = std::max<int64_t>(16, k.get_int("BLOCK_N", 64));
  // Decode (attention_decode.h): GQA_PACK makes a KV head's query heads one row set,
  // SPLIT_KV multiplies the CTAs.
  // The serving forms (docs/attention.md): varlen's Q is [T, Hq, D] with B = cu_seqlens_q's
  // length - 1 sequences and a grid of max_seqlen_q rows each; paged K and V are pools read
  // through BT [B, maxp] (maxp·page keys per sequence at most).
  const Node& kv = g.node(a->inputs[1]);
  const bool varlen = a->varlen_attention(), paged = a->paged_attention();
  const int64_t group = std::max<int64_t>(1, q.shape[1].value / std::max<int64_t>(1, kv.shape[1].value));
  const int64_t pack = !wgmma && k.get_int("GQA_PACK", 0) != 0 ? group : 1;
  const int64_t splits = wgmma ? 1 : std::max<int64_t>(1, k.get_int("SPLIT_KV", 1));
  const int64_t batch = varlen ? g.node(a->inputs[3]).shape[0].value - 1 : q.shape[0].value;
  const int64_t rows = (varlen ? a->attention.max_seqlen_q : q.shape[2].value) * pack,
                heads = batch * q.shape[1].value / pack;
  const int64_t ctas = heads * ((rows + block_m - 1) / block_m) * splits;
  // One CTA per SM at a time (these kernels fill an SM's registers or shared memory);
  // the last wave's idle SMs count.
  const double waves = std::ceil(double(ctas) / double(sms));
  const double wave_eff = double(ctas) / (waves * double(sms));
  const double block_overhead = 1.0 + 16.0 / double(block_n);
  const double math_s = expression_flops(g) / (flop_per_clk * clock_hz * double(sms));
  // The bytes of K and V, read once per row set that needs them (group / pack times):
  // what bounds decode. DRAM at 80 % of the bus's peak (3.35 TB/s on an H100 SXM).
  const double bus = dev.mem_clock_khz > 0 && dev.mem_bus_width > 0
                         ? 2.0 * dev.mem_clock_khz * 1e3 * dev.mem_bus_width / 8
                         : 3.35e12;
  double kv_elems = 1;
  for (const Dim& d : kv.shape) kv_elems *= double(d.value);
  if (paged) {  // the table's pages, not the whole pool
    const Node& bt = g.node(a->inputs[3]);
    kv_elems = double(bt.shape[0].value * bt.shape[1].value) * kv_elems / double(kv.shape[0].value);
  }
  const double kv_bytes = 2.0 * kv_elems * 2.0;
  const double memory_s = kv_bytes * double(group / pack) / (0.8 * bus);
  // The second kernel, overlapped in part; in the split kernel's last CTA (COMBINE=
  // last_cta) no launch, but one CTA reads the row set's S partials alone.
  const double combine_us =
      splits <= 1 ? 0.0 : k.get_str("COMBINE", "kernel") == "last_cta" ? 2.0 : 4.0;
  // The wgmma kernel's per-CTA fixed cost — Q's load, the first K/V block's latency, the
  // epilogue — about kFixedBlocks key blocks (1k tokens at D = 128 ran 0.76x cuDNN where
  // 16k ran 1.04x: (10 / (10 + F)) / (147 / (147 + F)) = 0.655 / 0.896 gives F ~ 5);
  // ATTN_PERSISTENT=1 runs the next unit's loads under it, leaving kWalkBlocks. The
  // other points' predictions keep their form: the walk's is theirs scaled by the ratio.
  // Causal: with ATTN_SCHEDULE=dynamic (the work counter, longest unit first; the units
  // unpadded) the same gain over the average unit's blocks (half the keys): measured
  // (H200, 2026-11-28, 16k tokens) D = 128 1k 0.813x -> 0.852x cuDNN, 4k 0.950x -> 1.024x,
  // D = 256 0.806x -> 0.920x / 0.902x -> 1.025x. The static stride: no gain predicted
  // (D = 128 1k 0.713x, D = 256 0.683x / 0.656x: it deals each CTA its units whatever
  // their lengths). The tuner still measures both (the space keeps both schedules).
  double walk = 1.0;
  const int64_t keys = kv.shape[2].value;  // dense: varlen's walk not modelled, paged refused
  const bool causal = a->attention.causal != Causal::None;
  const bool dynamic = k.get_str("ATTN_SCHEDULE", causal ? "dynamic" : "static") == "dynamic";
  if (wgmma && k.get_int("ATTN_PERSISTENT", 0) != 0 && !varlen && !paged && keys > 0 &&
      (!causal || dynamic)) {
    constexpr double kFixedBlocks = 5.0, kWalkBlocks = 1.0;
    double blocks = std::ceil(double(keys) / double(block_n));
    if (causal) blocks = (blocks + 1.0) / 2.0;
    walk = (blocks + kWalkBlocks) / (blocks + kFixedBlocks);
  }
  return std::max(math_s * block_overhead * walk, memory_s) * 1e6 / wave_eff + 5.0 + combine_us;
}

Space generate_attention_space(const Graph& g, const DeviceInfo& dev, const Target& t,
                               const SpaceOptions& opt) {
  if (!g.attention()) throw Error("generate_attention_space: the expression has no attention op");
  // The serving forms (paged KV, varlen) are searched like the dense op, on both kernels
  // (k:013 reads pages and packed rows too), and recorded under keys of their own
  // (tuning_key.cpp: attention_signature names the pools, the table, the packed rows).
  for (const Node& n : g.nodes)
    for (const Dim& d : n.shape)
      if (d.is_sym())
        throw Error("the tuner tunes one shape: dimension " + d.sym +
                    " has no value (bind it, e.g. --dims " + d.sym + "=4096)");
  const Target target = target_for(t, dev);
  Space space;
  std::set<std::string> seen;
  std::vector<Candidate> defaults;

  // The shipped defaults: what `loom run` compiles without knobs, and each family's own
  // where a knob selects it (ATTN_MMA=mma_sync on sm_90a once the wgmma kernel is the
  // default there). They are kept whatever the ranking, and their variants searched.
  std::vector<Knobs> requests = {Knobs()};
  for (const auto& f : attention_families())
    if (target.compute_capability() >= f.min_cc && (!f.needs_arch_accelerated || accelerated(target)))
      requests.push_back(Knobs::parse("ATTN_MMA=" + f.name));
  for (const auto& req : requests) {
    Built b = build(g, target, req);
    if (!b.why.empty()) {
      space.pruned.push_back({req, "the shipped default does not build: " + b.why});
      continue;
    }
    if (seen.insert(b.full.str()).second)
      defaults.push_back({b.full, predict_attention_us(g, b.full, dev), true,
                          req.values().empty()});
  }

  // The table's points and the defaults' one-knob variants; stage 1 (the knobs' ranges)
  // prunes without building.
  auto wanted = [&](const std::string& family) {
    return opt.atoms.empty() || std::count(opt.atoms.begin(), opt.atoms.end(), family);
  };
  for (const auto& name : opt.atoms)
    if (std::none_of(attention_families().begin(), attention_families().end(),
                     [&](const AttentionFamily& f) { return f.name == name; }))
      throw Error("--atoms " + name + " is not an attention kernel family: attention searches "
                  "wgmma (sm_90a) and mma_sync (--atoms wgmma,mma_sync)");
  std::vector<AttentionPoint> points;
  for (AttentionFamily f : attention_families()) {
    if (!wanted(f.name)) continue;
    // A default's value the table lacks joins its dimension (mma.sync's BLOCK_N=16 at
    // D = 256), as the GEMM space joins the defaults' values: the defaults are points of
    // the search, and their neighbours are searched.
    for (const auto& d : defaults)
      if (attention_family_of(d.knobs) == f.name)
        for (auto& dim : f.dims)
          if (d.knobs.has(dim.knob) &&
              !std::count(dim.values.begin(), dim.values.end(), d.knobs.get_str(dim.knob, "")))
            dim.values.push_back(d.knobs.get_str(dim.knob, ""));
    auto p = attention_points(f, target);
    if (!p.empty()) space.atoms.push_back(f.name);
    points.insert(points.end(), p.begin(), p.end());
  }
  for (const auto& d : defaults) {
    // The variants' knobs are k:012's; the wgmma kernel refuses them by name.
    if (attention_family_of(d.knobs) != "mma_sync" || !wanted("mma_sync")) continue;
    for (const auto& v : attention_default_variants())
      for (const auto& value : v.values) {
        if (d.knobs.get_str(v.knob, "") == value) continue;
        Knobs k = d.knobs;
        const std::string why = set_knob(k, v, value);
        points.push_back({k, why, attention_family_of(d.knobs), v.knob + "=" + value});
        break;  // one variant per knob: its first value other than the default's
      }
  }
  // Decode shapes: the split count around each mma.sync default's (half, double, none),
  // the K/V ring's depth, SPLIT_WARPS and COMBINE, and GQA packing flipped
  // (attention_decode.h's defaults are a rule of thumb: at most a wave of CTAs, at most a
  // split per key block).
  for (const auto& d : defaults) {
    if (attention_family_of(d.knobs) != "mma_sync" || !wanted("mma_sync")) continue;
    // (Varlen has neither a split form nor a constant Sq: its Q is [T, H, D].)
    if (!d.knobs.has("SPLIT_KV") || g.attention()->varlen_attention() ||
        g.node(g.attention()->inputs[0]).shape[2].value > kDecodeRows)
      continue;
    const int64_t sk = d.knobs.get_int("SPLIT_KV", 1);
    std::set<int64_t> tried = {sk};
    for (int64_t v : {sk / 2, sk * 2, int64_t(1)}) {
      if (v < 1 || !tried.insert(v).second) continue;
      Knobs k = d.knobs;
      const std::string why = set_knob(k, {"SPLIT_KV", {}}, std::to_string(v));
      points.push_back({k, why, "mma_sync", "SPLIT_KV=" + std::to_string(v)});
    }
    // The K/V ring (k:012's KV_STAGES 2 to 4): each other depth with this split count,
    // and with the split the default rule gives that depth (a deeper ring has fewer CTAs
    // per SM, so fewer splits fill the wave).
    const int64_t ring = d.knobs.get_int("KV_STAGES", 2);
    for (int64_t v : {int64_t(2), int64_t(3), int64_t(4)}) {
      if (v == ring) continue;
      Knobs same = d.knobs;
      const std::string why = set_knob(same, {"KV_STAGES", {}}, std::to_string(v));
      points.push_back({same, why, "mma_sync", "KV_STAGES=" + std::to_string(v)});
      Knobs ruled;  // the split, warp groups and combine the rule gives this ring
      for (const auto& [n, x] : d.knobs.values())
        if (n != "SPLIT_KV" && n != "SPLIT_WARPS" && n != "COMBINE") ruled.set(n, x);
      ruled.set("KV_STAGES", std::to_string(v));
      points.push_back({ruled, "", "mma_sync",
                        "KV_STAGES=" + std::to_string(v) + " (its default SPLIT_KV)"});
    }
    // SPLIT_WARPS (warp groups sharing the rows: W rings per CTA, so the rule's split
    // fills the wave with fewer CTAs) with the split the rule gives it, and the combine
    // in the split kernel's last CTA (COMBINE flipped), with this split and with each W.
    const int64_t warps = d.knobs.get_int("SPLIT_WARPS", 1);
    const std::string combine = d.knobs.get_str("COMBINE", "kernel");
    const std::string other = combine == "kernel" ? "last_cta" : "kernel";
    {
      Knobs k = d.knobs;
      const std::string why = set_knob(k, {"COMBINE", {}}, other);
      points.push_back({k, why, "mma_sync", "COMBINE=" + other});
    }
    for (int64_t v : {int64_t(1), int64_t(2), int64_t(4)}) {
      if (v == warps) continue;
      for (const std::string& c : {combine, other}) {
        Knobs ruled;
        for (const auto& [n, x] : d.knobs.values())
          if (n != "SPLIT_KV") ruled.set(n, x);
        ruled.set("SPLIT_WARPS", std::to_string(v));
        ruled.set("COMBINE", c);
        points.push_back({ruled, "", "mma_sync",
                          "SPLIT_WARPS=" + std::to_string(v) + ",COMBINE=" + c +
                              " (its default SPLIT_KV)"});
      }
    }
    // The K/V copy flipped (k:012: TMA boxes into per-slot mbarrier rings, sm_90): 0-4 %
    // slower than the cp.async rings at most decode points on the H200, 9 % faster at B = 1,
    // Hkv = 8, 1k (bench/NOTES.md, decode attention: bytes in flight). The pipeline refuses
    // it where it does not apply (sm_80, paged or varlen K/V), and that point is pruned.
    {
      const std::string copy = d.knobs.get_str("KV_COPY", "cp_async") == "tma" ? "cp_async" : "tma";
      Knobs k = d.knobs;
      const std::string why = set_knob(k, {"KV_COPY", {}}, copy);
      points.push_back({k, why, "mma_sync", "KV_COPY=" + copy});
    }
    if (d.knobs.has("GQA_PACK")) {
      const std::string v = d.knobs.get_int("GQA_PACK", 0) ? "0" : "1";
      Knobs k;  // BLOCK_M's and WARPS' defaults follow the packed rows
      for (const auto& [n, x] : d.knobs.values())
        if (n != "BLOCK_M" && n != "WARPS") k.set(n, x);
      k.set("GQA_PACK", v);
      points.push_back({k, "", "mma_sync", "GQA_PACK=" + v});
    }
  }
  space.enumerated = points.size();
  std::vector<size_t> to_build;
  for (size_t i = 0; i < points.size(); ++i) {
    if (!points[i].why_not.empty()) space.pruned.push_back({points[i].knobs, points[i].why_not});
    else to_build.push_back(i);
  }
  space.searched = to_build.size();

  // Stage 2: the pipeline's verdict on each, in parallel.
  std::vector<Built> built(to_build.size());
  if (opt.build_kernels)
    parallel_for(to_build.size(), opt.threads,
                 [&](size_t j) { built[j] = build(g, target, points[to_build[j]].knobs); });
  else
    for (size_t j = 0; j < to_build.size(); ++j) built[j].full = points[to_build[j]].knobs;

  std::map<std::string, std::vector<Candidate>> by_family;
  for (size_t j = 0; j < to_build.size(); ++j) {
    const AttentionPoint& p = points[to_build[j]];
    if (!built[j].why.empty()) {
      space.pruned.push_back({p.knobs, built[j].why});
      continue;
    }
    for (auto& d : defaults)
      if (covers(p.knobs, d.knobs)) d.in_search = true;
    if (!seen.insert(built[j].full.str()).second) continue;  // one kernel, measured once
    by_family[attention_family_of(built[j].full)].push_back(
        {built[j].full, predict_attention_us(g, built[j].full, dev), false});
  }

  // The cap: each family's best in turn (the ranking between families is the least
  // certain part of the model), the defaults on top.
  for (auto& [_, list] : by_family)
    std::stable_sort(list.begin(), list.end(), [](const Candidate& x, const Candidate& y) {
      return x.predicted_us < y.predicted_us;
    });
  std::vector<Candidate> kept = defaults;
  const size_t cap = size_t(std::max(0, opt.max_candidates)) + defaults.size();
  for (size_t i = 0; kept.size() < cap; ++i) {
    bool any = false;
    for (auto& [_, list] : by_family)
      if (i < list.size() && kept.size() < cap) {
        kept.push_back(list[i]);
        any = true;
      }
    if (!any) break;
  }
  std::stable_sort(kept.begin(), kept.end(), [](const Candidate& x, const Candidate& y) {
    return x.predicted_us < y.predicted_us;
  });
  space.kept = std::move(kept);
  return space;
}

}  // namespace loom::tune
