import ServerCLI
#if canImport(Glibc)
import Glibc
#endif

// The sidecar's own executable (`vault serve` runs it): its module graph holds no code that
// opens envelopes (no VaultOpen, Gateway or Rewrap; ArchitectureTests). Every option is in
// ServerCLI.
//
// Swift's runtime backtracer prints registers and the memory they point at when a process
// crashes; in a process holding card data that could be a PAN on stderr. Unless the operator
// chose otherwise, run with it off: set SWIFT_BACKTRACE before the runtime starts, by re-exec.
if getenv("SWIFT_BACKTRACE") == nil {
    setenv("SWIFT_BACKTRACE", "enable=no", 1)
    execv("/proc/self/exe", CommandLine.unsafeArgv)
    // exec failed: carry on with the backtracer as configured.
}
// A closed pipe is an IO_ERROR, not a signal death.
signal(SIGPIPE, SIG_IGN)
SidecarCommand.prepareExecutor()
await SidecarCommand.runMain()
