import VaultCrypto

/// Who computes card fingerprints: the gateway, the only zone that holds the fingerprint key and
/// can open an envelope (docs/key-files.md). The sidecar sends envelopes and stores the answers; it
/// never holds the key, so its files (BIN, last 4 and fingerprint side by side) cannot be
/// brute-forced.
public protocol Fingerprinter: Sendable {
    /// The fingerprint of each envelope, in order. Envelopes go out without their CVC field.
    /// - Throws: `FingerprintFailure.unavailable` when no answer can be had now (the gateway is
    ///   down or has no fingerprint key): tokens are then stored without a fingerprint and
    ///   filled in later.
    func fingerprints(of envelopes: [CardEnvelope]) async throws(FingerprintFailure) -> [FingerprintAnswer]
}

/// The gateway's answer for one envelope.
public enum FingerprintAnswer: Sendable, Equatable {
    /// The keyed fingerprint under the gateway's primary fingerprint key, named
    /// (`fp1_<fkid>_<64 hex>`), and the card's fingerprints under the other keys the gateway holds
    /// (during a fingerprint-key rotation; empty otherwise). The token stores the first; the others
    /// are linked to it so that a lookup by any of them finds the card (docs/key-files.md).
    case fingerprint(String, others: [String] = [])
    /// The gateway opened nothing it would charge: a tampered envelope, metadata that does not
    /// match the card, a kid it does not open. Carries the gateway's code and message.
    case refused(code: ErrorCode, message: String)
    /// The gateway's guessing limit (DESIGN §9): a new card of a truncation group past its limit.
    /// The token is made without a fingerprint; the filler asks again later.
    case withheld
}

/// Why no fingerprints could be had.
public enum FingerprintFailure: Error, Sendable, Equatable {
    case unavailable(String)
}

extension FingerprintAnswer {
    /// Whether `text` is a fingerprint in a documented form: named `fp1_<fkid>_<64 hex>`, or the
    /// legacy 64 lowercase hex characters.
    public static func isWellFormed(_ text: String) -> Bool { FingerprintName.isWellFormed(text) }
}
