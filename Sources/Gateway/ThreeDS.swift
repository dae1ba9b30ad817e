import Foundation
import VaultCrypto
import Crypto
import JWTKit

/// 3-D Secure results as the Cardinal flow delivers them: an HS256 JWT from the 3DS server,
/// validated here, in the gateway adapter, never by the caller or the sidecar.
///
/// Checks, each with its own code: the signature under the shared API key
/// (`THREE_DS_JWT_INVALID`), `iss` equal to the configured issuer (`THREE_DS_JWT_INVALID`), `aud`
/// equal to the `jti` of the challenge request made for this payment (`THREE_DS_JWT_MISMATCH`),
/// `exp` not passed and `iat` not in the future, with `skew` allowed (`THREE_DS_JWT_EXPIRED`), a
/// `jti` never seen before (`THREE_DS_JWT_REPLAYED`, checked by the caller against its ledger),
/// then `Payload.ActionCode`: SUCCESS and NOACTION authorize; FAILURE, ERROR, CANCEL and TIMEOUT
/// decline with their own decline codes.
public struct ThreeDSValidator: Sendable {
    /// The claims of a Cardinal result JWT that the vault reads.
    struct Claims: JWTPayload {
        var iss: IssuerClaim
        var aud: AudienceClaim
        var iat: IssuedAtClaim
        var exp: ExpirationClaim
        var jti: IDClaim
        var Payload: ResultPayload

        struct ResultPayload: Codable, Sendable {
            var ActionCode: String
        }

        // Time and audience are checked by `validate` with their own codes.
        func verify(using algorithm: some JWTAlgorithm) async throws {}
    }

    /// What a valid result says.
    public enum Action: String, Sendable, CaseIterable {
        case success = "SUCCESS", noAction = "NOACTION", failure = "FAILURE", error = "ERROR", cancel = "CANCEL", timeout = "TIMEOUT"

        /// nil: authorize; otherwise the decline code.
        public var declineCode: String? {
            switch self {
            case .success, .noAction: nil
            case .failure: "three_ds_failed"
            case .error: "three_ds_error"
            case .cancel: "three_ds_cancelled"
            case .timeout: "three_ds_timeout"
            }
        }
    }

    /// A refused result: `THREE_DS_JWT_INVALID`, `_MISMATCH`, `_EXPIRED` (or `_REPLAYED`, by the ledger).
    public struct Failure: Error, Sendable, Equatable {
        public let code: ErrorCode
        public let message: String
    }

    let keys: JWTKeyCollection
    public let issuer: String
    public let skew: TimeInterval

    /// A validator for results signed with `apiKey` (HMAC-SHA-256) by `issuer`.
    public init(apiKey: [UInt8], issuer: String, skew: TimeInterval = 60) async {
        keys = JWTKeyCollection()
        await keys.add(hmac: HMACKey(key: SymmetricKey(data: apiKey)), digestAlgorithm: .sha256)
        self.issuer = issuer
        self.skew = skew
    }

    /// Signs a result (the sandbox's 3DS server; tests).
    public func sign(action: String, audience: String, issuedAt: Date, expiresAt: Date, id: String, issuer: String? = nil) async throws -> String {
        let claims = Claims(
            iss: .init(value: issuer ?? self.issuer), aud: .init(value: [audience]), iat: .init(value: issuedAt),
            exp: .init(value: expiresAt), jti: .init(value: id), Payload: .init(ActionCode: action))
        return try await keys.sign(claims)
    }

    /// Validates `jwt` for the challenge whose request had `expectedAudience` as its `jti`.
    /// Returns the action and the result's own `jti` (for the replay check).
    /// Three non-empty base64url parts (`A–Z a–z 0–9 - _`, no padding) joined by dots.
    static func isCompactJWS(_ text: String) -> Bool {
        var dots = 0, partLength = 0
        for b in text.utf8 {
            switch b {
            case UInt8(ascii: "."):
                guard partLength > 0 else { return false }
                dots += 1
                partLength = 0
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "-"), UInt8(ascii: "_"):
                partLength += 1
            default:
                return false
            }
        }
        return dots == 2 && partLength > 0
    }

    public func validate(_ jwt: String, expectedAudience: String, now: Date = Date()) async throws(Failure) -> (Action, String) {
        guard jwt.utf8.count <= 8192 else { throw Failure(code: .threeDSJWTInvalid, message: "the 3DS result is too long") }
        // A compact JWS and nothing else: three base64url parts. The JWT library's decoding
        // tolerated a trailing NUL after a genuine result (outside audit).
        guard Self.isCompactJWS(jwt) else {
            throw Failure(code: .threeDSJWTInvalid, message: "the 3DS result is not a JWT (three base64url parts)")
        }
        let claims: Claims
        do {
            claims = try await keys.verify(jwt, as: Claims.self)
        } catch {
            throw Failure(code: .threeDSJWTInvalid, message: "the 3DS result is not a JWT signed by the 3DS server")
        }
        guard claims.iss.value == issuer else {
            throw Failure(code: .threeDSJWTInvalid, message: "the 3DS result has another issuer")
        }
        guard claims.aud.value == [expectedAudience] else {
            throw Failure(code: .threeDSJWTMismatch, message: "the 3DS result belongs to another challenge")
        }
        guard claims.exp.value.addingTimeInterval(skew) > now, claims.iat.value.addingTimeInterval(-skew) <= now else {
            throw Failure(code: .threeDSJWTExpired, message: "the 3DS result has expired (or is dated in the future)")
        }
        guard let action = Action(rawValue: claims.Payload.ActionCode) else {
            throw Failure(code: .threeDSJWTInvalid, message: "the 3DS result has an unknown ActionCode")
        }
        guard !claims.jti.value.isEmpty else { throw Failure(code: .threeDSJWTInvalid, message: "the 3DS result has no jti") }
        return (action, claims.jti.value)
    }
}
