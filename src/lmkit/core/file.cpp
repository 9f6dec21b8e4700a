#include "lmkit/core/file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sys/file.h>
#include <signal.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "lmkit/core/error.h"

namespace lmkit {

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)) {
  tmp_ = path_ + ".tmp." + std::to_string(::getpid());
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd_ < 0) throw RuntimeError(path_ + ": cannot write file (" + std::strerror(errno) + ")");
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(tmp_.c_str());
  }
}

void AtomicFile::write(const void* data, size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = ::write(fd_, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw RuntimeError(path_ + ": write failed (" + std::strerror(errno) + ")");
    p += n;
    size -= static_cast<size_t>(n);
  }
}

void AtomicFile::commit() {
  bool ok = ::fsync(fd_) == 0;
  ok = (::close(fd_) == 0) && ok;
  fd_ = -1;
  if (!ok || std::rename(tmp_.c_str(), path_.c_str()) != 0) {
    ::unlink(tmp_.c_str());
    throw RuntimeError(path_ + ": could not be written (" + std::strerror(errno) + ")");
  }
}

void write_file_atomic(const std::string& path, const std::string& bytes) {
  AtomicFile f(path);
  f.write(bytes);
  f.commit();
}

void check_readable_file(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw InputError(path + ": cannot open file (" + std::strerror(errno) + ")");
  if (S_ISDIR(st.st_mode)) throw InputError(path + ": is a directory, not a file");
  // /dev/zero or a FIFO read forever (330 MB/s of growth).
  if (!S_ISREG(st.st_mode)) throw InputError(path + ": not a regular file (a device, FIFO or socket)");
  if (::access(path.c_str(), R_OK) != 0) throw InputError(path + ": cannot open file (" + std::strerror(errno) + ")");
}

void check_output_file(const std::string& path, bool overwrite, const std::string& flag) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path p(path);
  const fs::path parent = p.has_parent_path() ? p.parent_path() : fs::path(".");
  const auto parent_status = fs::status(parent, ec);
  if (!fs::is_directory(parent_status)) {
    throw InputError(flag + " " + path + ": the folder " + parent.string() +
                     (fs::exists(parent_status) ? " is not a directory" : " does not exist"));
  }
  if (::access(parent.c_str(), W_OK) != 0) throw InputError(flag + " " + path + ": cannot write in " + parent.string() + " (" + std::strerror(errno) + ")");
  const auto status = fs::symlink_status(p, ec);
  if (!fs::exists(status)) return;
  if (fs::is_directory(fs::status(p, ec))) throw InputError(flag + " " + path + ": is a directory");
  if (!overwrite) throw InputError(flag + " " + path + ": exists; give --overwrite to replace it");
}

void make_output_directory(const std::string& dir, const std::string& flag) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path p(dir);
  if (fs::is_directory(p, ec)) {
    if (::access(dir.c_str(), W_OK) != 0) throw InputError(flag + " " + dir + ": cannot write there (" + std::strerror(errno) + ")");
    return;
  }
  fs::create_directories(p, ec);
  if (ec) {
    // Name the ancestor in the way: a file where a folder must be, a read-only folder, a symlink loop.
    std::string why = ec.message();
    for (fs::path a = p; !a.empty() && a != a.parent_path(); a = a.parent_path()) {
      std::error_code e2;
      const auto st = fs::symlink_status(a, e2);
      if (fs::exists(st) && !fs::is_directory(fs::status(a, e2))) {
        why = e2 ? a.string() + " cannot be resolved (" + e2.message() + ")" : a.string() + " is a file, not a directory";
        break;
      }
    }
    throw InputError(flag + " " + dir + ": cannot create the directory (" + why + ")");
  }
}

void remove_stale_temporaries(const std::string& target) {
  namespace fs = std::filesystem;
  const fs::path t = fs::path(target).lexically_normal();
  const fs::path parent = t.has_parent_path() ? t.parent_path() : fs::path(".");
  std::error_code ec;
  if (!fs::is_directory(parent, ec)) return;
  const std::string name = t.filename().string();
  for (const auto& e : fs::directory_iterator(parent, ec)) {
    const std::string f = e.path().filename().string();
    for (const char* infix : {".tmp.", ".old."}) {
      const std::string head = "." + name + std::string(infix);
      if (f.rfind(head, 0) != 0) continue;
      const std::string pid = f.substr(head.size());
      if (pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos || pid.size() > 9) continue;
      // A writer that still runs keeps its temporary.
      if (::kill(static_cast<pid_t>(std::stol(pid)), 0) == 0 || errno != ESRCH) continue;
      std::error_code rm;
      fs::remove_all(e.path(), rm);
    }
  }
}

std::string read_file(const std::string& path) {
  check_readable_file(path);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path + ": cannot open file (" + std::strerror(errno) + ")");
  // Its size in one read (a stringstream grew by doubling and copied the whole again at the end:
  // three copies of a checkpoint), then whatever follows (a file still growing, one without a size).
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  std::string bytes(ec ? 0 : static_cast<size_t>(size), '\0');
  in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  bytes.resize(static_cast<size_t>(in.gcount()));
  std::ostringstream rest;
  rest << in.rdbuf();
  bytes += rest.str();
  return bytes;
}

TempDir::TempDir(const std::string& prefix) {
  static std::atomic<int> counter{0};
  const auto base = std::filesystem::temp_directory_path();
  path_ = (base / (prefix + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++))).string();
  std::filesystem::create_directories(path_);
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

bool starts_with_byte_order_mark(std::string_view text) { return text.substr(0, 3) == "\xEF\xBB\xBF"; }

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  for (size_t at = 0; at < text.size();) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    lines.push_back(text.substr(at, end - at - (end > at && text[end - 1] == '\r' ? 1 : 0)));
    at = end + 1;
  }
  // A UTF-8 byte-order mark (Excel, Notepad) is not part of the first line's text.
  if (!lines.empty() && starts_with_byte_order_mark(lines[0])) lines[0].erase(0, 3);
  return lines;
}

std::vector<std::string> read_lines(const std::string& path) {
  check_readable_file(path);
  return split_lines(read_file(path));
}

MappedFile::MappedFile(const std::string& path) {
  check_readable_file(path);
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) throw InputError(path + ": cannot open file (" + std::strerror(errno) + ")");
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    throw InputError(path + ": cannot stat file");
  }
  size_ = static_cast<size_t>(st.st_size);
  if (size_ > 0) {
    data_ = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (data_ == MAP_FAILED) {
      data_ = nullptr;
      ::close(fd);
      throw RuntimeError(path + ": cannot map file");
    }
  }
  ::close(fd);
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(data_, size_);
}

MappedFile::MappedFile(MappedFile&& other) noexcept : data_(other.data_), size_(other.size_) {
  other.data_ = nullptr;
  other.size_ = 0;
}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    if (data_) ::munmap(data_, size_);
    data_ = other.data_, size_ = other.size_;
    other.data_ = nullptr;
    other.size_ = 0;
  }
  return *this;
}

namespace {

// An exclusive flock on `path` (created), without waiting: the descriptor, or -1 when
// another process holds it (`holder`: what that process wrote there). RuntimeError otherwise.
int lock_or_holder(const std::string& path, std::string& holder) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) throw RuntimeError(path + ": cannot open the lock file (" + std::strerror(errno) + ")");
  if (::flock(fd, LOCK_EX | LOCK_NB) == 0) return fd;
  const int err = errno;
  holder = read_file(path);
  while (!holder.empty() && (holder.back() == '\n' || holder.back() == ' ')) holder.pop_back();
  holder = holder.empty() ? "holder unknown" : holder.substr(0, 200);
  ::close(fd);
  if (err != EWOULDBLOCK) throw RuntimeError(path + ": cannot lock (" + std::strerror(err) + ")");
  return -1;
}

}  // namespace

RunLock::RunLock(const std::string& dir, bool created) : dir_(dir), created_(created) {
  const std::string path = dir + "/.lock";
  std::string holder;
  fd_ = lock_or_holder(path, holder);
  if (fd_ < 0) {
    throw RuntimeError(dir + " is in use by another run (" + holder + "): wait for it to finish or choose another --output");
  }
  char host[256] = {0};
  ::gethostname(host, sizeof(host) - 1);
  const std::time_t now = std::time(nullptr);
  char when[64] = {0};
  std::strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S UTC", std::gmtime(&now));
  const std::string me = "pid " + std::to_string(::getpid()) + " on " + host + ", since " + when + "\n";
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, me.data(), me.size(), 0) != static_cast<ssize_t>(me.size())) {
    throw RuntimeError(path + ": cannot write the run's lock file (" + std::strerror(errno) + ")");
  }
  // Nobody else writes here now: temporaries of killed writers are stale (~43 MB each were never cleaned).
  for (const std::string& sub : {dir, dir + "/checkpoints"}) {
    std::error_code ec;
    if (!std::filesystem::is_directory(sub, ec)) continue;
    for (const auto& e : std::filesystem::directory_iterator(sub, ec)) {
      const std::string name = e.path().filename().string();
      const size_t at = name.rfind(".tmp.");
      const std::string pid = at == std::string::npos ? "" : name.substr(at + 5);
      if (!pid.empty() && pid.find_first_not_of("0123456789") == std::string::npos) std::filesystem::remove_all(e.path(), ec);
    }
  }
}

RunLock::~RunLock() {
  if (fd_ < 0) return;
  std::error_code ec;
  bool only_lock = created_;
  for (auto it = std::filesystem::directory_iterator(dir_, ec); only_lock && !ec && it != std::filesystem::directory_iterator();
       it.increment(ec)) {
    only_lock = it->path().filename() == ".lock";
  }
  if (only_lock && !ec) {  // removed while still held: no other run can have taken it meanwhile
    std::filesystem::remove(dir_ + "/.lock", ec);
    std::filesystem::remove(dir_, ec);  // only if empty
  }
  ::close(fd_);  // closing releases the flock
}

OutputLock::OutputLock(const std::string& output, const std::string& flag) {
  const std::filesystem::path target = std::filesystem::path(output).lexically_normal();
  const std::filesystem::path parent = target.has_parent_path() ? target.parent_path() : std::filesystem::path(".");
  std::error_code ec;
  std::filesystem::create_directories(parent, ec);
  path_ = (parent / ("." + target.filename().string() + ".lock")).string();
  std::string holder;
  fd_ = lock_or_holder(path_, holder);
  if (fd_ < 0) {
    throw RuntimeError(flag + " " + output + " is being written by another process (" + holder + "): wait for it or choose another " +
                       flag);
  }
  const std::string me = "pid " + std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, me.data(), me.size(), 0) != static_cast<ssize_t>(me.size())) {
    std::fprintf(stderr, "warning: %s: cannot record the lock's holder (%s)\n", path_.c_str(), std::strerror(errno));
  }
}

OutputLock::~OutputLock() {
  if (fd_ < 0) return;
  ::unlink(path_.c_str());  // while still held: a writer that opens it now finds it locked
  ::close(fd_);
}

void fsync_directory(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

}  // namespace lmkit
