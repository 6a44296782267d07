// `loom tune -c EXPR | --suite FILE [options]`: the tuner from the command line
// (docs/cli.md). main.cpp hands over the words after `tune`.
#pragma once
#include <ostream>
#include <string>
#include <vector>

#include "tune/tuner.h"

namespace loom::tune {

struct TuneCommand {
  std::vector<std::string> expressions;  // -c (repeatable) and the suite file's lines
  std::vector<int> devices = {0};
  TuneOptions options;
  bool json = false;  // --json: one document on stdout (docs/schema/tune.schema.json)
};

// Parses the words after `tune`; throws loom::Error naming the bad option and the fix.
TuneCommand parse_tune_args(const std::vector<std::string>& args);

// Returns the exit code: 0 when every expression was tuned, 1 when any was not.
int tune_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

extern const char* const kTuneUsage;

}  // namespace loom::tune
