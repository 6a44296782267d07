#include "tune/space.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <thread>

#include "driver/compile.h"
#include "ir/error.h"
#include "tune/compile_pool.h"
#include "tune/cost_model.h"
#include "tune/problem.h"
#include "tune/prune.h"

namespace loom::tune {
namespace {

using Dims = std::vector<std::pair<std::string, std::vector<std::string>>>;

// The registry's searched knobs of `group` for `atom`, with their values, joined by the
// shipped default's value for the atom (`seed`, a full knob set; empty for none) where the
// registry's list lacks it — SPLITK=11 of the split-K schedule, a decode ring's depth —
// so that the organizations the defaults use are points of the space, whatever values
// the defaults compute. An "other" knob takes the default's value first: each base is
// then the default's organization where it is legal, and the variants step away from it
// one knob at a time.
Dims searched(SearchGroup group, const std::string& atom, int cc, const Knobs& seed) {
  Dims out;
  for (const auto& d : knob_registry())
    if (d.group == group) {
      auto v = d.search_values(atom, cc);
      if (v.empty()) continue;
      if (seed.has(d.name)) {
        // Elsewhere the order stays: a split's first SPLITK_MODE is the one tried without
        // a split, and the values' order is the enumeration's.
        const std::string dv = seed.get_str(d.name, "");
        auto at = std::find(v.begin(), v.end(), dv);
        if (group == SearchGroup::other && at != v.end()) v.erase(at);
        if (group == SearchGroup::other) v.insert(v.begin(), dv);
        else if (at == v.end()) v.push_back(dv);
      }
      out.push_back({d.name, std::move(v)});
    }
  return out;
}

// Every combination of `dims` on top of `cur`, in declaration order.
void product(const Dims& dims, size_t i, Knobs cur, const std::function<void(const Knobs&)>& fn) {
  if (i == dims.size()) {
    fn(cur);
    return;
  }
  for (const auto& v : dims[i].second) {
    Knobs next = cur;
    next.set(dims[i].first, v);
    product(dims, i + 1, next, fn);
  }
}

// Knobs that mean something only under another knob's value: searched where it holds,
// left unset elsewhere (a pass that does not run records no value for them).
struct Dependent {
  const char* knob;
  const char* on;
  const char* value;  // one value, or several joined by '|'
  bool holds(const Knobs& k) const { return in_value_list(value, k.get_str(on, "")); }
};
// EPI_BUFFERS: k:053's strips, under the TMA store and under a warp-specialized kernel's
// staged epilogue (EPILOGUE=smem; a kernel k:054 stages ignores it, and the pass refusals
// keep one of the two).
constexpr Dependent kDependents[] = {{"EPI_BUFFERS", "EPILOGUE", "tma_store|smem"},
                                     {"TF32_ROUND", "WGMMA_A", "regs"}};

bool dependent_on(const std::string& knob) {
  for (const auto& d : kDependents)
    if (knob == d.knob) return true;
  return false;
}

// `k` with each dependent knob (at its own value, else its first) where its condition
// holds, and without it elsewhere.
Knobs with_dependents(const Knobs& k, const Dims& dependents) {
  Knobs out;
  for (const auto& [name, value] : k.values())
    if (!dependent_on(name)) out.set(name, value);
  for (const auto& [name, values] : dependents)
    for (const auto& d : kDependents)
      if (name == d.knob && d.holds(k))
        out.set(name, k.has(name) ? k.get_str(name, "") : values[0]);
  return out;
}

struct Builder {
  const TuneProblem& p;
  const DeviceInfo& dev;
  int cc;
  Space& space;
  PassRefusals& refusals;
  std::map<std::string, Knobs> seeds;  // ATOM value -> the shipped default's full set
  std::vector<Candidate> ranked;

  void prune(const Knobs& k, const std::string& why) { space.pruned.push_back({k, why}); }

  Dims values(SearchGroup group, const AtomChoice& a) {
    auto it = seeds.find(a.knob);
    return searched(group, a.knob, cc, it == seeds.end() ? Knobs() : it->second);
  }

  // The "other" rules, then the passes' own verdict on a cluster (prune.h).
  std::string other_refusal(const AtomChoice& a, const Knobs& k) {
    std::string why = other_violation(p, a, k);
    if (why.empty()) why = refusals(k);
    return why;
  }

  // Tiling, then split-K (its rules read the tile count), then staging per split.
  void atom(const AtomChoice& a) {
    Knobs atom_knobs;
    atom_knobs.set("ATOM", a.knob);
    product(values(SearchGroup::tiling, a), 0, atom_knobs, [&](const Knobs& tiling) {
      ++space.enumerated;
      if (auto why = tiling_violation(p, a, tiling); !why.empty()) return prune(tiling, why);
      splits(a, tiling);
    });
  }

  void splits(const AtomChoice& a, const Knobs& tiling) {
    const Dims split = values(SearchGroup::split_k, a);
    product(split, 0, tiling, [&](const Knobs& k) {
      // Without SPLITK's split its combine mode changes nothing: one candidate, at the
      // first mode (CLUSTER_K splits K on its own, reduced in the cluster).
      if (k.get_int("SPLITK", 1) == 1)
        for (const auto& [name, values] : split)
          if (name == "SPLITK_MODE" && k.get_str(name, "") != values[0]) return;
      ++space.enumerated;
      if (auto why = split_violation(p, a, k, dev); !why.empty()) return prune(k, why);
      stagings(a, k);
    });
  }

  void stagings(const AtomChoice& a, const Knobs& split) {
    const Dims others = values(SearchGroup::other, a);
    product(values(SearchGroup::staging, a), 0, split, [&](Knobs staged) {
      tf32_transposing_slabs(p, a, staged);
      ++space.enumerated;
      if (auto why = staging_violation(p, a, staged, dev); !why.empty()) return prune(staged, why);
      bases(a, staged, others);
    });
  }

  // The base gives each other knob its first value that passes the other-knob rules with
  // the knobs chosen before it (CLUSTER_K's tile gets PERSISTENT=0, CLUSTER_M=1 and the
  // direct epilogue); each variant fixes one knob at another value and chooses the rest
  // the same way (ping-pong consumers get the direct epilogue), or is pruned with the
  // reason when nothing passes. A dependent knob is set only where its condition holds,
  // and varies there.
  void bases(const AtomChoice& a, const Knobs& staged, const Dims& all_others) {
    Dims others, dependents;
    for (const auto& d : all_others) (dependent_on(d.first) ? dependents : others).push_back(d);
    auto complete = [&](Knobs k, const std::string& fixed) {
      for (const auto& [name, values] : others) {
        if (name == fixed) continue;
        k.set(name, values[0]);
        for (const auto& v : values) {
          Knobs trial = k;
          trial.set(name, v);
          if (other_refusal(a, with_dependents(trial, dependents)).empty()) {
            k = trial;
            break;
          }
        }
      }
      return with_dependents(k, dependents);
    };
    const Knobs base = complete(staged, "");
    add_checked(a, base);
    // A dependent varies around the base, or, where the base's choices leave its
    // condition false (the thread-copy wgmma schedules' direct epilogue), around the
    // first variant that makes it true (EPILOGUE=tma_store's EPI_BUFFERS, WGMMA_A=regs's
    // TF32_ROUND).
    std::map<std::string, Knobs> dependent_base;
    for (const auto& [name, values] : dependents)
      if (base.has(name)) dependent_base.emplace(name, base);
    for (const auto& [name, values] : others)
      for (const auto& v : values) {
        if (v == base.get_str(name, "")) continue;
        Knobs k = staged;
        k.set(name, v);
        const Knobs variant = complete(k, name);
        for (const auto& [dep, dep_values] : dependents)
          if (variant.has(dep)) dependent_base.emplace(dep, variant);
        add_checked(a, variant);
      }
    for (const auto& [name, values] : dependents) {
      auto at = dependent_base.find(name);
      if (at == dependent_base.end()) continue;
      for (const auto& v : values) {
        if (v == at->second.get_str(name, "")) continue;
        Knobs k = at->second;
        k.set(name, v);
        add_checked(a, k);
      }
    }
  }

  void add_checked(const AtomChoice& a, const Knobs& k) {
    ++space.enumerated;
    if (auto why = other_refusal(a, k); !why.empty()) return prune(k, why);
    add(a, k);
  }

  void add(const AtomChoice& a, const Knobs& k) {
    CostEstimate e = predict(p, a, k, dev);
    if (e.blocks_per_sm == 0) return prune(k, "no block can be resident: " + e.unresident);
    ranked.push_back({k, e.us, false});
  }
};

// The knobs a compilation used, defaults included, as a full set: what `--knobs` needs to
// compile the same kernel again, whatever the defaults of a later Loom.
Knobs full_set(const CompileState& s) {
  Knobs k;
  for (const auto& [n, v] : s.used_knobs)
    if (find_knob(n)) k.set(n, v);
  return k;
}

const AtomChoice* choice_of(const std::vector<AtomChoice>& atoms, const Knobs& k) {
  const std::string v = k.get_str("ATOM", "fma");
  for (const auto& a : atoms)
    if (a.knob == v) return &a;
  return nullptr;
}

// Whether the enumerated point `point` is the full knob set `full`: every knob it sets
// has that value there. A knob `full` lacks was read by no pass (SPLITK_MODE without a
// split, EPI_BUFFERS without the TMA-store epilogue) and changes nothing.
bool covers(const Knobs& point, const Knobs& full) {
  for (const auto& [name, value] : point.values())
    if (full.has(name) && full.get_str(name, "") != value) return false;
  return true;
}

// The tile a candidate belongs to: its ATOM, tiling and split-K knobs.
std::string tile_key(const Knobs& k) {
  std::string key;
  for (const auto& d : knob_registry())
    if (d.name == "ATOM" || d.group == SearchGroup::tiling || d.group == SearchGroup::split_k)
      key += d.name + "=" + k.get_str(d.name, "") + ",";
  return key;
}

// Stage 2 for one candidate: the pipeline's verdict, the bank-conflict model, and the
// full knob set re-ranked with the conflict factors. Empty `why` = keep `out`.
struct Built {
  Candidate out;
  std::string why;
};

Built build_candidate(const Graph& g, const Target& target, const TuneProblem& p,
                      const std::vector<AtomChoice>& atoms, const DeviceInfo& dev,
                      const Candidate& c, double max_read_conflict) {
  Built r;
  try {
    CompileOptions copt;
    copt.knobs = c.knobs;
    copt.target = target;
    CompiledProgram prog = compile_graph(g, copt);
    KernelVerdict v = check_kernel_ir(prog.state, dev, max_read_conflict);
    if (!v.reason.empty()) {
      r.why = v.reason;
      return r;
    }
    Knobs full = full_set(prog.state);
    const AtomChoice* a = choice_of(atoms, full);
    r.out = {full, a ? predict(p, *a, full, dev, v.smem).us : c.predicted_us, false};
  } catch (const Error& e) {
    r.why = e.what();
  }
  return r;
}

}  // namespace

Target target_for(const Target& t, const DeviceInfo& dev) {
  Target out = t;
  if (dev.sm_count > 0) out.sm_count = dev.sm_count;
  if (dev.smem_per_block_optin > 0) out.smem_per_block = dev.smem_per_block_optin;
  if (dev.dram_bytes_per_s() > 0) out.dram_bytes_per_s = dev.dram_bytes_per_s();
  if (dev.l2_bytes > 0) out.l2_bytes = dev.l2_bytes;
  return out;
}

Space generate_space(const Graph& g, const DeviceInfo& dev, const Target& t,
                     const SpaceOptions& opt) {
  const TuneProblem p = tune_problem(g);
  const Target target = target_for(t, dev);
  const int cc = target.compute_capability();
  std::vector<AtomChoice> atoms;
  // wgmma and setmaxnreg exist on the arch-specific targets only (sm_90a, not sm_90).
  const bool accelerated = !target.arch.empty() && target.arch.back() == 'a';
  for (const auto& a : atom_choices(p, cc, accelerated))
    if (opt.atoms.empty() || std::count(opt.atoms.begin(), opt.atoms.end(), a.knob))
      atoms.push_back(a);
  if (atoms.empty())
    throw Error("no compute atom to search: none of the requested ATOM values runs " +
                std::string(dtype_name(p.in)) + " operands on " + target.arch);

  Space space;
  // The shipped defaults, built first: they are kept whatever the model thinks of them,
  // and seed the search values (searched() above).
  std::vector<Candidate> kept;
  std::set<std::string> seen;
  std::vector<Knobs> default_requests = {Knobs()};
  for (const auto& a : atoms)
    if (a.mma()) default_requests.push_back(Knobs::parse("ATOM=" + a.knob));
  std::map<std::string, Knobs> seeds;
  for (const auto& req : default_requests) {
    CompileOptions copt;
    copt.knobs = req;
    copt.target = target;
    try {
      Knobs full = full_set(compile_graph(g, copt).state);
      const AtomChoice* a = choice_of(atoms, full);
      seeds.try_emplace(full.get_str("ATOM", "fma"), full);
      // A default whose atom the search does not enumerate (an --atoms list that leaves it
      // out) is still measured against the searched candidates, unmodelled: predicted 0
      // puts it first, and the measurement decides.
      if (seen.insert(full.str()).second)
        kept.push_back({full, a ? predict(p, *a, full, dev).us : 0.0, true, req.values().empty()});
    } catch (const Error& e) {
      space.pruned.push_back({req, std::string("the shipped default does not build: ") + e.what()});
    }
  }

  PassRefusals refusals(g, target);
  Builder b{p, dev, cc, space, refusals, seeds, {}};
  for (const auto& a : atoms) b.atom(a);
  space.searched = b.ranked.size();
  for (const auto& a : atoms) space.atoms.push_back(a.knob);
  space.refusal_probes = refusals.probes();
  // Ties (knobs the model does not see) keep enumeration order: a base before its variants.
  std::stable_sort(b.ranked.begin(), b.ranked.end(), [](const Candidate& x, const Candidate& y) {
    return x.predicted_us < y.predicted_us;
  });
  for (auto& d : kept)
    for (const auto& c : b.ranked)
      if (covers(c.knobs, d.knobs)) {
        d.in_search = true;
        break;
      }
  const size_t cap = size_t(std::max(0, opt.max_candidates)) + kept.size();

  // Down the ranking in batches (built in parallel) until the cap is full. The model ties
  // the stagings and other knobs of one tile (it does not see what GROUP_M or FRAG_BUFFERS
  // change), so each tile may hold `quota` kept places per round: the cap takes the best
  // few of many tiles before more of any one, and a variant pruned in stage 2 frees its
  // place for the tile's next one.
  const int quota = std::max(2, opt.max_candidates / 8);
  const size_t workers =
      opt.threads > 0 ? size_t(opt.threads) : std::max(1u, std::thread::hardware_concurrency());
  const size_t batch = std::max<size_t>(8, 2 * workers);
  std::vector<std::string> keys;
  for (const auto& c : b.ranked) keys.push_back(tile_key(c.knobs));
  std::vector<bool> taken(b.ranked.size(), false);
  std::map<std::string, int> places;  // per tile: kept and being built
  size_t left = b.ranked.size();
  // Stage 2 costs a pipeline run each (0.1-0.5 s): where it prunes nearly everything, stop
  // after kBuildsPerPlace builds per place rather than walk the whole ranking.
  constexpr size_t kBuildsPerPlace = 8;
  const size_t max_builds = kBuildsPerPlace * cap;
  for (int limit = quota; kept.size() < cap && left > 0 && b.ranked.size() - left < max_builds;) {
    std::vector<size_t> pick;
    for (size_t i = 0; i < b.ranked.size() && pick.size() < batch; ++i)
      if (!taken[i] && places[keys[i]] < limit) {
        taken[i] = true;
        ++places[keys[i]];
        pick.push_back(i);
      }
    if (pick.empty()) {
      limit += quota;  // every tile has its places: the next round
      continue;
    }
    left -= pick.size();
    std::vector<Built> built(pick.size());
    if (opt.build_kernels)
      parallel_for(pick.size(), opt.threads, [&](size_t j) {
        built[j] =
            build_candidate(g, target, p, atoms, dev, b.ranked[pick[j]], opt.max_read_conflict);
      });
    else
      for (size_t j = 0; j < pick.size(); ++j) built[j].out = b.ranked[pick[j]];
    for (size_t j = 0; j < pick.size(); ++j) {
      const size_t i = pick[j];
      if (!built[j].why.empty()) space.pruned.push_back({b.ranked[i].knobs, built[j].why});
      if (built[j].why.empty() && kept.size() < cap && seen.insert(built[j].out.knobs.str()).second)
        kept.push_back(built[j].out);
      else
        --places[keys[i]];
    }
  }
  std::stable_sort(kept.begin(), kept.end(), [](const Candidate& x, const Candidate& y) {
    return x.predicted_us < y.predicted_us;
  });
  space.kept = std::move(kept);
  return space;
}

}  // namespace loom::tune
