import ArgumentParser
import Foundation
import Store
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
            if let hint = suggestion(for: Array(CommandLine.arguments.dropFirst())) {
                try? StandardIO.write(fd: 2, fullMessage(for: error) + "\n" + hint + "\n")
                Foundation.exit(exitCode(for: error).rawValue)
            }
            exit(withError: error)
        }
    }

    /// For a mistyped subcommand (`vault sael`): "did you mean `vault seal`?", naming the closest
    /// subcommand at that level (at most 2 edits away); nil when the words are all known.
    package static func suggestion(for arguments: [String]) -> String? {
        var command: any ParsableCommand.Type = self
        var path = [configuration.commandName ?? _commandName]
        for word in arguments {
            if word.hasPrefix("-") { return nil }
            let names = command.configuration.subcommands.map { ($0.configuration.commandName ?? $0._commandName, $0) }
            if names.isEmpty || word == "help" { return nil }
            if let known = names.first(where: { $0.0 == word }) {
                command = known.1
                path.append(word)
                continue
            }
            let scored = names.map { (name: $0.0, distance: editDistance($0.0, word)) }
            guard let best = scored.min(by: { $0.distance < $1.distance }), best.distance <= 2, best.distance < best.name.count else {
                return "(\(path.joined(separator: " ")) has no subcommand \(word); see `\(path.joined(separator: " ")) --help`)"
            }
            return "did you mean `\((path + [best.name]).joined(separator: " "))`?"
        }
        return nil
    }
}

/// Levenshtein distance, a swapped pair of letters counting once (`sael` → `seal`: 1).
func editDistance(_ a: String, _ b: String) -> Int {
    let a = Array(a), b = Array(b)
    if a.isEmpty || b.isEmpty { return max(a.count, b.count) }
    var d = [[Int]](repeating: [Int](repeating: 0, count: b.count + 1), count: a.count + 1)
    for i in 0...a.count { d[i][0] = i }
    for j in 0...b.count { d[0][j] = j }
    for i in 1...a.count {
        for j in 1...b.count {
            d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
            if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] { d[i][j] = min(d[i][j], d[i - 2][j - 2] + 1) }
        }
    }
    return d[a.count][b.count]
}

/// A server's failure as one coded line: a `VaultError` or `StoreError` as it is, anything else
/// (a system call of the server library) as `IO_ERROR` with the system's words for its errno,
/// never the library's type names or call signatures.
package func serverFailure(_ error: any Error) -> VaultError {
    if let e = error as? VaultError { return e }
    if let e = error as? StoreError { return VaultError(store: e) }
    let text = String(describing: error)
    if let match = text.firstMatch(of: /errno: ([0-9]+)/), let number = Int32(match.output.1) {
        let call = text.firstMatch(of: /^([a-z_]+)\(/).map { " (\($0.output.1))" } ?? ""
        return VaultError(.ioError, "the server failed: \(String(cString: strerror(number)))\(call); check the socket's directory and the paths in the configuration")
    }
    return VaultError(.ioError, "the server failed: \(type(of: error))")
}
