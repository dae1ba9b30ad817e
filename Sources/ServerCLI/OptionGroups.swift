import ArgumentParser

// The option groups of `vault serve` (`vault-sidecar`) and `vault gateway`, one per concern. The
// shared ones are generic over the section, whose table (Setting.swift) gives each flag its name,
// default and help; neither command declares a setting of its own.

/// `--config`: the configuration file.
public struct ConfigOption<S: SettingsSection>: ParsableArguments {
    @Option(help: ArgumentHelp("Configuration file (JSON, section \"\(S.section.rawValue)\"). Default: $VAULT_CONFIG."), completion: .file())
    public var config: String?

    public init() {}
}

/// Where the server listens: its socket, the socket file's mode and group.
public struct SocketOptions<S: SettingsSection>: ParsableArguments {
    @Option(name: .customLong(S.socket.flag), help: S.socket.argumentHelp, completion: .file())
    public var socket: String?

    @Option(name: .customLong(S.socketMode.flag), help: S.socketMode.argumentHelp)
    public var socketMode: String?

    @Option(name: .customLong(S.socketGroup.flag), help: S.socketGroup.argumentHelp, completion: .default)
    public var socketGroup: String?

    public init() {}
}

/// The store (the sidecar's tokens and payments, the gateway's processor ledger).
public struct StoreOption<S: SettingsSection>: ParsableArguments {
    @Option(name: .customLong(S.store.flag), help: S.store.argumentHelp)
    public var store: String?

    public init() {}
}

/// The keys directory.
public struct KeysOption<S: SettingsSection>: ParsableArguments {
    @Option(name: .customLong(S.keys.flag), help: S.keys.argumentHelp, completion: .directory)
    public var keys: String?

    public init() {}
}

/// What the server writes about itself: log level, request log lines, the audit log.
public struct LoggingOptions<S: SettingsSection>: ParsableArguments {
    @Option(name: .customLong(S.logLevel.flag), help: S.logLevel.argumentHelp, completion: .list(["trace", "debug", "info", "notice", "warning", "error", "critical"]))
    public var logLevel: String?

    @Option(name: .customLong(S.logFormat.flag), help: S.logFormat.argumentHelp, completion: .list(LogFormat.allCases.map(\.rawValue)))
    public var logFormat: String?

    @Option(name: .customLong(S.auditLog.flag), help: S.auditLog.argumentHelp, completion: .file())
    public var auditLog: String?

    @Flag(name: .customLong(S.logRequests.flag), help: S.logRequests.argumentHelp)
    public var logRequests = false

    public init() {}
}

/// The sidecar's own settings: tokens, who may connect, payments through the gateway.
public struct SidecarOptions: ParsableArguments {
    typealias S = SidecarSettings

    @Option(name: .customLong(S.tokenTTL.flag), help: S.tokenTTL.argumentHelp)
    public var tokenTTL: Double?

    @Option(name: .customLong(S.cvcTTL.flag), help: S.cvcTTL.argumentHelp)
    public var cvcTTL: Double?

    @Option(name: .customLong(S.tokenFormat.flag), help: S.tokenFormat.argumentHelp, completion: .list(["tok", "card"]))
    public var tokenFormat: String?

    @Flag(name: .customLong(S.cardTokenLuhnValid.flag), help: S.cardTokenLuhnValid.argumentHelp)
    public var cardTokenLuhnValid = false

    @Option(name: .customLong(S.allow.flag), help: S.allow.argumentHelp)
    public var allow: [String] = []

    @Option(name: .customLong(S.gateway.flag), help: S.gateway.argumentHelp, completion: .file())
    public var gateway: String?

    @Option(name: .customLong(S.reconcileAfter.flag), help: S.reconcileAfter.argumentHelp)
    public var reconcileAfter: Double?

    @Option(name: .customLong(S.authorizationTTL.flag), help: S.authorizationTTL.argumentHelp)
    public var authorizationTTL: Double?

    @Option(name: .customLong(S.heldCVCsMax.flag), help: S.heldCVCsMax.argumentHelp)
    public var heldCVCsMax: Double?
    @Option(name: .customLong(S.sessionMaxAttempts.flag), help: S.sessionMaxAttempts.argumentHelp)
    public var sessionMaxAttempts: Double?

    @Option(name: .customLong(S.velocity.flag), help: S.velocity.argumentHelp)
    public var velocity: [String] = []

    @Option(name: .customLong(S.tokenLookupMisses.flag), help: S.tokenLookupMisses.argumentHelp)
    public var tokenLookupMisses: String?

    @Flag(name: .customLong(S.customerReferenceUnique.flag), help: S.customerReferenceUnique.argumentHelp)
    public var customerReferenceUnique = false

    @Option(name: .customLong(S.webhook.flag), help: S.webhook.argumentHelp)
    public var webhook: String?

    @Option(name: .customLong(S.webhookSecretFile.flag), help: S.webhookSecretFile.argumentHelp, completion: .file())
    public var webhookSecretFile: String?

    @Option(name: .customLong(S.webhookMaxBackoff.flag), help: S.webhookMaxBackoff.argumentHelp)
    public var webhookMaxBackoff: Double?

    @Option(name: .customLong(S.eventRetention.flag), help: S.eventRetention.argumentHelp)
    public var eventRetention: Double?

    public init() {}
}

/// The gateway's own settings: keys it opens with, the processor and its ledger, who may call.
public struct GatewayOptions: ParsableArguments {
    typealias S = GatewaySettings

    @Option(name: .customLong(S.ring.flag), help: S.ring.argumentHelp, completion: .file())
    public var ring: String?

    @Option(name: .customLong(S.passphraseFile.flag), help: S.passphraseFile.argumentHelp, completion: .file())
    public var passphraseFile: String?

    @Option(name: .customLong(S.processor.flag), help: S.processor.argumentHelp, completion: .list(["sandbox", "relay:"]))
    public var processor: String?

    @Option(name: .customLong(S.ledger.flag), help: S.ledger.argumentHelp, completion: .file())
    public var ledger: String?

    @Option(name: .customLong(S.settleInterval.flag), help: S.settleInterval.argumentHelp)
    public var settleInterval: Double?

    @Option(name: .customLong(S.fingerprintGuessLimit.flag), help: S.fingerprintGuessLimit.argumentHelp)
    public var fingerprintGuessLimit: Double?

    @Option(name: .customLong(S.fingerprintGuessWindow.flag), help: S.fingerprintGuessWindow.argumentHelp)
    public var fingerprintGuessWindow: Double?

    @Option(name: .customLong(S.allowUid.flag), help: S.allowUid.argumentHelp)
    public var allowUid: [String] = []

    @Option(name: .customLong(S.allowUser.flag), help: S.allowUser.argumentHelp)
    public var allowUser: [String] = []

    public init() {}
}

// The commands hold these groups themselves (one level: argument-parser validates a group each
// time it builds one, so groups inside a group multiply its start-up work) and hand them to the
// resolver together.

/// Everything `vault serve` (`vault-sidecar`) takes.
public struct ServeOptions {
    public var file: ConfigOption<SidecarSettings>
    public var socket: SocketOptions<SidecarSettings>
    public var store: StoreOption<SidecarSettings>
    public var keys: KeysOption<SidecarSettings>
    public var sidecar: SidecarOptions
    public var logging: LoggingOptions<SidecarSettings>

    public init(
        file: ConfigOption<SidecarSettings>, socket: SocketOptions<SidecarSettings>, store: StoreOption<SidecarSettings>,
        keys: KeysOption<SidecarSettings>, sidecar: SidecarOptions, logging: LoggingOptions<SidecarSettings>
    ) {
        (self.file, self.socket, self.store, self.keys, self.sidecar, self.logging) = (file, socket, store, keys, sidecar, logging)
    }

    /// No flag given: what `vault config check` resolves.
    public static var none: ServeOptions {
        // Parsing no arguments cannot fail: every option is optional.
        try! ServeOptions(file: .parse([]), socket: .parse([]), store: .parse([]), keys: .parse([]), sidecar: .parse([]), logging: .parse([]))
    }
}

/// Everything `vault gateway` takes.
public struct GatewayServeOptions {
    public var file: ConfigOption<GatewaySettings>
    public var socket: SocketOptions<GatewaySettings>
    public var keys: KeysOption<GatewaySettings>
    public var gateway: GatewayOptions
    public var store: StoreOption<GatewaySettings>
    public var logging: LoggingOptions<GatewaySettings>

    public init(
        file: ConfigOption<GatewaySettings>, socket: SocketOptions<GatewaySettings>, keys: KeysOption<GatewaySettings>,
        gateway: GatewayOptions, store: StoreOption<GatewaySettings>, logging: LoggingOptions<GatewaySettings>
    ) {
        (self.file, self.socket, self.keys, self.gateway, self.store, self.logging) = (file, socket, keys, gateway, store, logging)
    }

    /// No flag given: what `vault config check` resolves.
    public static var none: GatewayServeOptions {
        try! GatewayServeOptions(file: .parse([]), socket: .parse([]), keys: .parse([]), gateway: .parse([]), store: .parse([]), logging: .parse([]))
    }
}
