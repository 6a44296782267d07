#include "tune/tuned_knobs.h"

#include "ir/warn_once.h"
#include "ir/error.h"

namespace loom::tune {
namespace {

// A record's knobs, or nullopt with a warning: a knob renamed or removed since the record
// was made must not turn into a compile error for a user who never asked for it. The
// warning prints once per process, as every lookup of the shape meets the record again.
std::optional<Knobs> usable(const TuningRecord& rec, const std::string& where) {
  try {
    return Knobs::parse(rec.knobs);
  } catch (const Error& e) {
    warn_once("ignoring the tuning record in " + where + " (" + e.what() + "); re-tune this shape");
    return std::nullopt;
  }
}

}  // namespace

void choose_tuned_knobs(const Graph& g, const DeviceInfo& dev, const TuningDb& db,
                        CompileOptions& opt, const std::vector<ShippedDb>& shipped) {
  std::string why;
  auto key = key_for(g, dev, &why);
  if (!key) {
    opt.tuned_source = "no tuning lookup: " + why;
    return;
  }
  if (db.enabled()) {
    if (auto rec = db.lookup(*key))
      if ((opt.tuned = usable(*rec, db.path()))) {
        opt.tuned_source = "tuned: " + db.path();
        return;
      }
  }
  if (auto hit = lookup_shipped(*key, shipped))
    if ((opt.tuned = usable(hit->rec, hit->file))) {
      opt.tuned_source = "tuned: shipped " + hit->file;
      return;
    }
  opt.tuned_source = "no tuning record in " + (db.enabled() ? db.path() : "the user database (disabled)") +
                     " or the shipped defaults";
}

std::function<void(const Graph&, const DeviceInfo&, CompileOptions&)> tuning_db_lookup(bool enabled) {
  if (!enabled) return [](const Graph&, const DeviceInfo&, CompileOptions& c) { c.tuned_source = "--no-db"; };
  return [](const Graph& g, const DeviceInfo& dev, CompileOptions& c) {
    choose_tuned_knobs(g, dev, TuningDb::open_default(), c);
  };
}

}  // namespace loom::tune
