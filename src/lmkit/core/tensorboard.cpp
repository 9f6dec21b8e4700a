#include "lmkit/core/tensorboard.h"

#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "lmkit/core/error.h"

namespace fs = std::filesystem;

namespace lmkit::tensorboard {

namespace {

std::array<uint32_t, 256> crc_table() {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1u) ? 0x82f63b78u ^ (c >> 1) : c >> 1;  // reversed Castagnoli polynomial
    t[i] = c;
  }
  return t;
}

// Protobuf wire format: varints, and fields as (number << 3 | wire type).
void varint(std::string& out, uint64_t v) {
  while (v >= 0x80) out += static_cast<char>((v & 0x7f) | 0x80), v >>= 7;
  out += static_cast<char>(v);
}
void key(std::string& out, int field, int wire) { varint(out, static_cast<uint64_t>(field) << 3 | static_cast<uint64_t>(wire)); }
void bytes_field(std::string& out, int field, std::string_view bytes) {
  key(out, field, 2);
  varint(out, bytes.size());
  out += bytes;
}
template <typename T>
void fixed_field(std::string& out, int field, T value) {
  key(out, field, sizeof(T) == 8 ? 1 : 5);
  char raw[sizeof(T)];
  std::memcpy(raw, &value, sizeof(T));  // little-endian hosts (x86-64, aarch64)
  out.append(raw, sizeof(T));
}

// Event{wall_time = 1, step = 2, summary = 5}; proto3 leaves zero fields out.
std::string event(double wall_time, int64_t step, const std::string& summary) {
  std::string e;
  if (wall_time != 0) fixed_field(e, 1, wall_time);
  if (step != 0) key(e, 2, 0), varint(e, static_cast<uint64_t>(step));
  bytes_field(e, 5, summary);
  return e;
}

}  // namespace

uint32_t crc32c(std::string_view data) {
  static const auto table = crc_table();
  uint32_t c = 0xffffffffu;
  for (const char ch : data) c = table[(c ^ static_cast<uint8_t>(ch)) & 0xffu] ^ (c >> 8);
  return c ^ 0xffffffffu;
}

uint32_t masked_crc32c(std::string_view data) {
  const uint32_t c = crc32c(data);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

std::string frame(std::string_view payload) {
  std::string out;
  const uint64_t length = payload.size();
  char raw[8];
  std::memcpy(raw, &length, 8);
  const std::string_view len(raw, 8);
  const uint32_t len_crc = masked_crc32c(len), data_crc = masked_crc32c(payload);
  out.append(len);
  out.append(reinterpret_cast<const char*>(&len_crc), 4);
  out.append(payload);
  out.append(reinterpret_cast<const char*>(&data_crc), 4);
  return out;
}

std::string file_version_event(double wall_time) {
  std::string e;
  fixed_field(e, 1, wall_time);
  bytes_field(e, 3, "brain.Event:2");
  return e;
}

std::string scalar_event(double wall_time, int64_t step, const std::string& tag, float value) {
  std::string v, summary;
  bytes_field(v, 1, tag);
  fixed_field(v, 2, value);  // Summary.Value.simple_value
  bytes_field(summary, 1, v);
  return event(wall_time, step, summary);
}

std::string text_event(double wall_time, int64_t step, const std::string& tag, const std::string& text) {
  std::string tensor, plugin, metadata, v, summary;
  key(tensor, 1, 0), varint(tensor, 7);  // TensorProto.dtype = DT_STRING
  bytes_field(tensor, 8, text);          // string_val
  bytes_field(plugin, 1, "text");        // PluginData.plugin_name
  bytes_field(metadata, 1, plugin);      // SummaryMetadata.plugin_data
  bytes_field(v, 1, tag);
  bytes_field(v, 8, tensor);
  bytes_field(v, 9, metadata);
  bytes_field(summary, 1, v);
  return event(wall_time, step, summary);
}

double now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

EventWriter::EventWriter(const std::string& dir) {
  fs::create_directories(dir);
  char host[256] = "localhost";
  gethostname(host, sizeof(host) - 1);
  const double t = now();
  path_ = dir + "/events.out.tfevents." + std::to_string(static_cast<int64_t>(t)) + "." + host + "." +
          std::to_string(getpid()) + ".lmkit";
  out_.open(path_, std::ios::binary | std::ios::trunc);
  if (!out_) throw RuntimeError(path_ + ": cannot write the TensorBoard event file (" + std::strerror(errno) + ")");
  write(file_version_event(t));
}

void EventWriter::write(const std::string& e) {
  out_ << frame(e);
  out_.flush();
  if (!out_) throw RuntimeError(path_ + ": writing the TensorBoard event file failed (" + std::strerror(errno) + ")");
}

void EventWriter::scalar(const std::string& tag, float value, int64_t step, double wall_time) {
  write(scalar_event(wall_time, step, tag, value));
}

void EventWriter::text(const std::string& tag, const std::string& text, int64_t step, double wall_time) {
  write(text_event(wall_time, step, tag, text));
}

void EventWriter::record(const nlohmann::json& line, double wall_time) {
  const int64_t step = line.value("step", int64_t{0});
  const std::string split = line.value("split", std::string("train"));
  auto add = [&](auto& self, const std::string& prefix, const nlohmann::json& j) -> void {
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (prefix == split && (it.key() == "step" || it.key() == "split")) continue;
      const std::string tag = prefix + "/" + it.key();
      if (it.value().is_object()) self(self, tag, it.value());
      else if (it.value().is_number()) scalar(tag, it.value().get<float>(), step, wall_time);
    }
  };
  add(add, split, line);
}

void remove_event_files(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("events.out.tfevents.", 0) == 0 && e.path().extension() == ".lmkit") fs::remove(e.path(), ec);
  }
}

}  // namespace lmkit::tensorboard
