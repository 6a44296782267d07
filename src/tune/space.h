// The tuner's search space for one contraction on one GPU: candidates with a full knob
// set each (explicit values for every knob a pass reads, so `--knobs` reproduces the
// tuner's result), ranked by the cost model, and the candidates pruned on the way with
// the reason.
//
// Generated structurally from the knob registry's search lists (passes/knobs.h), joined
// by the values the shape's shipped default uses (so that the defaults are points of the
// space, reachable by the search: Candidate::in_search), and the atom table, per atom:
// the tiling group's product under the tiling rules, then for each
// surviving tiling the split-K values where its grid leaves SMs idle, then the staging
// group's product under the staging rules; each such base takes every other searched
// knob at its first value (the default's, where it has one), and one variant per other value
// of one such knob. Rules that need nothing built, and the passes' own refusals of cluster
// knobs (the pipeline run to t:010: PassRefusals), prune first (prune.h, stage 1); the
// best-ranked candidates are then built
// to Kernel IR, which prunes what the pipeline rejects and reads the bank-conflict model
// into the ranking (stage 2). The cap keeps at most max_candidates / 8 (at least 2)
// candidates of one tile (ATOM, tiling and split-K knobs) before any tile's next ones, so
// that ties in the model (knobs it does not see) do not fill the list with one tile's
// variants. The shipped defaults for the shape (what `loom run` compiles
// without knobs, and with only ATOM=<mma atom>) are always kept, first among equals.
#pragma once
#include <string>
#include <vector>

#include "ir/graph.h"
#include "passes/pass.h"
#include "runtime/device.h"

namespace loom::tune {

struct Candidate {
  Knobs knobs;              // a full set
  double predicted_us = 0;  // the cost model's time: a rank, not a promise
  bool shipped_default = false;
  bool plain_default = false;  // what `loom run` compiles with no knobs at all
  // A shipped default that is also a point the enumeration reached and stage 1 passed:
  // the search can find it (and its neighbours) without being handed it.
  bool in_search = false;
};

struct PrunedCandidate {
  Knobs knobs;  // as far as enumeration got (a tiling pruned alone has no staging)
  std::string reason;
};

struct Space {
  std::vector<Candidate> kept;  // best-predicted first
  std::vector<PrunedCandidate> pruned;
  size_t enumerated = 0;  // knob sets the rules were asked about
  size_t searched = 0;    // of those, the points that passed stage 1 (ranked for the cap)
  size_t refusal_probes = 0;  // pipeline runs to t:010 for the passes' cluster refusals
  std::vector<std::string> atoms;  // the ATOM values enumerated
};

struct SpaceOptions {
  int max_candidates = 64;         // cap on `kept` (the shipped defaults come on top)
  std::vector<std::string> atoms;  // ATOM values to search; empty = all the problem allows
  bool build_kernels = true;       // stage 2: run the pipeline on the candidates kept
  int threads = 0;                 // for stage 2 (0 = hardware concurrency)
  double max_read_conflict = 4.0;  // prune fragment reads this many times the ideal
};

// Throws loom::Error for a graph the tuner cannot tune (no contraction, symbolic sizes).
// `dev` gives the limits and rates (a DeviceInfo built by hand works without a GPU);
// `t` the architecture, its SM count and shared-memory limit overridden by dev's.
Space generate_space(const Graph& g, const DeviceInfo& dev, const Target& t,
                     const SpaceOptions& opt = {});

// The Target that candidates are compiled for on `dev`: t with dev's SM count and
// opt-in shared memory, as `loom run` sets them (defaults depend on the SM count).
Target target_for(const Target& t, const DeviceInfo& dev);

}  // namespace loom::tune
