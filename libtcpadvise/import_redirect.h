// Import redirection: a loaded library's own calls of named functions (the
// slots of its global offset table) sent to replacements, leaving every
// other caller's calls of them alone.
#ifndef TCPADVISE_IMPORT_REDIRECT_H_
#define TCPADVISE_IMPORT_REDIRECT_H_

namespace tcpadvise {

// ImportRedirect names one function the library imports, the replacement
// its calls go to, and where the slot's former target is kept (for the
// replacement to call on).
struct ImportRedirect {
  const char* name;
  void* replacement;
  void** original;
};

// RedirectImports points every slot of handle's library (a dlopen handle,
// its symbols bound: RTLD_NOW) that names one of the redirects to its
// replacement, the read-only ones (RELRO) included; a redirect the library
// does not import stays unset (*original nullptr). Returns false when a
// slot could not be written or the library's tables could not be read;
// slots written before stay written.
bool RedirectImports(void* handle, ImportRedirect* redirects, int count);

}  // namespace tcpadvise

#endif  // TCPADVISE_IMPORT_REDIRECT_H_
