// The --json documents of `loom run`, `ladder`, `tune` and `db` (docs/cli.md, "JSON
// output"; schemas in docs/schema/): one JSON object on stdout per command, built with
// nlohmann/json. Every document has "loom" (the version), "command" and "ok"; a failed
// command's document has "error" instead of its results (json_error_document).
#pragma once
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "driver/ladder.h"
#include "driver/run.h"

namespace loom {

using Json = nlohmann::ordered_json;

// "0.9.0 (git dc4335c)": the project version and `git describe` of the build's source.
std::string loom_version_text();

// {"loom": version, "command": command, "ok": ok}: the fields every document starts with.
Json json_document(const std::string& command, bool ok = true);

// The document of a command that failed before it had results: ok false, "error": the
// message (what stderr says after "loom: ").
Json json_error_document(const std::string& command, const std::string& message);

// The document as text: indented, one trailing newline. Invalid UTF-8 in a string (an
// expression as typed) is replaced by U+FFFD rather than failing the dump.
std::string json_text(const Json& doc);

Json device_json(const DeviceInfo& d);
Json verify_json(const VerifyResult& v);

// `loom run [--bench] --json`: expression, device, knobs, verification, and with --bench
// the timed backends and Loom's ratio to the reference (the first backend).
Json run_json(const std::string& expression, const RunReport& r);

// `loom ladder NAME --json`: the ladder and one entry per step (ok or the error), with
// `device` when a GPU was found.
Json ladder_json(const Ladder& l, const std::vector<LadderRow>& rows,
                 const std::optional<DeviceInfo>& device, const std::string& date);

}  // namespace loom
