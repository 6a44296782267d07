#include "driver/write_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "ir/error.h"

namespace loom {

void write_file_or_error(const std::string& path, std::string_view data, const std::string& what) {
  auto fail = [&](const char* step, int err) {
    throw Error("cannot write " + path + " (" + what + "): " + step + " failed: " +
                std::strerror(err));
  };
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail("open", errno);
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      // A write of 0 bytes for a non-empty request makes no progress: report it as ENOSPC
      // rather than loop.
      const int err = n < 0 ? errno : ENOSPC;
      ::close(fd);
      fail("write", err);
    }
    done += size_t(n);
  }
  if (::close(fd) != 0) fail("close", errno);
}

}  // namespace loom
