#include "common/hf_layout.h"

#include <cstring>
#include <iterator>

namespace tencache {
namespace {

enum class Family { kGpt2, kOpt, kLlama, kFalcon, kBloom };

StatusOr<Family> FamilyOf(const ModelShape& m) {
  auto no = [&](const std::string& key, const std::string& why) {
    return Status::InvalidArgument("model." + key + ": no Hugging Face architecture matches: " + why);
  };
  if (m.position == PositionKind::kAlibi) {
    if (!m.embedding_norm || !m.fused_qkv || m.norm != NormKind::kLayerNorm || m.mlp != MlpKind::kGelu || !m.bias ||
        m.parallel_block || !m.tied_embeddings || m.kv_heads != m.heads || m.ffn_hidden != 4 * m.hidden) {
      return no("position", "alibi is BLOOM's, which has an embedding norm, a fused qkv, LayerNorm, gelu, biases, "
                            "no parallel blocks, a tied head, kv_heads = heads and ffn_hidden = 4 x hidden");
    }
    return Family::kBloom;
  }
  if (m.embedding_norm) return no("embedding_norm", "only BLOOM (position alibi) has a norm after the embedding");
  if (m.parallel_block) {
    if (m.position != PositionKind::kRotary || m.norm != NormKind::kLayerNorm || m.mlp != MlpKind::kGeluExact ||
        m.bias || !m.fused_qkv || !m.tied_embeddings || (m.kv_heads != 1 && m.kv_heads != m.heads)) {
      return no("parallel_block", "parallel blocks are Falcon's, which has rotary positions, LayerNorm, gelu_exact, "
                                  "no biases, a fused qkv, a tied head and kv_heads 1 or heads");
    }
    return Family::kFalcon;
  }
  if (m.position == PositionKind::kRotary) {
    if (m.norm != NormKind::kRmsNorm || m.mlp != MlpKind::kSwiGlu || m.bias || m.fused_qkv) {
      return no("position", "sequential rotary blocks are Llama's, which has rmsnorm, swiglu, no biases and "
                            "separate q, k, v");
    }
    return Family::kLlama;
  }
  if (m.norm != NormKind::kLayerNorm || !m.bias || !m.tied_embeddings || m.kv_heads != m.heads) {
    return no("position", "learned positions are GPT-2's and OPT's, which have LayerNorm, biases, a tied head and "
                          "kv_heads = heads");
  }
  if (m.mlp == MlpKind::kRelu && m.position_offset == 2 && !m.fused_qkv) return Family::kOpt;
  if (m.mlp == MlpKind::kGelu && m.position_offset == 0 && m.fused_qkv) return Family::kGpt2;
  return no("mlp", "learned positions with gelu, offset 0 and a fused qkv are GPT-2's; with relu, offset 2 and "
                   "separate q, k, v, OPT's");
}

// One of our names and theirs in each family (gpt2, opt, llama, falcon,
// bloom; "" where the family has no such tensor).
struct NameRow {
  const char* ours;
  const char* theirs[5];
};

std::string Lookup(const NameRow* rows, size_t n, Family f, const std::string& ours) {
  for (size_t i = 0; i < n; ++i) {
    if (ours == rows[i].ours) return rows[i].theirs[int(f)];
  }
  return "";
}

// Our name within a layer ("norm1.weight") -> theirs.
std::string LayerName(Family f, const std::string& ours) {
  static const NameRow rows[] = {
      {"norm1.weight", {"ln_1.weight", "self_attn_layer_norm.weight", "input_layernorm.weight", "input_layernorm.weight", "input_layernorm.weight"}},
      {"norm1.bias", {"ln_1.bias", "self_attn_layer_norm.bias", "", "input_layernorm.bias", "input_layernorm.bias"}},
      {"attn.qkv.weight", {"attn.c_attn.weight", "", "", "self_attention.query_key_value.weight", "self_attention.query_key_value.weight"}},
      {"attn.qkv.bias", {"attn.c_attn.bias", "", "", "", "self_attention.query_key_value.bias"}},
      {"attn.q.weight", {"", "self_attn.q_proj.weight", "self_attn.q_proj.weight", "", ""}},
      {"attn.q.bias", {"", "self_attn.q_proj.bias", "", "", ""}},
      {"attn.k.weight", {"", "self_attn.k_proj.weight", "self_attn.k_proj.weight", "", ""}},
      {"attn.k.bias", {"", "self_attn.k_proj.bias", "", "", ""}},
      {"attn.v.weight", {"", "self_attn.v_proj.weight", "self_attn.v_proj.weight", "", ""}},
      {"attn.v.bias", {"", "self_attn.v_proj.bias", "", "", ""}},
      {"attn.out.weight", {"attn.c_proj.weight", "self_attn.out_proj.weight", "self_attn.o_proj.weight", "self_attention.dense.weight", "self_attention.dense.weight"}},
      {"attn.out.bias", {"attn.c_proj.bias", "self_attn.out_proj.bias", "", "", "self_attention.dense.bias"}},
      {"norm2.weight", {"ln_2.weight", "final_layer_norm.weight", "post_attention_layernorm.weight", "", "post_attention_layernorm.weight"}},
      {"norm2.bias", {"ln_2.bias", "final_layer_norm.bias", "", "", "post_attention_layernorm.bias"}},
      {"mlp.gate.weight", {"", "", "mlp.gate_proj.weight", "", ""}},
      {"mlp.up.weight", {"mlp.c_fc.weight", "fc1.weight", "mlp.up_proj.weight", "mlp.dense_h_to_4h.weight", "mlp.dense_h_to_4h.weight"}},
      {"mlp.up.bias", {"mlp.c_fc.bias", "fc1.bias", "", "", "mlp.dense_h_to_4h.bias"}},
      {"mlp.down.weight", {"mlp.c_proj.weight", "fc2.weight", "mlp.down_proj.weight", "mlp.dense_4h_to_h.weight", "mlp.dense_4h_to_h.weight"}},
      {"mlp.down.bias", {"mlp.c_proj.bias", "fc2.bias", "", "", "mlp.dense_4h_to_h.bias"}},
  };
  return Lookup(rows, std::size(rows), f, ours);
}

// Our name outside the layers ("embed.tokens") -> theirs.
std::string TopName(Family f, const std::string& ours) {
  static const NameRow rows[] = {
      {"embed.tokens", {"wte.weight", "embed_tokens.weight", "embed_tokens.weight", "word_embeddings.weight", "word_embeddings.weight"}},
      {"embed.positions", {"wpe.weight", "embed_positions.weight", "", "", ""}},
      {"embed.norm.weight", {"", "", "", "", "word_embeddings_layernorm.weight"}},
      {"embed.norm.bias", {"", "", "", "", "word_embeddings_layernorm.bias"}},
      {"final_norm.weight", {"ln_f.weight", "final_layer_norm.weight", "norm.weight", "ln_f.weight", "ln_f.weight"}},
      {"final_norm.bias", {"ln_f.bias", "final_layer_norm.bias", "", "ln_f.bias", "ln_f.bias"}},
  };
  return Lookup(rows, std::size(rows), f, ours);
}

const char* Prefix(Family f) {
  switch (f) {
    case Family::kOpt: return "model.decoder.";
    case Family::kLlama: return "model.";
    default: return "transformer.";
  }
}

const char* LayersWord(Family f) { return f == Family::kOpt || f == Family::kLlama ? "layers." : "h."; }

}  // namespace

bool HfArch::Ignorable(const std::string& name) const {
  auto ends = [&](const char* s) {
    const size_t n = std::strlen(s);
    return name.size() >= n && name.compare(name.size() - n, n, s) == 0;
  };
  if (ends(".attn.bias") || ends(".attn.masked_bias") || ends("rotary_emb.inv_freq")) return true;
  return name == "lm_head.weight" && tied;  // a tied head saved anyway
}

StatusOr<HfArch> HfArchFor(const ModelShape& m) {
  TC_ASSIGN_OR_RETURN(Family f, FamilyOf(m));
  static const char* kTypes[] = {"gpt2", "opt", "llama", "falcon", "bloom"};
  static const char* kArchs[] = {"GPT2LMHeadModel", "OPTForCausalLM", "LlamaForCausalLM", "FalconForCausalLM",
                                 "BloomForCausalLM"};
  HfArch a;
  a.model_type = kTypes[int(f)];
  a.architecture = kArchs[int(f)];
  a.tied = m.tied_embeddings;
  for (const TensorShape& t : m.Tensors()) {
    HfTensor h;
    h.ours = t.name;
    h.prefix = Prefix(f);
    h.their_dims = t.dims;
    std::string theirs;
    if (t.name == "lm_head.weight") {
      theirs = "lm_head.weight";
      h.prefix.clear();
    } else if (t.name.rfind("layers.", 0) == 0) {
      const size_t dot = t.name.find('.', 7);
      const std::string within = LayerName(f, t.name.substr(dot + 1));
      if (!within.empty()) theirs = std::string(LayersWord(f)) + t.name.substr(7, dot - 7) + "." + within;
    } else {
      theirs = TopName(f, t.name);
    }
    if (theirs.empty()) return Status::Internal("hf_layout: no " + a.model_type + " name for " + t.name);
    h.theirs = h.prefix + theirs;
    const bool matrix = t.dims.size() == 2 && t.name.find("embed") == std::string::npos;
    if (f == Family::kGpt2 && matrix) {
      h.transform = HfTransform::kTranspose;
      h.their_dims = {t.dims[1], t.dims[0]};
    }
    const bool qkv = t.name.find(".attn.qkv.") != std::string::npos;
    if (qkv && (f == Family::kBloom || (f == Family::kFalcon && m.kv_heads == m.heads))) {
      h.transform = HfTransform::kInterleaveHeads;
    }
    a.tensors.push_back(std::move(h));
  }
  return a;
}

void HfReorder(const HfTensor& t, const ModelShape& m, bool to_theirs, const float* in, float* out) {
  int64_t numel = 1;
  for (int64_t d : t.their_dims) numel *= d;
  switch (t.transform) {
    case HfTransform::kNone:
      std::memcpy(out, in, size_t(numel) * sizeof(float));
      return;
    case HfTransform::kTranspose: {  // ours [rows, cols] <-> theirs [cols, rows]
      const int64_t rows = t.their_dims[1], cols = t.their_dims[0];
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t c = 0; c < cols; ++c) {
          if (to_theirs) out[c * rows + r] = in[r * cols + c];
          else out[r * cols + c] = in[c * rows + r];
        }
      }
      return;
    }
    case HfTransform::kInterleaveHeads: {  // row block (part, head) <-> (head, part), each head_dim rows
      const int64_t heads = m.heads, hd = m.head_dim(), width = t.their_dims.size() > 1 ? t.their_dims[1] : 1;
      for (int64_t part = 0; part < 3; ++part) {
        for (int64_t h = 0; h < heads; ++h) {
          const int64_t ours_row = (part * heads + h) * hd, their_row = (h * 3 + part) * hd;
          const float* src = in + (to_theirs ? ours_row : their_row) * width;
          float* dst = out + (to_theirs ? their_row : ours_row) * width;
          std::memcpy(dst, src, size_t(hd * width) * sizeof(float));
        }
      }
      return;
    }
  }
}

StatusOr<nlohmann::ordered_json> HfConfig(const ModelShape& m, DType dtype) {
  TC_ASSIGN_OR_RETURN(HfArch a, HfArchFor(m));
  nlohmann::ordered_json c;
  c["architectures"] = {a.architecture};
  c["model_type"] = a.model_type;
  c["vocab_size"] = m.vocab;
  if (a.model_type == "gpt2") {
    c["n_positions"] = m.max_positions;
    c["n_embd"] = m.hidden;
    c["n_layer"] = m.layers;
    c["n_head"] = m.heads;
    c["n_inner"] = m.ffn_hidden;
    c["activation_function"] = "gelu_new";
    c["layer_norm_epsilon"] = m.norm_eps;
  } else if (a.model_type == "opt") {
    c["hidden_size"] = m.hidden;
    c["num_hidden_layers"] = m.layers;
    c["num_attention_heads"] = m.heads;
    c["ffn_dim"] = m.ffn_hidden;
    c["max_position_embeddings"] = m.max_positions;
    c["word_embed_proj_dim"] = m.hidden;
    c["activation_function"] = "relu";
    c["do_layer_norm_before"] = true;
    c["enable_bias"] = true;
    c["layer_norm_elementwise_affine"] = true;
  } else if (a.model_type == "llama") {
    c["hidden_size"] = m.hidden;
    c["intermediate_size"] = m.ffn_hidden;
    c["num_hidden_layers"] = m.layers;
    c["num_attention_heads"] = m.heads;
    c["num_key_value_heads"] = m.kv_heads;
    c["max_position_embeddings"] = m.max_positions;
    c["rms_norm_eps"] = m.norm_eps;
    c["rope_theta"] = m.rope_theta;
    c["hidden_act"] = "silu";
    c["attention_bias"] = false;
    c["mlp_bias"] = false;
  } else if (a.model_type == "falcon") {
    c["hidden_size"] = m.hidden;
    c["num_hidden_layers"] = m.layers;
    c["num_attention_heads"] = m.heads;
    c["num_kv_heads"] = m.kv_heads;
    c["multi_query"] = m.kv_heads == 1;
    c["parallel_attn"] = true;
    c["new_decoder_architecture"] = false;
    c["alibi"] = false;
    c["bias"] = false;
    c["ffn_hidden_size"] = m.ffn_hidden;
    c["activation"] = "gelu";
    c["layer_norm_epsilon"] = m.norm_eps;
    c["rope_theta"] = m.rope_theta;
    c["max_position_embeddings"] = m.max_positions;
  } else {  // bloom
    c["hidden_size"] = m.hidden;
    c["n_layer"] = m.layers;
    c["n_head"] = m.heads;
    c["layer_norm_epsilon"] = m.norm_eps;
    c["apply_residual_connection_post_layernorm"] = false;
  }
  c["tie_word_embeddings"] = m.tied_embeddings;
  c["torch_dtype"] = dtype == DType::kFp32 ? "float32" : dtype == DType::kFp16 ? "float16" : "bfloat16";
  return c;
}

}  // namespace tencache
