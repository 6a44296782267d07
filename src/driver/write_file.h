// Writing a file Loom was asked to write (`loom compile -o`, `--cubin`, the shipped
// defaults export): every write, and the close that may report a deferred error (NFS,
// a full disk), is checked, so a full or unwritable target is an error that names the
// path and the OS's reason instead of an exit status 0 with nothing written.
#pragma once
#include <string>
#include <string_view>

namespace loom {

// Creates or truncates `path` and writes `data` to it. Throws loom::Error
//   "cannot write <path> (<what>): <strerror>"
// at the first failure (open, a short or failed write, close). The file is written in
// place, never through a temp file and rename: the target may be a device (/dev/stdout)
// or a file whose identity the user cares about (a symlink, a hard link).
void write_file_or_error(const std::string& path, std::string_view data, const std::string& what);

}  // namespace loom
