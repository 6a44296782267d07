// How `loom run`, `loom compile` and the library pick knobs from the tuning databases:
// the user's database (exact key), then the shipped defaults (shipped.h). The result goes
// into CompileOptions::tuned, under any explicit knobs (driver/compile.h).
#pragma once
#include <functional>

#include "driver/compile.h"
#include "runtime/device.h"
#include "tune/database.h"
#include "tune/shipped.h"

namespace loom::tune {

// Sets opt.tuned and opt.tuned_source for `g` (sizes bound) on `dev`. Without a record
// (or with a record whose knobs this build rejects, which is warned about) opt.tuned
// stays empty and tuned_source says why, e.g. "no tuning record in <path> or the
// shipped defaults".
void choose_tuned_knobs(const Graph& g, const DeviceInfo& dev, const TuningDb& db,
                        CompileOptions& opt,
                        const std::vector<ShippedDb>& shipped = shipped_dbs());

// The lookup as RunOptions::choose_tuned wants it: choose_tuned_knobs on the default
// database (opened at each call, so a long-lived program sees new records). With
// enabled = false it only records "--no-db" as the reason.
std::function<void(const Graph&, const DeviceInfo&, CompileOptions&)> tuning_db_lookup(bool enabled = true);

}  // namespace loom::tune
