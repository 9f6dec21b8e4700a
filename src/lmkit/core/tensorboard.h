// TensorBoard event files, written natively: TFRecord framing (length, masked
// CRC32C of the length, payload, masked CRC32C of the payload) around the few
// fields of tensorflow's Event / Summary protos that scalars and text need,
// encoded by hand (no protobuf library: LibTorch's and sentencepiece's already
// clash in one process).
#pragma once

#include <cstdint>
#include <fstream>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace lmkit::tensorboard {

/// CRC-32C (Castagnoli), as TFRecord uses it.
uint32_t crc32c(std::string_view data);
/// TFRecord's masked CRC: ((crc >> 15) | (crc << 17)) + 0xa282ead8.
uint32_t masked_crc32c(std::string_view data);
/// One TFRecord around `payload`.
std::string frame(std::string_view payload);

/// Serialised Event protos (fields in field-number order, as protobuf writes them).
std::string file_version_event(double wall_time);                                        ///< "brain.Event:2"
std::string scalar_event(double wall_time, int64_t step, const std::string& tag, float value);
std::string text_event(double wall_time, int64_t step, const std::string& tag, const std::string& text);  ///< the text plugin's

/// One event file, DIR/events.out.tfevents.`<seconds>`.`<host>`.`<pid>`.lmkit, flushed after
/// each event.
class EventWriter {
 public:
  explicit EventWriter(const std::string& dir);
  void scalar(const std::string& tag, float value, int64_t step, double wall_time);
  void text(const std::string& tag, const std::string& text, int64_t step, double wall_time);
  /// Every number of a metrics.jsonl record as SPLIT/KEY at its "step" (nested objects
  /// as SPLIT/KEY/SUBKEY; "step" and "split" themselves are not scalars).
  void record(const nlohmann::json& line, double wall_time);
  const std::string& path() const { return path_; }

 private:
  void write(const std::string& event);
  std::string path_;
  std::ofstream out_;
};

/// Seconds since the epoch (an event's wall_time).
double now();
/// Removes the event files lmkit wrote in `dir` (names ending in ".lmkit"), none of another writer's.
void remove_event_files(const std::string& dir);

}  // namespace lmkit::tensorboard
