#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <unistd.h>

#include "config_compiled.h"
#include "errno_saver.h"
#include "policy.h"
#include "policy_load.h"
#include "private_alloc.h"
#include "raw_log.h"

namespace tcpadvise {

const PolicyConfig* g_policy_config = nullptr;
bool g_config_problem = false;

namespace {

// UseConfig makes config the loaded one.
void UseConfig(const PolicyConfig* config) {
  bool quickack = false;  // a rule re-arms TCP_QUICKACK after each read that got data
  for (const PolicyRule& rule : config->rules) quickack |= rule.settings.quickack;
  g_policy_config = config;
  if (quickack) GateEveryRead();
}

// A compiled config is read into, and decoded in, static storage: no
// allocation, and only the pages its bytes fill are touched.
unsigned char g_compiled_bytes[kMaxCompiledConfigSize + 1];
PolicyConfig g_compiled_config;

// ReadCompiled loads the file at path into g_compiled_config when it is a
// compiled config (config_compiled.h): true when it was one, usable or not
// (then g_config_problem says which); false for anything else, YAML's to read.
bool ReadCompiled(const char* path) {
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;  // the YAML loader words the error
  // Up to one byte more than a compiled config can hold: a longer file is refused.
  size_t size = 0;
  ssize_t n = 1;
  while (size < sizeof(g_compiled_bytes) && n > 0) {
    n = read(fd, g_compiled_bytes + size, sizeof(g_compiled_bytes) - size);
    if (n > 0) size += static_cast<size_t>(n);
  }
  close(fd);
  if (!IsCompiledConfig(g_compiled_bytes, size)) return false;
  if (const char* problem = DecodeCompiledConfig(g_compiled_bytes, size, &g_compiled_config)) {
    RawWarning("cannot use the compiled policy config %s (%s; 'tcpadvise config compile' makes a new one); "
               "the program is only observed", path, problem);
    g_config_problem = true;
    return true;
  }
  UseConfig(&g_compiled_config);
  return true;
}

}  // namespace

void LoadPolicyConfig(const char* path) {
  ErrnoSaver errno_saver;
  if (ReadCompiled(path)) return;
  Dl_info self;
  char library[PATH_MAX];
  if (dladdr(reinterpret_cast<void*>(&LoadPolicyConfig), &self) == 0 || self.dli_fname == nullptr ||
      strlen(self.dli_fname) + 32 > sizeof(library)) {
    RawWarning("cannot locate libtcpadvise_config.so; %s is ignored and the program is only observed", path);
    g_config_problem = true;
    return;
  }
  strcpy(library, self.dli_fname);
  char* slash = strrchr(library, '/');
  strcpy(slash != nullptr ? slash + 1 : library, "libtcpadvise_config.so");
  void* handle = dlopen(library, RTLD_NOW | RTLD_LOCAL);
  LoadConfigFn load = handle != nullptr ? reinterpret_cast<LoadConfigFn>(dlsym(handle, kLoadConfigSymbol)) : nullptr;
  if (load == nullptr) {
    RawWarning("cannot load %s (%s); %s is ignored and the program is only observed", library, dlerror(), path);
    g_config_problem = true;
    return;
  }
  PolicyConfig* config = PrivateNew<PolicyConfig>();
  char errors[512];
  if (config == nullptr || load(path, config, errors, sizeof(errors)) != 0) {
    char* newline = strchr(errors, '\n');
    if (newline != nullptr) *newline = '\0';
    RawWarning("bad policy config %s:%s (tcpadvise config check %s lists every mistake); the program is only observed",
               path, errors, path);
    g_config_problem = true;
    PrivateFree(config);
    return;
  }
  UseConfig(config);
}

}  // namespace tcpadvise
