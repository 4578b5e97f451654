// wcodec/container.h — the .wcodec container: encoding a safetensors file,
// and random-access reading of the original bytes.
//
// Format: docs/wcodec-format.md. A .wcodec file keeps the original
// safetensors header bytes and every tensor's data cut into chunks that
// decode independently, with an XXH3-64 per chunk, a CRC32 per tensor and
// the SHA-256 of the whole original file.
//
// Thread-safety: Reader is immutable after open(); read(), decode_chunk() and
// verify() may be called from many threads at once (they use pread and
// per-call scratch). The encoder functions are re-entrant.
//
// This header includes the two halves: wcodec/encode.h (the encoder) and
// wcodec/reader.h (the reader); wcodec/format.h holds what they share.
#pragma once

#include "wcodec/encode.h"
#include "wcodec/format.h"
#include "wcodec/reader.h"
