import ArgumentParser
import VaultCrypto

/// The `vault` exit codes, in one table (also in docs/cli.md).
///
/// | code | meaning |
/// |---|---|
/// | 0 | success (for `validate`: the number is valid) |
/// | 1 | `validate`: the number is not valid; other commands: an unexpected failure |
/// | 2 | key file problem: `KEY_FILE_*`, `KEY_PASSPHRASE_*`, `FINGERPRINT_KEY_MISSING`, `FINGERPRINT_KEY_REFUSED`, `KEYS_DIRECTORY_UNSAFE` |
/// | 3 | `KEY_MISMATCH`: sealed to a key you did not give |
/// | 4 | `SEALED_VALUE_CORRUPT`, `ENVELOPE_KEY_CORRUPT`, `ENVELOPE_FIELD_CORRUPT`, `ENVELOPE_FIELD_INVALID`, `ENVELOPE_METADATA_MISMATCH`: tampered or truncated |
/// | 5 | `SEALED_VALUE_MALFORMED`, `ENVELOPE_MALFORMED`, `ENVELOPE_UNSUPPORTED_VERSION`: not of the format |
/// | 6 | invalid card input: card-rules codes, `CARD_*`, `INPUT_TOO_LARGE` |
/// | 7 | `IO_ERROR`: reading input or writing output failed |
/// | 8 | `SIDECAR_UNREACHABLE`, `STORE_UNAVAILABLE` |
/// | 9 | `TOKEN_NOT_FOUND` |
/// | 10 | `PEER_NOT_ALLOWED` |
/// | 11 | configuration: `CONFIG_NOT_FOUND`, `CONFIG_INVALID` (the message names the setting) |
/// | 12 | key ring: `KEY_RING_*`, `KEY_NOT_IN_RING`, `KEY_RETIRED`, `KEY_IN_USE` (retire before rewrap) |
/// | 13 | audit log: `AUDIT_*` (a log that cannot be opened or written) |
/// | 64 | usage error (argument-parser) |
public enum VaultExitCode {
    /// Codes that mean "the card input is not valid" (exit 6).
    static let cardInputCodes: Set<String> = [
        "NON_DIGIT_CHARACTERS", "CARD_NUMBER_EMPTY", "CARD_NUMBER_TOO_SHORT", "CARD_NUMBER_TOO_LONG",
        "UNKNOWN_CARD_BRAND", "INVALID_CARD_LENGTH", "LUHN_CHECK_FAILED", "BRAND_NOT_ACCEPTED",
        "EXPIRY_MALFORMED", "INVALID_EXPIRY_MONTH", "EXPIRY_TOO_FAR", "CVC_MALFORMED", "INVALID_CVC_LENGTH",
        "BIN_TABLE_INVALID", "INVALID_CARD_NUMBER", "INPUT_TOO_LARGE", "ENVELOPE_METADATA_INVALID",
        "BODY_TOO_LARGE", "UNSUPPORTED_MEDIA_TYPE",
    ]

    /// The exit status for an error code.
    public static func status(for code: VaultError.Code) -> Int32 {
        switch code.rawValue {
        case let c where c.hasPrefix("KEY_FILE_") || c.hasPrefix("KEY_PASSPHRASE_") || c == VaultError.Code.fingerprintKeyMissing.rawValue
            || c == "FINGERPRINT_KEY_REFUSED" || c == VaultError.Code.keysDirectoryUnsafe.rawValue: 2
        case VaultError.Code.keyMismatch.rawValue: 3
        case VaultError.Code.sealedValueCorrupt.rawValue, VaultError.Code.envelopeKeyCorrupt.rawValue,
             VaultError.Code.envelopeFieldCorrupt.rawValue, VaultError.Code.envelopeFieldInvalid.rawValue,
             VaultError.Code.envelopeMetadataMismatch.rawValue: 4
        case VaultError.Code.sealedValueMalformed.rawValue, VaultError.Code.envelopeMalformed.rawValue,
             VaultError.Code.envelopeUnsupportedVersion.rawValue: 5
        case VaultError.Code.ioError.rawValue: 7
        case "SIDECAR_UNREACHABLE", "STORE_UNAVAILABLE": 8
        case "TOKEN_NOT_FOUND": 9
        case "PEER_NOT_ALLOWED": 10
        case "CONFIG_NOT_FOUND", "CONFIG_INVALID": 11
        case let c where c.hasPrefix("KEY_RING_") || c == "KEY_NOT_IN_RING" || c == "KEY_RETIRED" || c == "KEY_IN_USE": 12
        case let c where c.hasPrefix("AUDIT_"): 13
        case _ where cardInputCodes.contains(code.rawValue) || code.rawValue.hasPrefix("CARD_") || code.rawValue.hasPrefix("REQUEST_"): 6
        default: 1
        }
    }
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
