#if canImport(Glibc)
import Glibc
#endif
import Audit
import ServerCLI
import VaultCrypto

/// The audit line a CLI change (key add/promote/retire, rewrap, a payment settled by hand, a customer deleted) appends to `--audit-log`.
enum CLIAudit {
    /// Appends one line; a log that cannot be written is reported on standard error (the change
    /// itself is done by then and is not undone).
    static func record(
        _ path: String?, action: String, kid: KeyID? = nil, outcome: String = "ok", payment: String? = nil, customer: String? = nil,
        detail: [(String, Int)] = []
    ) {
        guard let path else { return }
        do throws(AuditError) {
            let log = try AuditLog(path: path, process: "cli", syncInterval: .zero)
            defer { log.close() }
            if !log.record(AuditEvent(action: action, outcome: outcome, uid: getuid(), payment: payment, customer: customer, kid: kid?.rawValue, detail: detail)) {
                try? StandardIO.write(fd: 2, "vault: audit log \(path): \(log.lastError.map(\.description) ?? "write failed")\n")
            }
        } catch {
            try? StandardIO.write(fd: 2, "vault: audit log \(path): \(error)\n")
        }
    }
}
