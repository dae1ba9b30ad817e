internal import CSodium
#if canImport(Glibc)
import Glibc
#endif

/// Process-wide protections for processes that hold card data or secret keys.
public enum ProcessHardening {
    /// Makes the process non-dumpable (`prctl(PR_SET_DUMPABLE, 0)`) and sets `RLIMIT_CORE` to 0, so
    /// a crash leaves no core file with plaintext in it and other processes of the same user
    /// cannot ptrace it. Returns true when both took effect.
    @discardableResult
    public static func disableCoreDumps() -> Bool {
        #if os(Linux)
        var limit = rlimit(rlim_cur: 0, rlim_max: 0)
        let a = setrlimit(RLIMIT_CORE_VALUE, &limit) == 0
        let b = vault_set_nondumpable() == 0
        return a && b
        #else
        return false
        #endif
    }

    /// True when the process is dumpable (`prctl(PR_GET_DUMPABLE)`).
    public static var isDumpable: Bool {
        #if os(Linux)
        return vault_is_dumpable() != 0
        #else
        return true
        #endif
    }
}

#if os(Linux)
private let RLIMIT_CORE_VALUE = __rlimit_resource_t(RLIMIT_CORE.rawValue)
#endif

/// The address of the Swift runtime's global-executor hook (`swift_task_enqueueGlobal_hook`), for
/// `SocketServer.runTasksOnEventLoops`: a statically linked Swift runtime hides it from `dlsym`,
/// where SwiftNIO looks for it. Not a hardening measure; here because CSodium is the project's one
/// C boundary and only this module imports it.
public enum SwiftRuntimeHooks {
    public static var enqueueGlobal: UnsafeMutableRawPointer {
        UnsafeMutableRawPointer(vault_swift_task_enqueue_global_hook())
    }
}
