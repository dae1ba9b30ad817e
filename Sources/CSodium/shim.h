#ifndef VAULT_CSODIUM_SHIM_H
#define VAULT_CSODIUM_SHIM_H
// The one C boundary of the project: libsodium, plus the few libc calls that Swift cannot make
// directly (variadic prctl) and the address of one Swift runtime variable. Only the VaultCrypto
// module imports this.
#include <sodium.h>
#include <sys/resource.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

/// Marks the process non-dumpable (no core file, no ptrace by the same uid). 0 on success.
static inline int vault_set_nondumpable(void) {
#ifdef __linux__
    return prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
#else
    return -1;
#endif
}

/// 1 when the process is dumpable, 0 when not, -1 when unknown.
static inline int vault_is_dumpable(void) {
#ifdef __linux__
    return prctl(PR_GET_DUMPABLE, 0, 0, 0, 0);
#else
    return -1;
#endif
}
/// Swift's runtime hook for its global executor (`swift_task_enqueueGlobal_hook`). SwiftNIO finds
/// it with dlsym to run Swift's tasks on its event loops; a static Swift runtime is linked with
/// `--exclude-libs ALL`, which hides it from dlsym, but the static link itself resolves this
/// reference. Declared here as an untyped pointer: only its address is taken.
extern void *swift_task_enqueueGlobal_hook;

/// The address of Swift's global-executor hook (see above).
static inline void **vault_swift_task_enqueue_global_hook(void) {
    return &swift_task_enqueueGlobal_hook;
}

#endif
