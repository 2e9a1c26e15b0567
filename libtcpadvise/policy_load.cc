#include <dlfcn.h>
#include <limits.h>
#include <string.h>

#include "errno_saver.h"
#include "policy.h"
#include "policy_load.h"
#include "private_alloc.h"
#include "raw_log.h"

namespace tcpadvise {

const PolicyConfig* g_policy_config = nullptr;
bool g_config_problem = false;

void LoadPolicyConfig(const char* path) {
  ErrnoSaver errno_saver;
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
  g_policy_config = config;
}

}  // namespace tcpadvise
