#include "lmkit/core/file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sys/file.h>

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

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path + ": cannot open file");
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
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

std::vector<std::string> read_lines(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path + ": cannot open file");
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(std::move(line));
  }
  // A UTF-8 byte-order mark (Excel, Notepad) is not part of the first line's text.
  if (!lines.empty() && lines[0].rfind("\xEF\xBB\xBF", 0) == 0) lines[0].erase(0, 3);
  return lines;
}

MappedFile::MappedFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) throw InputError(path + ": cannot open file");
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
  other.data_ = nullptr, other.size_ = 0;
}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    if (data_) ::munmap(data_, size_);
    data_ = other.data_, size_ = other.size_;
    other.data_ = nullptr, other.size_ = 0;
  }
  return *this;
}

RunLock::RunLock(const std::string& dir) {
  const std::string path = dir + "/.lock";
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) throw RuntimeError(path + ": cannot open the run's lock file (" + std::strerror(errno) + ")");
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    std::string holder = read_file(path);
    while (!holder.empty() && (holder.back() == '\n' || holder.back() == ' ')) holder.pop_back();
    ::close(fd_);
    fd_ = -1;
    if (err != EWOULDBLOCK) throw RuntimeError(path + ": cannot lock (" + std::strerror(err) + ")");
    throw RuntimeError(dir + " is in use by another run (" + (holder.empty() ? "holder unknown" : holder.substr(0, 200)) +
                       "): wait for it to finish or choose another --output");
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
  if (fd_ >= 0) ::close(fd_);  // closing releases the flock
}

void fsync_directory(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

}  // namespace lmkit
