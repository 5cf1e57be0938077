#pragma once
// Why a path cannot be read as a file, from the OS, for the readers' messages (the IDX reader,
// checkpoints): each throws its own error with this text after its own prefix.
#include <cerrno>
#include <cstring>
#include <string>

#include <sys/stat.h>

namespace locus::detail {

/// "" for a regular file; otherwise "cannot open the file: <the OS's reason>", or "cannot read the
/// file: it is a directory" / "... it is not a regular file" (a FIFO's open would wait for a writer
/// forever, so only regular files are opened).
inline std::string unreadable_reason(const std::string& path) {
  struct stat st{};
  if (::stat(path.c_str(), &st) != 0) return std::string("cannot open the file: ") + std::strerror(errno);
  if (S_ISDIR(st.st_mode)) return "cannot read the file: it is a directory";
  if (!S_ISREG(st.st_mode)) return "cannot read the file: it is not a regular file";
  return {};
}

}  // namespace locus::detail
