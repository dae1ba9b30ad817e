import Events
import Foundation
import Logging
import Sidecar
import SocketHTTP
import Store
import Tokenizer
import VaultCrypto

extension SidecarServer.Configuration {
    /// The sidecar's configuration from flags, environment, file and the table's defaults
    /// (`SidecarSettings`); the settings as resolved, for `vault config check`.
    package static func resolve(_ o: ServeOptions, file: ConfigFile?) throws(VaultError) -> (Self, LogSetup, Settings) {
        typealias S = SidecarSettings
        var s = Settings(section: .sidecar, config: file)
        var c = Self()
        c.socketPath = try s.string(S.socket, flag: o.socket.socket) ?? c.socketPath
        c.socketMode = try s.mode(S.socketMode, flag: o.socket.socketMode)
        if let g = try s.string(S.socketGroup, flag: o.socket.socketGroup) {
            c.socketGroup = try s.checked(S.socketGroup, flag: o.socket.socketGroup) { () throws(VaultError) in try SocketFile.groupID(g) }
        }
        let store = try s.string(S.store, flag: o.store.store) ?? ""
        c.store = try s.checked(S.store, flag: o.store.store) { () throws(VaultError) in try StoreLocation(store) }
        c.keysDirectory = try s.string(S.keys, flag: o.keys.keys) ?? c.keysDirectory
        let tokenTTL = try s.number(S.tokenTTL, flag: o.sidecar.tokenTTL, atLeast: 1)
        let cvcTTL = try s.number(S.cvcTTL, flag: o.sidecar.cvcTTL, atLeast: 1)
        guard cvcTTL <= tokenTTL else {
            throw VaultError(.configInvalid, "sidecar.cvc_ttl (\(Int(cvcTTL)) s) must not exceed sidecar.token_ttl (\(Int(tokenTTL)) s)", field: "sidecar.cvc_ttl")
        }
        let held = try s.number(S.heldCVCsMax, flag: o.sidecar.heldCVCsMax, atLeast: 1)
        guard held == held.rounded() else {
            throw VaultError(.configInvalid, "sidecar.held_cvcs_max must be a whole number from 1 to 10000000", field: "sidecar.held_cvcs_max")
        }
        c.heldCVCsMax = Int(held)
        let format = try s.string(S.tokenFormat, flag: o.sidecar.tokenFormat) ?? "tok"
        guard let tokenFormat = TokenFormat(rawValue: format) else {
            throw VaultError(.configInvalid, "sidecar.token_format must be tok or card", field: "sidecar.token_format")
        }
        let luhnValid = try s.bool(S.cardTokenLuhnValid, flag: o.sidecar.cardTokenLuhnValid)
        c.policy = TokenPolicy(tokenTTL: tokenTTL, cvcTTL: cvcTTL, format: tokenFormat, cardTokenLuhnValid: luhnValid)
        let allow = try s.list(S.allow, flag: o.sidecar.allow)
        if !allow.isEmpty {
            c.peers = try s.checked(S.allow, flag: o.sidecar.allow.first) { () throws(VaultError) in try PeerPolicy(parsing: allow) }
        }
        c.gatewaySocket = try s.string(S.gateway, flag: o.sidecar.gateway)
        let reconcile = try s.number(S.reconcileAfter, flag: o.sidecar.reconcileAfter, atLeast: 1)
        c.reconcileAfter = .milliseconds(Int(reconcile * 1000))
        c.authorizationTTL = try s.number(S.authorizationTTL, flag: o.sidecar.authorizationTTL, atLeast: 1)
        let attempts = try s.number(S.sessionMaxAttempts, flag: o.sidecar.sessionMaxAttempts, atLeast: 1)
        guard attempts == attempts.rounded(), attempts <= 1000 else {
            throw VaultError(.configInvalid, "sidecar.session_max_attempts must be a whole number from 1 to 1000", field: "sidecar.session_max_attempts")
        }
        c.sessionMaxAttempts = Int(attempts)
        let velocity = try s.list(S.velocity, flag: o.sidecar.velocity)
        c.velocity = try s.checked(S.velocity, flag: o.sidecar.velocity.first) { () throws(VaultError) in try VelocityRule.rules(velocity) }
        let misses = try s.string(S.tokenLookupMisses, flag: o.sidecar.tokenLookupMisses) ?? VelocityRule.defaultLookupMisses
        c.lookupMisses = try s.checked(S.tokenLookupMisses, flag: o.sidecar.tokenLookupMisses) { () throws(VaultError) in try VelocityRule.lookupMisses(misses) }
        c.customerReferenceUnique = try s.bool(S.customerReferenceUnique, flag: o.sidecar.customerReferenceUnique)
        if let url = try s.string(S.webhook, flag: o.sidecar.webhook) {
            let endpoint = try s.checked(S.webhook, flag: o.sidecar.webhook) { () throws(VaultError) in try WebhookEndpoint(url) }
            guard let secretPath = try s.string(S.webhookSecretFile, flag: o.sidecar.webhookSecretFile) else {
                throw VaultError(.configInvalid, "sidecar.webhook needs sidecar.webhook_secret_file (the signing secret)", field: "sidecar.webhook_secret_file")
            }
            let secret = try WebhookSecret.load(path: secretPath)
            c.webhook = .init(endpoint: endpoint, secret: secret, holder: "\(Self.hostName()):\(c.socketPath)")
            c.webhook?.maxBackoff = try s.number(S.webhookMaxBackoff, flag: o.sidecar.webhookMaxBackoff, atLeast: 1)
        } else {
            _ = try s.number(S.webhookMaxBackoff, flag: o.sidecar.webhookMaxBackoff, atLeast: 1)
            _ = try s.string(S.webhookSecretFile, flag: o.sidecar.webhookSecretFile)
        }
        c.eventRetention = try s.number(S.eventRetention, flag: o.sidecar.eventRetention, atLeast: 3600)
        c.auditLogPath = try s.string(S.auditLog, flag: o.logging.auditLog)
        c.logRequests = try s.bool(S.logRequests, flag: o.logging.logRequests)
        let log = try s.logSetup(S.self, o.logging)
        return (c, log, s)
    }

    /// This host's name (the webhook lease's holder is host and socket).
    static func hostName() -> String {
        var buffer = [CChar](repeating: 0, count: 256)
        guard gethostname(&buffer, buffer.count - 1) == 0 else { return "localhost" }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
