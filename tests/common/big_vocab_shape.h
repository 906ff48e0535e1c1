// A model past 32-bit arithmetic, shared by the tests of the byte accounting
// (model shape, shard bytes, resource model): a 256000-token vocabulary at
// hidden 16384, blocks of 4194304000 (the tied embedding), 3221258240 (each of
// two layers) and 16384 (the final norm) parameters.
#pragma once

#include "common/model_shape.h"

namespace tencache {

inline ModelShape BigVocabShape() {
  ModelShape m;
  m.name = "custom";
  m.layers = 2;
  m.hidden = 16384;
  m.heads = m.kv_heads = 128;
  m.ffn_hidden = 65536;
  m.seq_len = m.max_positions = 2048;
  m.vocab = 256000;
  m.position = PositionKind::kRotary;
  m.norm = NormKind::kRmsNorm;
  m.bias = false;
  return m;
}

}  // namespace tencache
