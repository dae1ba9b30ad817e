import VaultCLI
#if canImport(Glibc)
import Glibc
#endif

// Thin: every subcommand lives in VaultCLI.
//
// Swift's runtime backtracer prints registers and the memory they point at when a process
// crashes; in a process holding card data that could be a PAN on stderr. Unless the operator
// chose otherwise, run with it off: set SWIFT_BACKTRACE before the runtime starts, by re-exec.
if getenv("SWIFT_BACKTRACE") == nil {
    setenv("SWIFT_BACKTRACE", "enable=no", 1)
    // `vault serve` only parses its arguments, holding nothing, and execs vault-sidecar, which
    // then starts with the variable set: no restart first.
    if CommandLine.arguments.dropFirst().first != "serve" {
        execv("/proc/self/exe", CommandLine.unsafeArgv)
    }
    // exec failed: carry on with the backtracer as configured.
}
// A closed pipe is an IO_ERROR, not a signal death.
signal(SIGPIPE, SIG_IGN)
VaultCommand.prepareExecutor(arguments: CommandLine.arguments)
await VaultCommand.runMain()
