import ArgumentParser
import Audit
import ServerCLI
import VaultCrypto

/// `vault audit`: tools for the tamper-evident audit log (docs/audit-log.md).
struct AuditCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "audit",
        abstract: "Check the tamper-evident audit log.",
        discussion: "Format and guarantees: docs/audit-log.md.",
        subcommands: [Verify.self]
    )

    /// `vault audit verify FILE [--head HEX] [--anchor HEX]`.
    struct Verify: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Verify an audit log's hash chain; print its line count and head.",
            discussion: """
                Checks every line's layout, that seq counts 1, 2, 3… and that each prev is the \
                BLAKE2b-256 of the line before. Prints `ok: N lines, head HEX` and exits 0, or \
                prints `FILE: line N: reason` on standard error for the first problem and exits 1 \
                (7 when the file cannot be read). The file's size is taken under a shared lock, so \
                a running writer can keep appending.

                An edit, insertion, removal or reordering anywhere is caught where the chain \
                breaks. Lines removed from the end are caught only against a head kept elsewhere: \
                record the printed head (or the writer's) out of the log's reach and pass it back \
                with --head (the file must end exactly there) or --anchor (the file must still hold \
                that line; lines appended since are fine).

                Examples:
                  vault audit verify /var/lib/vault/audit.log
                  vault audit verify audit.log --head "$(cat /secure/audit.head)"
                  vault audit verify audit.log --anchor "$(cat /secure/audit-yesterday.head)"
                  vault audit verify audit.log | awk '{print $5}' \\
                    > /secure/audit-yesterday.head
                """
        )

        @Argument(help: "The audit log file.", completion: .file())
        var file: String

        @Option(help: "The expected hash of the last line (64 hex): fail if the file ends anywhere else.")
        var head: String?

        @Option(help: "A head recorded earlier (64 hex): fail unless the file still holds that line.")
        var anchor: String?

        func validate() throws {
            for (name, value) in [("--head", head), ("--anchor", anchor)] {
                if let value, value.utf8.count != 64 || !value.utf8.allSatisfy(\.isHexDigit) {
                    throw ValidationError("\(name) is 64 hex characters (a head printed by `vault audit verify`)")
                }
            }
        }

        func run() throws {
            let report = AuditVerifier.verify(path: file, expectHead: head, anchor: anchor)
            if let problem = report.problem {
                try? StandardIO.write(fd: 2, "\(file): \(problem)\n")
                throw ExitCode(problem.kind == .unreadable ? VaultExitCode.status(for: .ioError) : 1)
            }
            try reportingErrors { () throws(VaultError) in
                try StandardIO.write("ok: \(report.lines) lines, head \(report.head)\n")
            }
            if !report.tornLines.isEmpty {
                let list = report.tornLines.map(String.init).joined(separator: ", ")
                let what = report.tornLines.count == 1 ? "a torn write at line" : "torn writes at lines"
                try? StandardIO.write(fd: 2, "\(file): note: \(what) \(list), sealed by the log_repair line after it\n")
            }
        }
    }
}

private extension UInt8 {
    var isHexDigit: Bool { (48...57).contains(self) || (65...70).contains(self) || (97...102).contains(self) }
}
