// k:065_dependent_launch — overlap a multi-kernel program's launches (DEPENDENT_LAUNCH).
//
// Split-K with the reduce kernel (SPLITK_MODE=reduce) and the zero-fill kernels of the
// atomic modes are programs of two kernels, where the second may only start once the
// first's writes are visible. Launched plainly, the second grid is scheduled after the
// first has drained: a few microseconds of launch and ramp-up on a ~10 us problem
// (ncu, H100, 128x128x16384: the reduce grid 3.6 us for 720 KB of reads). Hopper's
// programmatic dependent launch lets the second grid be scheduled while the first runs:
// the first executes `griddepcontrol.launch_dependents` once per CTA (the next grid may
// launch when every CTA of this one has), the second starts with `griddepcontrol.wait`,
// which returns once the first grid has completed and its memory operations are visible —
// the same guarantee stream order gives, so the trigger's position cannot change results.
// The first kernel of a program never waits: it follows whatever the caller launched.
#include "passes/passes.h"

namespace loom {

Pass pass_dependent_launch() {
  return Pass{"k:065_dependent_launch", Level::Kernel, Level::Kernel,
              "on sm_90+, each kernel after the first waits for the previous grid with "
              "griddepcontrol.wait and is launched as its programmatic dependent, which "
              "triggers at its start (DEPENDENT_LAUNCH=1); one-kernel programs unchanged",
              {"DEPENDENT_LAUNCH"},
              [](CompileState& s) {
                auto& ks = s.kernel.kernels;
                if (ks.size() < 2) return;
                // Recorded only where it applies, like every knob a pass reads.
                const bool on = s.knob("DEPENDENT_LAUNCH", 1) != 0;
                if (!on || s.target.compute_capability() < 90) return;
                for (size_t i = 1; i < ks.size(); ++i) {
                  ks[i - 1].trigger_dependents = true;
                  ks[i].wait_prior_grid = true;
                }
              }};
}

}  // namespace loom
