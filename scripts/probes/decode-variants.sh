#!/usr/bin/env bash
# Timing experiments on Loom's decode kernel (H100, 2026-11-23): see scripts/probes/README.md.
set -uo pipefail
OUT=${OUT:-/tmp/o}; mkdir -p $OUT
{ cmake -S . -B build-device -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo && cmake --build build-device -j 16 --target loom; } > $OUT/build.log 2>&1 || { tail -20 $OUT/build.log; exit 1; }
NOMMA='/loom::wgmma_m64n16k16_f32_bf16_ss/d'
EARLY='s/if \(wg_thread == 0 && 0 < k_o\) \{/if (wg_thread == 0) {/; s/mbarrier_arrive\(&loom_mbar\[\(k_o - 1\) % 16 \+ 16\]\)/mbarrier_arrive(\&loom_mbar[k_o % 16 + 16])/'
WAIT0='s/wgmma_wait_group<1>\(\);/wgmma_wait_group<0>();/'
NOX='/X_s_tmap, &loom_mbar/d; s/10240u/8192u/'
OUT=$OUT bash scripts/probes/trace-decode.sh $PWD/build-device "" "|$NOMMA" "|$EARLY" "|$WAIT0;$EARLY" "|$NOX" "|$NOMMA;$EARLY" "" 2>&1 | tee $OUT/trace.txt | grep -E "graph replay|mainloop end|CTA end|edit"
