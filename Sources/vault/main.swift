import VaultCLI
#if canImport(Glibc)
import Glibc
#endif

// Thin: every subcommand lives in VaultCLI. A closed pipe is an IO_ERROR, not a signal death.
signal(SIGPIPE, SIG_IGN)
await VaultCommand.runMain()
