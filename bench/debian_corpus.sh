#!/usr/bin/env bash
# A real text corpus, tokenised, from what every Debian machine has: the
# license texts, every package's copyright file and Debian changelog under
# /usr/share/doc. A sentencepiece BPE model of VOCAB pieces (byte fallback, so
# every byte has a token) is trained on it, and the text is written as
# little-endian uint16 token ids, the worker's `.bin` format (docs/job-yaml.md,
# train.data).
#   bench/debian_corpus.sh OUT_DIR [VOCAB]   -> OUT_DIR/corpus.bin, OUT_DIR/spm.model
# Needs spm_train and spm_encode (Debian's sentencepiece) and perl.
set -euo pipefail
out=${1:?usage: bench/debian_corpus.sh OUT_DIR [VOCAB]}
vocab=${2:-32000}
if [ "$vocab" -gt 65536 ]; then echo "debian_corpus: VOCAB $vocab: uint16 tokens hold at most 65536" >&2; exit 2; fi
for tool in spm_train spm_encode perl; do
  command -v "$tool" >/dev/null || { echo "debian_corpus: $tool not found (scripts/install-deps.sh installs it)" >&2; exit 2; }
done
mkdir -p "$out"
if [ -s "$out/corpus.bin" ] && [ -s "$out/spm.model" ] && [ "$(cat "$out/vocab" 2>/dev/null)" = "$vocab" ]; then
  echo "debian_corpus: $out/corpus.bin is there ($(($(stat -c %s "$out/corpus.bin") / 2)) tokens, vocab $vocab)"
  exit 0
fi
text="$out/corpus.txt"
{
  cat /usr/share/common-licenses/* 2>/dev/null
  for f in /usr/share/doc/*/copyright; do cat "$f"; done 2>/dev/null
  for f in /usr/share/doc/*/changelog.Debian.gz; do zcat "$f"; done 2>/dev/null
} | tr -d '\r' | grep -v '^[[:space:]]*$' >"$text" || true
echo "debian_corpus: $(wc -c <"$text") bytes of text"
spm_train --input="$text" --model_prefix="$out/spm" --vocab_size="$vocab" --model_type=bpe \
  --byte_fallback=true --character_coverage=0.9995 --input_sentence_size=400000 --shuffle_input_sentence=true \
  --num_threads="$(nproc)" --minloglevel=2 >"$out/spm_train.log" 2>&1 ||
  { tail -20 "$out/spm_train.log" >&2; exit 1; }
spm_encode --model="$out/spm.model" --output_format=id <"$text" | perl -ne 'print pack("v*", split)' >"$out/corpus.bin.tmp"
mv "$out/corpus.bin.tmp" "$out/corpus.bin"
echo "$vocab" >"$out/vocab"
rm -f "$text"
echo "debian_corpus: $out/corpus.bin: $(($(stat -c %s "$out/corpus.bin") / 2)) tokens, vocab $vocab (sentencepiece BPE, $out/spm.model)"
