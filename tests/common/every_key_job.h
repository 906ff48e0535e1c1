// A job that sets every key of the schema (common/job_keys.h) to a value other
// than its default (for the shape keys, other than gpt2's, the preset it names),
// for round-trip and equality tests. Header-only test support.
#pragma once

#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

namespace tencache {

// Makes `dir` with the files the job names (model.init, train.data,
// cluster.hostfile) and returns KEY -> YAML value for every key but
// cluster.hostfile, which cannot stand beside cluster.hosts (HostfileValue).
// The shape keys fit the preset's too (hidden 96 takes gpt2's 12 heads), so
// that the job without any one of them is still valid.
inline std::map<std::string, std::string> EveryKeyValues(const std::filesystem::path& dir) {
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "init.safetensors") << "x";
  std::ofstream(dir / "corpus.bin") << std::string(1000, 'a');
  std::ofstream(dir / "hosts.txt") << "node1 slots=2\nnode2 slots=2\n";
  return {
      {"name", "every-key"},
      {"model.preset", "gpt2"},
      {"model.dtype", "fp16"},
      {"model.layers", "3"},
      {"model.hidden", "96"},
      {"model.heads", "4"},
      {"model.kv_heads", "2"},
      {"model.ffn_hidden", "96"},
      {"model.seq_len", "32"},
      {"model.vocab", "300"},
      {"model.max_positions", "48"},
      {"model.mlp", "swiglu"},
      {"model.norm", "rmsnorm"},
      {"model.position", "rotary"},
      {"model.bias", "false"},
      {"model.tied_embeddings", "false"},
      {"model.fused_qkv", "false"},  // gpt2 fuses them
      {"model.parallel_block", "true"},
      {"model.embedding_norm", "true"},
      {"model.rope_theta", "500000"},
      {"model.norm_eps", "1e-6"},
      {"model.init", "init.safetensors"},
      {"train.data", "corpus.bin"},
      {"train.tokens_per_epoch", "12345"},
      {"train.micro_batch", "2"},
      {"train.global_batch", "8"},
      {"train.steps", "50"},
      {"train.lr", "0.002"},
      {"train.lr_schedule", "cosine"},
      {"train.warmup_steps", "5"},
      {"train.min_lr", "1e-4"},
      {"train.beta1", "0.8"},
      {"train.beta2", "0.95"},
      {"train.eps", "1e-6"},
      {"train.weight_decay", "0.1"},
      {"train.grad_clip", "1.5"},
      {"train.initial_loss_scale", "1024"},
      {"train.loss_scale_window", "100"},
      {"train.eval_every", "10"},
      {"train.eval_data", "valid.bin"},
      {"train.eval_split", "0.1"},
      {"train.eval_sequences", "16"},
      {"train.seed", "42"},
      {"train.compute_threads", "3"},
      {"train.optimizer_overlap", "off"},
      {"train.checkpoint_every", "20"},
      {"train.checkpoint_on_stop", "false"},
      {"train.checkpoint_dir", "ck"},
      {"train.keep_checkpoints", "5"},
      {"cluster.target", "hosts"},
      {"cluster.nodes", "2"},
      {"cluster.ranks_per_node", "2"},
      {"cluster.max_nodes", "3"},
      {"cluster.instance_types", "[g5.xlarge, p4d.24xlarge]"},
      {"cluster.objective", "time"},
      {"cluster.use_spot", "true"},
      {"cluster.max_price_per_hour", "60.5"},
      {"cluster.max_restarts", "3"},
      {"cluster.restart_backoff_s", "2.5"},
      {"cluster.spot_interruption_rate", "0.08"},
      {"cluster.spot_restart_s", "120"},
      {"cluster.catalog", "my-catalog/"},
      {"cluster.volume.size", "2TiB"},
      {"cluster.volume.read_gbps", "2.5"},
      {"cluster.volume.write_gbps", "1.5"},
      {"cluster.image", "ghcr.io/acme/tencache-worker:0.1.0"},
      {"cluster.namespace", "ml-jobs"},
      {"cluster.nvme_volume", "host-path"},
      {"cluster.nvme_storage_class", "gp3"},
      {"cluster.nvme_host_path", "/local/tencache"},
      {"cluster.checkpoint_claim", "ckpt-claim"},
      {"cluster.data_claim", "datasets"},
      {"cluster.gang_scheduler", "volcano"},
      {"cluster.queue", "team-a"},
      {"cluster.priority_class", "training-high"},
      {"cluster.checkpoint_write_gbps", "4.5"},
      {"cluster.hosts", "[node1:2, node2:2]"},
      {"cluster.rsh_agent", "ssh -p 2222"},
      {"cluster.network_interface", "eth0"},
      {"cluster.instance_type", "p4d.24xlarge"},
      {"cache.policy", "lru"},
      {"cache.device_budget", "1GiB"},
      {"cache.host_budget", "3GiB"},
      {"cache.nvme_budget", "0"},
      {"cache.nvme_path", "/mnt/nvme0/tencache"},
      {"cache.prefetch", "false"},
  };
}

// cluster.hostfile's value (made by EveryKeyValues), to use in place of cluster.hosts.
inline const char* HostfileValue() { return "hosts.txt"; }

// `values` as --set KEY=VALUE overrides.
inline std::vector<std::string> AsOverrides(const std::map<std::string, std::string>& values) {
  std::vector<std::string> sets;
  for (const auto& [key, value] : values) sets.push_back(key + "=" + value);
  return sets;
}

}  // namespace tencache
