#if canImport(Glibc)
import Glibc
#endif
import Gateway
import Logging
import ServerCLI
import SocketHTTP
import Store
import VaultCrypto

// `vault.json`, its settings table and the sidecar's resolution live in ServerCLI (the sidecar's
// executable links them without the opening code); the gateway's resolution is here, beside the
// module it configures.

extension GatewayServer.Configuration {
    /// The gateway's configuration from flags, environment, file and the table's defaults
    /// (`GatewaySettings`); the settings as resolved, for `vault config check`.
    static func resolve(_ o: GatewayServeOptions, file: ConfigFile?) throws(VaultError) -> (Self, LogSetup, Settings) {
        typealias S = GatewaySettings
        var s = Settings(section: .gateway, config: file)
        var c = Self()
        c.socketPath = try s.string(S.socket, flag: o.socket.socket) ?? c.socketPath
        c.socketMode = try s.mode(S.socketMode, flag: o.socket.socketMode)
        if let g = try s.string(S.socketGroup, flag: o.socket.socketGroup) {
            c.socketGroup = try s.checked(S.socketGroup, flag: o.socket.socketGroup) { () throws(VaultError) in try SocketFile.groupID(g) }
        }
        c.keysDirectory = try s.string(S.keys, flag: o.keys.keys)
        c.ringPath = try s.string(S.ring, flag: o.gateway.ring)
        c.passphraseFile = try s.string(S.passphraseFile, flag: o.gateway.passphraseFile)
        let processor = try s.string(S.processor, flag: o.gateway.processor) ?? "sandbox"
        // The ledger's store: `store`, or its aliases `ledger PATH` and `processor sandbox:PATH`
        // (both meaning sqlite:PATH). The value from the highest source (flag, environment, file)
        // wins; two of the same source that disagree are refused.
        var candidates: [(rank: Int, value: String, setting: String)] = []
        if let store = try s.string(S.store, flag: o.store.store, defaulted: false) {
            candidates.append((s.precedence(S.store, flag: o.store.store), store, "gateway.store"))
        }
        if let ledger = try s.string(S.ledger, flag: o.gateway.ledger) {
            candidates.append((s.precedence(S.ledger, flag: o.gateway.ledger), "sqlite:" + ledger, "gateway.ledger"))
        }
        if processor == "sandbox" {
            c.processor = .sandbox
        } else if processor.hasPrefix("sandbox:"), processor.count > 8 {
            c.processor = .sandbox
            candidates.append((s.precedence(S.processor, flag: o.gateway.processor), "sqlite:" + String(processor.dropFirst(8)), "gateway.processor"))
        } else if processor.hasPrefix("relay:"), processor.count > 6 {
            c.processor = .relay(templatePath: String(processor.dropFirst(6)))
        } else {
            throw VaultError(.configInvalid, "gateway.processor must be sandbox, sandbox:PATH or relay:TEMPLATE.json", field: "gateway.processor")
        }
        let top = candidates.map(\.rank).max() ?? 0
        let chosen = candidates.filter { $0.rank == top }
        if let first = chosen.first, let other = chosen.first(where: { $0.value != first.value }) {
            throw VaultError(
                .configInvalid,
                "\(first.setting) and \(other.setting) name different ledger stores (\(Settings.redacted(first.value)), \(Settings.redacted(other.value))): give one, gateway.store",
                field: "gateway.store")
        }
        let store: String
        if let first = chosen.first {
            store = first.value
            if first.setting != "gateway.store" { s.record(S.store, Settings.redacted(store), first.setting) }
        } else {
            store = try s.string(S.store, flag: nil) ?? ""
        }
        c.store = try s.checked(S.store, flag: o.store.store) { () throws(VaultError) in try StoreLocation(store) }
        let interval = try s.number(S.settleInterval, flag: o.gateway.settleInterval, atLeast: 0.05)
        c.settleInterval = .milliseconds(Int(interval * 1000))
        let guessLimit = try s.number(S.fingerprintGuessLimit, flag: o.gateway.fingerprintGuessLimit, atLeast: 1)
        let guessWindow = try s.number(S.fingerprintGuessWindow, flag: o.gateway.fingerprintGuessWindow, atLeast: 60)
        guard guessLimit == guessLimit.rounded(), guessWindow == guessWindow.rounded() else {
            throw VaultError(.configInvalid, "gateway.fingerprint_guess_limit and gateway.fingerprint_guess_window are whole numbers", field: "gateway.fingerprint_guess_limit")
        }
        c.fingerprintGuessLimit = Int(guessLimit)
        c.fingerprintGuessWindow = Int(guessWindow)
        var uids = Set<UInt32>()
        for text in try s.list(S.allowUid, flag: o.gateway.allowUid) {
            guard let uid = UInt32(text) else {
                throw VaultError(.configInvalid, "gateway.allow_uid: \(text) is not a uid", field: "gateway.allow_uid")
            }
            uids.insert(uid)
        }
        for name in try s.list(S.allowUser, flag: o.gateway.allowUser) {
            guard let pw = getpwnam(name) else {
                throw VaultError(.configInvalid, "gateway.allow_user: no user \(name) on this system", field: "gateway.allow_user")
            }
            uids.insert(pw.pointee.pw_uid)
        }
        if !uids.isEmpty { c.allowedUIDs = uids }
        c.auditLogPath = try s.string(S.auditLog, flag: o.logging.auditLog)
        c.logRequests = try s.bool(S.logRequests, flag: o.logging.logRequests)
        let log = try s.logSetup(S.self, o.logging)
        return (c, log, s)
    }
}
