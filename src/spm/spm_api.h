// The C interface of lmkit's SentencePiece module (liblmkit_spm.so).
//
// sentencepiece and LibTorch cannot share an executable: libsentencepiece
// exports its bundled protobuf-lite, which clashes with LibTorch's libprotobuf
// and segfaults at start-up (docs/architecture.md, tokenizer/). So the sentencepiece calls live in a
// MODULE library that nothing links; lmkit dlopen()s it with RTLD_DEEPBIND and
// calls these functions.
#pragma once

#ifdef __cplusplus
extern "C" {
#endif

/// Token kinds returned by lmkit_spm_kind.
enum { LMKIT_SPM_NORMAL = 0, LMKIT_SPM_CONTROL = 1, LMKIT_SPM_UNKNOWN = 2, LMKIT_SPM_BYTE = 3, LMKIT_SPM_UNUSED = 4 };

/// Trains a model from key/value trainer options (sentencepiece_trainer's kwargs).
/// Returns 0, or -1 with a message in err.
int lmkit_spm_train(const char* const* keys, const char* const* values, int n, char* err, int err_len);
/// Loads a serialized model (a .model file's bytes); returns a handle, or null with a message in err.
void* lmkit_spm_load(const char* data, long len, char* err, int err_len);
void lmkit_spm_free(void* handle);
int lmkit_spm_piece_size(void* handle);
/// The id of a piece, or the unknown id when it is not in the vocabulary.
int lmkit_spm_piece_to_id(void* handle, const char* piece);
/// Copies the piece of `id` into out (up to cap bytes); returns its full length.
int lmkit_spm_id_to_piece(void* handle, int id, char* out, int cap);
int lmkit_spm_kind(void* handle, int id);
/// Encodes text into at most cap ids; returns the number of ids (> cap: call again with more room), -1 on error.
long lmkit_spm_encode(void* handle, const char* text, long len, int* out, long cap);
/// Decodes ids into at most cap bytes; returns the full length (> cap: call again), -1 on error.
long lmkit_spm_decode(void* handle, const int* ids, long n, char* out, long cap);

#ifdef __cplusplus
}
#endif
