// Files written so that a crash never leaves a half-written file under the
// final name: write a temporary sibling, fsync, then rename (docs/training.md, Guarantees).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace lmkit {

/// A file being written atomically. Nothing appears under `path` until commit();
/// destroying an uncommitted AtomicFile removes the temporary.
class AtomicFile {
 public:
  explicit AtomicFile(std::string path);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, size_t size);
  void write(const std::string& bytes) { write(bytes.data(), bytes.size()); }
  /// fsync, close, rename onto the final path.
  void commit();

 private:
  std::string path_, tmp_;
  int fd_ = -1;
};

/// Writes `bytes` to `path` atomically.
void write_file_atomic(const std::string& path, const std::string& bytes);

/// InputError unless `path` is a regular file this process can read, naming why
/// (no such file, a directory, a device or FIFO that would be read forever,
/// permission denied).
void check_readable_file(const std::string& path);

/// Checks an output file before any work is done: its folder must exist, and an
/// existing `path` is replaced only with `overwrite` (and never when it is a
/// directory). InputError naming `flag` and the path otherwise.
void check_output_file(const std::string& path, bool overwrite, const std::string& flag = "--output");

/// Creates `dir` (and its parents) for an app's output; InputError naming `flag`
/// and the reason (a file in the way, read-only, a symlink loop) instead of
/// std::filesystem's text.
void make_output_directory(const std::string& dir, const std::string& flag = "--output");

/// Removes the temporaries (`.NAME.tmp.PID`, `.NAME.old.PID`) that writers killed
/// mid-write left beside `target` (their PID no longer runs).
void remove_stale_temporaries(const std::string& target);

/// Reads a whole file; InputError naming the file if it cannot be opened.
std::string read_file(const std::string& path);

/// Whether `text` starts with a UTF-8 byte-order mark (EF BB BF; Windows editors and Excel write
/// one), which is no text: every reader leaves it out.
bool starts_with_byte_order_mark(std::string_view text);

/// A text's lines without their line ends ("\n" or "\r\n") and without a leading UTF-8
/// byte-order mark; a last line end adds no empty line.
std::vector<std::string> split_lines(const std::string& text);

/// A text file's lines, as split_lines gives them; InputError naming the file if it cannot be opened.
std::vector<std::string> read_lines(const std::string& path);

/// A fresh directory under the system's temporary directory (PREFIX-PID-N),
/// removed with everything in it when the object goes.
class TempDir {
 public:
  explicit TempDir(const std::string& prefix);
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

/// A read-only memory map of a whole file (empty files map to nothing).
class MappedFile {
 public:
  MappedFile() = default;
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const char* data() const { return static_cast<const char*>(data_); }
  size_t size() const { return size_; }

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
};

/// fsyncs a directory, so that renames inside it are durable.
void fsync_directory(const std::string& path);

/// An exclusive lock on a run directory (flock on DIR/.lock, released when the
/// process ends, however it ends), held by the one process that writes there. A
/// second run on the same directory gets a RuntimeError naming the holder (pid,
/// host, since when). With the lock held, temporaries of killed writers
/// (`*.tmp.PID` under DIR and DIR/checkpoints) are stale: they are removed.
class RunLock {
 public:
  /// `created`: the caller made DIR for this run. Then a run that ends with nothing but the
  /// lock file there (it failed on its input before writing anything) removes DIR again, so a
  /// mistyped command leaves no empty run folder behind.
  explicit RunLock(const std::string& dir, bool created = false);
  ~RunLock();
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;

 private:
  int fd_ = -1;
  std::string dir_;
  bool created_ = false;
};

/// An exclusive lock on an output that is written whole at the end (a token corpus): flock
/// on the hidden sibling PARENT/.NAME.lock, removed when the writer is done. A second
/// writer of the same output gets a RuntimeError naming the holder, instead of both
/// finishing and the later one silently replacing the other's output.
class OutputLock {
 public:
  /// `flag` names the output in the error ("--output", "--dump", "--predictions").
  explicit OutputLock(const std::string& output, const std::string& flag = "--output");
  ~OutputLock();
  OutputLock(const OutputLock&) = delete;
  OutputLock& operator=(const OutputLock&) = delete;

 private:
  std::string path_;
  int fd_ = -1;
};

}  // namespace lmkit
