import ArgumentParser
import VaultCrypto

/// The `vault` exit codes: each error code's is in the catalogue (`ErrorCode.entry.exit`), and
/// docs/cli.md's table lists them (checked by `ErrorCatalogueTests`). 0 is success, 1 any other
/// failure (and `validate`: not valid), 64 a usage error (argument-parser).
public enum VaultExitCode {
    /// The exit status for an error code.
    public static func status(for code: ErrorCode) -> Int32 { code.exitCode }
}

/// Prints `vault: [line N: ]CODE: message` on standard error and returns the exit code to throw.
package func fail(_ error: VaultError, line: Int? = nil) -> ExitCode {
    var text = "vault: "
    if let line { text += "line \(line): " }
    text += error.code.rawValue + ": " + error.message
    if let field = error.field, !error.message.contains(field) { text += " (\(field))" }
    try? StandardIO.write(fd: 2, text + "\n")
    return ExitCode(VaultExitCode.status(for: error.code))
}

/// Runs `body`, turning a `VaultError` into its message and exit code.
package func reportingErrors(_ body: () throws(VaultError) -> Void) throws(ExitCode) {
    do throws(VaultError) { try body() } catch { throw fail(error) }
}

extension ParsableCommand {
    /// The entry of both executables: no core file and no ptrace by the same uid (every command
    /// may hold card data or secret keys; the gateway also refuses to start if this fails), then
    /// parses the process's arguments and runs the chosen subcommand, sync or async, exiting with
    /// argument-parser's conventions (help, usage errors, `ExitCode`).
    package static func runHardened() async -> Never {
        ProcessHardening.disableCoreDumps()
        do {
            var command = try parseAsRoot()
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
            exit()
        } catch {
            exit(withError: error)
        }
    }
}
