// Warnings a long-running process (the Python binding, the tuner, a test binary) prints
// once: a stale tuning record is looked up and refused at every compile of its shape,
// and the same paragraph on every call buries everything else on stderr.
#pragma once
#include <string>

namespace loom {

// Prints "loom: warning: <message>" and a newline on stderr unless this process printed
// the same message before; returns whether it printed. Each distinct message prints
// once (a second record, or the same record refused for another reason, still warns).
// Safe to call from several threads: the set of printed messages is behind a mutex, and
// the line is written while holding it, so two threads' lines do not interleave.
bool warn_once(const std::string& message);

}  // namespace loom
