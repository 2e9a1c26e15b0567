#include "import_redirect.h"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

namespace tcpadvise {
namespace {

// Relro is the library's read-only-after-relocation range, found by its
// load address.
struct Relro {
  ElfW(Addr) base;
  uintptr_t lo = 0;
  uintptr_t hi = 0;
};

int FindRelro(struct dl_phdr_info* info, size_t, void* arg) {
  auto* relro = static_cast<Relro*>(arg);
  if (info->dlpi_addr != relro->base) return 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_GNU_RELRO) continue;
    relro->lo = info->dlpi_addr + ph.p_vaddr;
    relro->hi = relro->lo + ph.p_memsz;
  }
  return 1;
}

// WriteSlot stores target in slot, making a read-only page writable for
// the store and read-only again.
bool WriteSlot(void** slot, void* target, const Relro& relro) {
  const uintptr_t at = reinterpret_cast<uintptr_t>(slot);
  if (at < relro.lo || at >= relro.hi) {
    __atomic_store_n(slot, target, __ATOMIC_RELEASE);
    return true;
  }
  const uintptr_t page_size = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  void* page = reinterpret_cast<void*>(at & ~(page_size - 1));
  if (mprotect(page, page_size, PROT_READ | PROT_WRITE) != 0) return false;
  __atomic_store_n(slot, target, __ATOMIC_RELEASE);
  return mprotect(page, page_size, PROT_READ) == 0;
}

}  // namespace

bool RedirectImports(void* handle, ImportRedirect* redirects, int count) {
  for (int i = 0; i < count; ++i) *redirects[i].original = nullptr;
  struct link_map* map = nullptr;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &map) != 0 || map == nullptr) return false;
  const ElfW(Addr) base = map->l_addr;
  // The loader relocates some dynamic entries in place: an address below
  // the load address is still the file's.
  const auto at = [base](ElfW(Addr) p) { return p < base ? p + base : p; };
  const ElfW(Sym)* symbols = nullptr;
  const char* names = nullptr;
  const ElfW(Rela)* tables[2] = {nullptr, nullptr};
  size_t sizes[2] = {0, 0};
  for (const ElfW(Dyn)* d = map->l_ld; d->d_tag != DT_NULL; ++d) {
    switch (d->d_tag) {
      case DT_SYMTAB:
        symbols = reinterpret_cast<const ElfW(Sym)*>(at(d->d_un.d_ptr));
        break;
      case DT_STRTAB:
        names = reinterpret_cast<const char*>(at(d->d_un.d_ptr));
        break;
      case DT_JMPREL:
        tables[0] = reinterpret_cast<const ElfW(Rela)*>(at(d->d_un.d_ptr));
        break;
      case DT_PLTRELSZ:
        sizes[0] = d->d_un.d_val;
        break;
      case DT_RELA:
        tables[1] = reinterpret_cast<const ElfW(Rela)*>(at(d->d_un.d_ptr));
        break;
      case DT_RELASZ:
        sizes[1] = d->d_un.d_val;
        break;
      case DT_PLTREL:
        if (d->d_un.d_val != DT_RELA) return false;
        break;
      default:
        break;
    }
  }
  if (symbols == nullptr || names == nullptr) return false;
  Relro relro{base};
  dl_iterate_phdr(FindRelro, &relro);
  for (int t = 0; t < 2; ++t) {
    if (tables[t] == nullptr) continue;
    for (size_t r = 0; r < sizes[t] / sizeof(ElfW(Rela)); ++r) {
      const ElfW(Rela)& rela = tables[t][r];
      const auto type = ELF64_R_TYPE(rela.r_info);
      if (type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT) continue;
      const char* name = names + symbols[ELF64_R_SYM(rela.r_info)].st_name;
      for (int i = 0; i < count; ++i) {
        if (strcmp(name, redirects[i].name) != 0) continue;
        auto** slot = reinterpret_cast<void**>(base + rela.r_offset);
        if (*redirects[i].original == nullptr) *redirects[i].original = *slot;
        if (!WriteSlot(slot, redirects[i].replacement, relro)) return false;
      }
    }
  }
  return true;
}

}  // namespace tcpadvise
