// Cork: the cork policy keeps the held bytes in the kernel. A burst's first
// write sets TCP_CORK; the release (read, wait, deadline, exit paths)
// clears it. The bytes themselves never pass through the shim, so they
// survive the process being killed: the kernel sends them.
#ifndef TCPADVISE_CORK_H_
#define TCPADVISE_CORK_H_

#include "policy_state.h"

namespace tcpadvise {

// StartCork corks the socket before a burst's first write, unless the
// application corks it itself. p's turn is held.
void StartCork(PolicyState* p, int fd);

// Uncork releases the cork. p's turn is held.
void Uncork(PolicyState* p, int fd, FlushCause cause);

}  // namespace tcpadvise

#endif  // TCPADVISE_CORK_H_
