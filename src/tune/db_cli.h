// `loom db list|show|clear|export|import|path`: the tuning database from the command line
// (docs/cli.md). main.cpp hands over the words after `db`.
#pragma once
#include <ostream>
#include <string>
#include <vector>

namespace loom::tune {

// Returns the exit code; usage mistakes and I/O failures throw loom::Error.
int db_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

extern const char* const kDbUsage;

}  // namespace loom::tune
