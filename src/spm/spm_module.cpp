// liblmkit_spm.so: sentencepiece behind the C interface of spm_api.h.
#include "spm_api.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

namespace {

void set_error(char* err, int err_len, const std::string& message) {
  if (err && err_len > 0) {
    std::strncpy(err, message.c_str(), static_cast<size_t>(err_len) - 1);
    err[err_len - 1] = '\0';
  }
}

sentencepiece::SentencePieceProcessor* processor(void* handle) {
  return static_cast<sentencepiece::SentencePieceProcessor*>(handle);
}

}  // namespace

extern "C" {

int lmkit_spm_train(const char* const* keys, const char* const* values, int n, char* err, int err_len) {
  std::unordered_map<std::string, std::string> kwargs;
  for (int i = 0; i < n; ++i) kwargs[keys[i]] = values[i];
  try {
    const auto status = sentencepiece::SentencePieceTrainer::Train(kwargs);
    if (!status.ok()) {
      set_error(err, err_len, status.ToString());
      return -1;
    }
  } catch (const std::exception& e) {
    set_error(err, err_len, e.what());
    return -1;
  }
  return 0;
}

void* lmkit_spm_load(const char* data, long len, char* err, int err_len) {
  auto* sp = new sentencepiece::SentencePieceProcessor();
  const auto status = sp->LoadFromSerializedProto(std::string(data, static_cast<size_t>(len)));
  if (!status.ok()) {
    set_error(err, err_len, status.ToString());
    delete sp;
    return nullptr;
  }
  return sp;
}

void lmkit_spm_free(void* handle) { delete processor(handle); }

int lmkit_spm_piece_size(void* handle) { return processor(handle)->GetPieceSize(); }

int lmkit_spm_piece_to_id(void* handle, const char* piece) { return processor(handle)->PieceToId(piece); }

int lmkit_spm_id_to_piece(void* handle, int id, char* out, int cap) {
  const std::string& piece = processor(handle)->IdToPiece(id);
  if (cap > 0) std::memcpy(out, piece.data(), std::min<size_t>(piece.size(), static_cast<size_t>(cap)));
  return static_cast<int>(piece.size());
}

int lmkit_spm_kind(void* handle, int id) {
  auto* sp = processor(handle);
  if (sp->IsControl(id)) return LMKIT_SPM_CONTROL;
  if (sp->IsUnknown(id)) return LMKIT_SPM_UNKNOWN;
  if (sp->IsByte(id)) return LMKIT_SPM_BYTE;
  if (sp->IsUnused(id)) return LMKIT_SPM_UNUSED;
  return LMKIT_SPM_NORMAL;
}

long lmkit_spm_encode(void* handle, const char* text, long len, int* out, long cap) {
  std::vector<int> ids;
  if (!processor(handle)->Encode(std::string(text, static_cast<size_t>(len)), &ids).ok()) return -1;
  if (static_cast<long>(ids.size()) <= cap) std::memcpy(out, ids.data(), ids.size() * sizeof(int));
  return static_cast<long>(ids.size());
}

long lmkit_spm_decode(void* handle, const int* ids, long n, char* out, long cap) {
  std::string text;
  if (!processor(handle)->Decode(std::vector<int>(ids, ids + n), &text).ok()) return -1;
  if (static_cast<long>(text.size()) <= cap) std::memcpy(out, text.data(), text.size());
  return static_cast<long>(text.size());
}

}  // extern "C"
