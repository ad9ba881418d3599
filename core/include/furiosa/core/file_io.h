// Reading whole files that come from users (models, programs, tensors, traces): one reader that
// never blocks on a FIFO or device, refuses what is not a regular file, and names the file in its
// one-line error.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>

#include "furiosa/core/error.h"

namespace furiosa {

/// The bytes of the regular file at `path`. The file is opened with O_NONBLOCK and checked with
/// fstat before anything is read, so a FIFO, socket, device or directory is refused at once
/// instead of blocking or reading forever (symlinks to regular files are followed). `what`
/// names the file's role in messages ("model file", "tensor file", "program file").
/// Throws Error(code, "<what> '<path>' does not exist" | "... is not a regular file (a FIFO)"
/// | "cannot read <what> '<path>': <reason>") with ErrorSubject::of_file(path); control
/// characters of the path are escaped in the message.
std::string read_regular_file(const std::filesystem::path& path, ErrorCode code, std::string_view what);

/// Writes `bytes` to `path` so that no reader ever sees a partial file and no link planted at a
/// temporary name is followed: the bytes go to a new file `<path>.tmp.<pid>.<n>.<random>` in the
/// same directory (O_CREAT | O_EXCL | O_NOFOLLOW, mode 0666 & ~umask), which is then renamed over
/// `path` (a symlink at `path` itself is replaced, not written through). Only a temporary file
/// this call created is ever removed. Throws Error(code, "<path>: cannot write the <what>:
/// <reason>") with ErrorSubject::of_file(path), the path escaped. Thread-safe.
void write_file_atomically(const std::filesystem::path& path, std::string_view bytes,
                           ErrorCode code, std::string_view what);

/// How a process is shown in messages such as DeviceBusy: "process 4242 'furiosa-serve'" -- the
/// pid and its command name from /proc/<pid>/comm (Linux; at most 15 characters, escaped) -- or
/// "process 4242" when the name cannot be read (the process has gone, or /proc is not mounted).
/// Never throws beyond std::bad_alloc.
std::string process_label(long pid);

/// At most `count` first bytes of `path` when it is a regular file; empty when it is not, or
/// cannot be opened or read. Never blocks on a FIFO or device; never throws.
std::string read_file_prefix(const std::filesystem::path& path, std::size_t count) noexcept;

}  // namespace furiosa
