// CompiledConfig: a parsed PolicyConfig saved as bytes. A process whose
// TCPADVISE_CONFIG names a compiled config loads its policy with one read,
// where YAML costs a dlopen of libtcpadvise_config.so, yaml-cpp and
// libstdc++ (milliseconds at every process start: bench/start_cost.py).
// `tcpadvise-config-check --compile` writes one; `tcpadvise record` hands
// the processes it runs one, and `tcpadvise config compile` makes one for
// a program started by hand.
#ifndef TCPADVISE_CONFIG_COMPILED_H_
#define TCPADVISE_CONFIG_COMPILED_H_

#include <stddef.h>
#include <stdint.h>

#include "config.h"

namespace tcpadvise {

// kCompiledConfigMagic opens every compiled config; its last byte is the
// format, bumped whenever PolicyConfig's layout changes.
constexpr unsigned char kCompiledConfigMagic[8] = {'T', 'C', 'P', 'A', 'C', 'F', 'G', 1};

// CompiledConfigHeader precedes the config's bytes: PolicyConfig's up to
// its last rule in use, then those from its experiment on (the unused rules
// are left out: a config of a few rules is a few hundred bytes, read and
// copied in a few pages). layout tells a config compiled by a build whose
// PolicyConfig differs (sizes and field offsets); checksum (FNV-1a) catches
// a file cut short or damaged.
struct CompiledConfigHeader {
  unsigned char magic[8];
  uint64_t layout;
  uint64_t checksum;
};

// kMaxCompiledConfigSize bounds a compiled config file (every rule in use).
constexpr size_t kMaxCompiledConfigSize = sizeof(CompiledConfigHeader) + sizeof(PolicyConfig);

// IsCompiledConfig tells whether data (size bytes, the start of a file) opens
// with the magic: such a file is never read as YAML.
bool IsCompiledConfig(const void* data, size_t size);

// EncodeCompiledConfig writes config compiled to out (kMaxCompiledConfigSize
// bytes at most) and returns how many bytes it wrote.
size_t EncodeCompiledConfig(const PolicyConfig& config, unsigned char* out);

// DecodeCompiledConfig reads a compiled config of size bytes into *config,
// which holds a PolicyConfig already (its rules past rule_count, never read,
// are left as they are); returns nullptr, or why the bytes cannot be used
// (then *config is unusable). Every index and length is checked, so a
// damaged file fails here and never later in a hook.
const char* DecodeCompiledConfig(const void* data, size_t size, PolicyConfig* config);

}  // namespace tcpadvise

#endif  // TCPADVISE_CONFIG_COMPILED_H_
