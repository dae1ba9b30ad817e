// libFuzzer entry points for the vault's parsers. VAULT_FUZZ_TARGET names the target:
//
//   card-json        the card object the sidecar reads (CardData.parseJSON: JSONReader → SecureBytes)
//   card-number      PANNormalizer, CardValidator, CVC rules, CardFormatter, CardExpiry.parse, BIN CSV
//   sealed-value     `vault:v1:` text (both parsers) and opening it; a seal → open round trip
//   envelope         card envelope v1 JSON, parsed then opened with the metadata check
//   envelope-fields  hostile plaintexts sealed into an envelope, then opened: the opener's checks
//   key-files        public, secret, fingerprint and protected key files; ring.json
//   jwt              3DS result JWTs (ThreeDSValidator.validate), as sent and validly signed
//   relay            relay templates (JSON), and processor answers mapped through a template
//   audit            audit log files (AuditVerifier)
//
// Every target checks invariants as well as "does not crash": what parses must print back the same
// way, what is sealed must open to the same bytes, what opens must pass the rules. A violated
// invariant traps, which libFuzzer reports as a crash with the input that caused it.
import Audit
import CardRules
import Crypto
import Foundation
@_spi(Opening) @testable import Gateway
import NIOCore
@_spi(Opening) @testable import VaultCrypto
@_spi(Opening) import VaultOpen

nonisolated(unsafe) var target = ""
nonisolated(unsafe) var workDir = ""

/// Fixed keys for the whole run: one ring that opens, one key that is not in it.
let secret = try! SecretKey(bytes: SecureBytes(Array(repeating: UInt8(7), count: 32)))
let otherSecret = try! SecretKey(bytes: SecureBytes(Array(repeating: UInt8(9), count: 32)))
let fingerprintKey = try! FingerprintKey(secureBytes: SecureBytes(Array(repeating: UInt8(3), count: 32)))
let ring: KeyRing = { var r = KeyRing(); r.add(secret); return r }()
let opener = EnvelopeOpener(ring: ring, fingerprintKey: fingerprintKey)
let validator = CardValidator()

func bytes(_ s: SecureBytes) -> [UInt8] { s.withUnsafeBytes { Array($0) } }

func check(_ condition: Bool, _ what: @autoclosure () -> String) {
    if !condition { fatalError("invariant violated in \(target): \(what())") }
}

/// libFuzzer's driver (in the runtime that `-sanitize=fuzzer` links).
@_silgen_name("LLVMFuzzerRunDriver")
func runDriver(
    _ argc: UnsafeMutablePointer<Int32>, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
    _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> Int32
) -> Int32

/// SwiftPM links an executable target's `main` to `<target>_main`; this one hands over to
/// libFuzzer, which calls `LLVMFuzzerInitialize` and then `LLVMFuzzerTestOneInput` per input.
@_cdecl("VaultFuzz_main")
public func vaultFuzzMain(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) -> Int32 {
    var count = argc
    var vector: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = argv
    return runDriver(&count, &vector) { data, size in testOneInput(data, size) }
}

@_cdecl("LLVMFuzzerInitialize")
public func initialize(_ argc: UnsafeMutablePointer<Int32>, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>) -> Int32 {
    target = ProcessInfo.processInfo.environment["VAULT_FUZZ_TARGET"] ?? ""
    let known = ["card-json", "card-number", "sealed-value", "envelope", "envelope-fields", "key-files", "jwt", "relay", "audit"]
    guard known.contains(target) else {
        FileHandle.standardError.write(Data("VAULT_FUZZ_TARGET must be one of: \(known.joined(separator: ", "))\n".utf8))
        exit(64)
    }
    workDir = (ProcessInfo.processInfo.environment["TMPDIR"] ?? "/tmp") + "/vault-fuzz-\(getpid())"
    try? FileManager.default.createDirectory(atPath: workDir, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
    atexit { try? FileManager.default.removeItem(atPath: workDir) }
    if let dir = ProcessInfo.processInfo.environment["VAULT_FUZZ_MAKE_SEEDS"] {
        writeSeeds(to: dir)
        exit(0)
    }
    return 0
}

@_cdecl("LLVMFuzzerTestOneInput")
public func testOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let input = UnsafeRawBufferPointer(start: size == 0 ? nil : data, count: size)
    switch target {
    case "card-json": cardJSON(input)
    case "card-number": cardNumber(input)
    case "sealed-value": sealedValue(input)
    case "envelope": envelope(input)
    case "envelope-fields": envelopeFields(input)
    case "key-files": keyFiles(input)
    case "jwt": jwt(input)
    case "relay": relay(input)
    case "audit": audit(input)
    default: break
    }
    return 0
}

// MARK: - Card input

func cardJSON(_ input: UnsafeRawBufferPointer) {
    guard let card = try? CardData.parseJSON(input) else { return }
    // What parses holds digits only, and validation either passes or throws a coded error.
    check(card.number.withUnsafeBytes { $0.allSatisfy { $0 >= 48 && $0 <= 57 } } && (1...19).contains(card.number.count), "parsed number is 1…19 digits")
    check((1...12).contains(card.expiry.month), "parsed month in 1…12")
    do {
        let metadata = try CardEnvelope.validate(card)
        // A card that validates seals and opens back to itself.
        let sealed = CardEnvelope.seal(card, metadata: metadata, to: secret.publicKey)
        let opened = try opener.open(CardEnvelope(json: sealed.json))
        check(bytes(opened.card.number) == bytes(card.number) && opened.metadata == metadata, "a valid card round-trips")
    } catch {
        check(!error.code.rawValue.isEmpty, "a coded error")
    }
}

func cardNumber(_ input: UnsafeRawBufferPointer) {
    guard let mode = input.first else { return }
    let rest = UnsafeRawBufferPointer(rebasing: input.dropFirst())
    switch mode % 4 {
    case 0:
        var out = [UInt8](repeating: 0xAA, count: 19)
        let n = try? out.withUnsafeMutableBytes { (o) throws(CardRulesError) -> Int in try PANNormalizer.normalize(rest, into: o) }
        guard let n else {
            check(out.allSatisfy { $0 == 0xAA || $0 == 0 }, "a refused number leaves no digits behind")
            return
        }
        let digits = Array(out[0..<n])
        let expected = rest.filter { $0 >= 48 && $0 <= 57 }
        check(digits == expected, "normalize keeps exactly the digits")
        let info = validator.validate(digits: digits)
        check(info.length == n, "length")
        check(!info.valid || (info.errors.isEmpty && Luhn.isValid(digits) == info.luhn), "a valid number has no errors")
        if info.valid { check(info.brand != nil && info.last4 == String(decoding: digits.suffix(4), as: UTF8.self), "last4") }
        var formatted = [UInt8](repeating: 0, count: CardFormatter.formattedLength(length: n, brand: info.brand))
        let written = digits.withUnsafeBytes { d in formatted.withUnsafeMutableBytes { CardFormatter.format(d, brand: info.brand, into: $0) } }
        check(formatted[0..<written].filter { $0 != 32 } == digits[...], "formatting only adds spaces")
        let masked = CardFormatter.mask(digits, brand: info.brand)
        check(n < CardNumberInfo.minimumDisplayLength || masked.unicodeScalars.filter({ $0.properties.numericType != nil }).count <= 12, "the mask hides digits")
        if n > 1 {
            let check_ = Luhn.checkDigit(for: digits.dropLast())
            check(Luhn.isValid(digits) == (check_ == digits.last!), "Luhn check digit agrees with isValid")
        }
        _ = validator.validate(digits: digits, partial: true)
    case 1:
        let text = String(decoding: rest, as: UTF8.self)
        if let expiry = try? CardExpiry.parse(text) {
            check((1...12).contains(expiry.month), "parsed month in 1…12")
            _ = expiry.validate()
        }
    case 2:
        let brands = validator.validate(digits: Array("4242424242424242".utf8)).brand
        _ = validator.validateCVC(Array(rest), brand: brands)
        _ = validator.validateCVC(Array(rest), brand: nil)
    default:
        if let table = try? BINTable(csv: String(decoding: rest, as: UTF8.self)) {
            for probe in ["4", "42424242", "5555555555554444", "0000000000000000000", ""] { _ = table.lookup(Array(probe.utf8)) }
        }
    }
}

// MARK: - Sealed values and envelopes

func sealedValue(_ input: UnsafeRawBufferPointer) {
    guard let mode = input.first else { return }
    let rest = UnsafeRawBufferPointer(rebasing: input.dropFirst())
    if mode & 1 == 0 {
        // Hostile text, both parsers (the line parser is the bulk `vault open --lines` path).
        let byLine = try? SealedValue(line: rest)
        let byText = try? SealedValue(text: String(decoding: rest, as: UTF8.self))
        if let v = byLine ?? byText {
            check((try? SealedValue(text: v.text)) == v, "a parsed value prints back to itself")
            if let plain = try? ring.open(v) { check(v.kid == secret.kid, "only our kid opens (\(plain.count) bytes)") }
        }
        _ = try? ring.open(line: rest)
    } else {
        // Round trip: any bytes seal and open to themselves; under another key they do not open.
        let sealed = secret.publicKey.seal(rest)
        check(sealed.ciphertext.count == rest.count + SealedValue.overhead, "sealed length")
        let opened = try? ring.open(SealedValue(text: sealed.text))
        check(opened.map { $0.withUnsafeBytes { Array($0) } } == Array(rest), "seal → text → open round-trips")
        var other = KeyRing(); other.add(otherSecret)
        check((try? other.open(sealed)) == nil, "another key does not open it")
        if !sealed.ciphertext.isEmpty {
            // One flipped bit anywhere: refused.
            var bytes = sealed.ciphertext
            let i = Int(mode >> 1) % bytes.count
            bytes[i] ^= 1 << (mode & 7)
            check((try? ring.open(SealedValue(kid: sealed.kid, ciphertext: bytes))) == nil, "a flipped bit is refused")
        }
    }
}

func envelope(_ input: UnsafeRawBufferPointer) {
    guard let parsed = try? CardEnvelope(json: input) else { return }
    check((try? CardEnvelope(json: parsed.json))?.json == parsed.json, "an envelope prints back to itself")
    if let card = try? opener.open(parsed, checkFingerprint: true) {
        // Whatever opens has passed every rule: re-validating the card gives the same metadata.
        // Sealing makes no fingerprint now (only the gateway holds the key); an envelope that
        // carries one opens only when it is the key's fingerprint of the opened PAN.
        let again = try? CardEnvelope.validate(card.card, now: CalendarMonth(year: 2000, month: 1))
        var stated = parsed.card
        stated.fingerprint = nil
        check(again.map { $0 == stated } ?? true, "opened metadata re-derives")
        if let fp = parsed.card.fingerprint {
            check(card.card.number.withUnsafeBytes { fingerprintKey.fingerprint(ofDigits: $0) } == fp, "a carried fingerprint is the key's")
        }
    }
    _ = parsed.droppingCVC().json
}

/// Structure-aware: pan digits, expiry, cvc and name bytes and the stated metadata all come from
/// the input; the envelope is sealed for real, so the opener's plaintext checks get exercised.
func envelopeFields(_ input: UnsafeRawBufferPointer) {
    var parts = input.split(separator: 0, maxSplits: 6, omittingEmptySubsequences: false).map { Array($0) }
    while parts.count < 7 { parts.append([]) }
    let month = Int(parts[1].first ?? 1) % 14, year = 2000 + Int(parts[1].last ?? 30) % 120
    guard let expiry = try? CardExpiry(month: month, year: year),
          let card = try? CardData(number: SecureBytes(parts[0]), expiry: expiry,
                                   cvc: parts[2].isEmpty ? nil : SecureBytes(parts[2]),
                                   name: parts[3].isEmpty ? nil : SecureBytes(parts[3]))
    else { return }
    let stated = CardMetadata(
        brand: CardBrand(rawValue: String(decoding: parts[4], as: UTF8.self)),
        bin: String(decoding: parts[5].prefix(8), as: UTF8.self), last4: String(decoding: parts[5].suffix(4), as: UTF8.self),
        length: parts[6].count, expMonth: month, expYear: year, fingerprint: nil)
    let honest = try? CardEnvelope.validate(card, now: CalendarMonth(year: 2000, month: 1))
    for metadata in [stated, honest].compactMap({ $0 }) {
        let sealed = CardEnvelope.seal(card, metadata: metadata, to: secret.publicKey)
        let result = Result { () throws(VaultError) in try opener.open(CardEnvelope(json: sealed.json)) }
        switch result {
        case .success(let opened):
            check(opened.metadata == metadata && bytes(opened.card.number) == bytes(card.number), "opened what was sealed")
            // Honest = re-derived from the card itself (the opener does not apply the sealing-time
            // expiry window, so `honest`, made in 2000, may be nil for a card that opens).
            let info = card.number.withUnsafeBytes { CardValidator().validate(digits: $0) }
            let rederived = info.valid ? CardMetadata(info: info, expiry: expiry, fingerprint: nil) : nil
            // An older envelope's longer BIN is checked as far as the visible prefix only (the
            // digits past it are hidden digits: docs/envelope-v1.md); everything else exactly.
            var visible = metadata
            visible.bin = CardNumberInfo.visiblePrefix(metadata.bin, length: metadata.length)
            let binLengthOK = metadata.bin.utf8.count == CardNumberInfo.binLength(forLength: metadata.length)
                || metadata.bin.utf8.count == CardNumberInfo.legacyBINLength(forLength: metadata.length)
            check(rederived == visible && binLengthOK, "only honest metadata opens")
        case .failure(let error):
            check(error.code.rawValue.hasPrefix("ENVELOPE_"), "an envelope code, got \(error.code.rawValue)")
        }
        // The same envelope under a key not in the ring: KEY_MISMATCH, never opened.
        let foreign = CardEnvelope.seal(card, metadata: metadata, to: otherSecret.publicKey)
        check((try? opener.open(foreign)) == nil, "a foreign kid does not open")
    }
}

// MARK: - Key files

func keyFiles(_ input: UnsafeRawBufferPointer) {
    guard let mode = input.first else { return }
    let rest = UnsafeRawBufferPointer(rebasing: input.dropFirst())
    let path = workDir + "/k"
    unlink(path)
    let fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0o600)
    guard fd >= 0 else { return }
    // A secret key file (mode 1) is given without its `vault:sk:v1:` head, which is written here:
    // the kept corpus is in git, and no tracked file holds a secret-key line, not even the fuzz
    // target's public fixed key (scripts/fuzz also drops any found input that has one).
    if mode % 5 == 1 { _ = write(fd, "vault:sk:v1:", 12) }
    _ = write(fd, rest.baseAddress, rest.count)
    close(fd)
    switch mode % 5 {
    case 0:
        if let key = try? KeyFiles.loadPublicKey(path: path) {
            check((try? PublicKey(text: key.text))?.kid == key.kid, "a loaded public key prints back")
        }
    case 1:
        if let key = try? SecretKey(path: path) { check(key.publicKey.kid.rawValue.hasPrefix("k_") || !key.kid.rawValue.isEmpty, "kid") }
    case 2:
        _ = try? KeyFiles.loadFingerprintKey(path: path)
    case 3:
        if let file = try? KeyRingFile.parse(Data(rest)) {
            _ = try? file.checkOpens(file.primary, field: "kid")
        }
    default:
        // A protected key: the line and its Argon2id header (bounded limits), without deriving.
        _ = try? KeyText.payload(rest, expecting: .protectedSecret)
        if let payload = try? KeyText.payload(rest, expecting: .protectedSecret), let h = try? ProtectedKey.header(payload: payload) {
            check(h.ops <= ProtectedKey.maxOps && h.mem <= ProtectedKey.maxMem, "limits are bounded")
        }
        _ = try? SecretKey(path: path)   // protected: refused without a passphrase
    }
}

// MARK: - Gateway: 3DS JWTs, relay templates, processor answers

let jwtKey = Array("fuzz 3ds api key, 32 bytes long!".utf8)
final class Box<T>: @unchecked Sendable { var value: T?; init() {} }
func blocking<T: Sendable>(_ body: @escaping @Sendable () async -> T) -> T {
    let box = Box<T>(), done = DispatchSemaphore(value: 0)
    Task { box.value = await body(); done.signal() }
    done.wait()
    return box.value!
}
let threeDS = blocking { await ThreeDSValidator(apiKey: jwtKey, issuer: "fuzz-3ds") }

func base64url(_ bytes: some Sequence<UInt8>) -> String {
    Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
}

func jwt(_ input: UnsafeRawBufferPointer) {
    guard let mode = input.first else { return }
    let rest = Array(input.dropFirst())
    let token: String
    if mode & 1 == 0 {
        token = String(decoding: rest, as: UTF8.self)   // as a hostile sender would send it
    } else {
        // Validly signed, hostile claims: the payload JSON is the input.
        let signingInput = base64url(#"{"alg":"HS256","typ":"JWT"}"#.utf8) + "." + base64url(rest)
        let mac = HMAC<SHA256>.authenticationCode(for: Array(signingInput.utf8), using: SymmetricKey(data: jwtKey))
        token = signingInput + "." + base64url(Array(mac))
    }
    let now = Date(timeIntervalSince1970: 1_900_000_000)
    let result = blocking { () -> Result<(ThreeDSValidator.Action, String), ThreeDSValidator.Failure> in
        do throws(ThreeDSValidator.Failure) { return .success(try await threeDS.validate(token, expectedAudience: "chl_fuzz", now: now)) } catch { return .failure(error) }
    }
    switch result {
    case .success(let (_, jti)):
        check(signedWithKey(token), "only a token signed with the key validates")
        check(!jti.isEmpty, "a valid result has a jti")
    case .failure(let f):
        check(f.code.rawValue.hasPrefix("THREE_DS_JWT_"), "a coded failure")
    }
}

/// Whether the token's third part is HMAC-SHA-256, under the 3DS key, of its first two parts.
func signedWithKey(_ token: String) -> Bool {
    let parts = token.split(separator: ".", omittingEmptySubsequences: false)
    guard parts.count == 3 else { return false }
    var b64 = parts[2].replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
    while b64.count % 4 != 0 { b64 += "=" }
    guard let signature = Data(base64Encoded: b64) else { return false }
    let mac = HMAC<SHA256>.authenticationCode(for: Array((parts[0] + "." + parts[1]).utf8), using: SymmetricKey(data: jwtKey))
    return Data(mac) == signature
}

let relayTemplate: RelayTemplate = {
    try! RelayTemplate(root: [
        "request": ["url": "https://processor.invalid/v1/charges", "headers": [["Idempotency-Key", "{{idempotency_key}}"]],
                    "form": [["card[number]", "{{pan}}"], ["amount", "{{amount}}"]]],
        "response": ["status": "status", "succeeded": ["succeeded"], "declined": ["failed"], "requires_action": ["requires_action"],
                     "decline_code": "failure_code", "reference": "id", "declined_http_statuses": [402], "error_decline_code": "error.decline_code"],
    ])
}()

func relay(_ input: UnsafeRawBufferPointer) {
    guard let mode = input.first else { return }
    let rest = Data(input.dropFirst())
    if mode & 1 == 0 {
        guard let root = try? JSONSerialization.jsonObject(with: rest) as? [String: Any] else { return }
        if let template = try? RelayTemplate(root: root) {
            // A template that loads never puts a card field in the URL or a header.
            let outside = ([template.url] + template.headers.map(\.1)).flatMap { RelayTemplate.placeholders(in: $0) }
            check(!outside.contains { RelayTemplate.cardPlaceholders.contains($0) }, "card fields only in the body")
            // ... and always carries the processor's idempotency key.
            let carried = (template.headers.map(\.1) + RelayTemplate.bodyTexts(template.body)).flatMap { RelayTemplate.placeholders(in: $0) }
            check(carried.contains("idempotency_key") || carried.contains("payment_id"), "the processor idempotency key is carried")
            // ... and its status query (settle.status) carries no card field at all.
            if let query = template.settle.status {
                let named = ([query.url] + query.headers.map(\.1)).flatMap { RelayTemplate.placeholders(in: $0) }
                check(!named.contains { RelayTemplate.cardPlaceholders.contains($0) }, "no card fields in a status query")
            }
            check((0...RelayTemplate.Settlement.maxRetryWithin).contains(template.settle.retryWithin), "the in-call retry window is bounded")
        }
    } else {
        // A processor's answer (hostile or broken), mapped through a fixed template.
        let status = [200, 201, 402, 404, 500, 503, 302, 307, 308][Int(mode >> 1) % 9]
        do {
            let outcome = try relayTemplate.outcome(httpStatus: status, body: ByteBuffer(data: rest))
            check(status < 500, "5xx is never an outcome: \(outcome)")
            check(!(300..<400).contains(status), "a redirect is never an outcome: \(outcome)")
        } catch {
            check(error.code == .gatewayUnavailable, "unreadable answers are ProcessorError.unavailable")
        }
    }
}

// MARK: - Audit log

func audit(_ input: UnsafeRawBufferPointer) {
    let path = workDir + "/audit.log"
    guard FileManager.default.createFile(atPath: path, contents: Data(input)) else { return }
    let report = AuditVerifier.verify(path: path)
    if report.isValid { check(report.lastSeq <= Int64(report.lines) && report.head.utf8.count == 64, "a valid log's seq and head") }
}

// MARK: - Seeds

/// Writes the target's starting inputs (valid examples, made with the real code and the fixed
/// keys above) into `dir`: `scripts/fuzz --make-seeds`. libFuzzer mutates from there.
func writeSeeds(to dir: String) {
    try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    var seeds: [[UInt8]] = []
    func add(_ mode: UInt8?, _ text: String) { seeds.append((mode.map { [$0] } ?? []) + Array(text.utf8)) }
    let visa = try! CardData(number: SecureBytes(Array("4242424242424242".utf8)), expiry: CardExpiry(month: 12, year: 2030),
                             cvc: SecureBytes(Array("123".utf8)), name: SecureBytes(Array("Jane Q. Public".utf8)))
    let amex = try! CardData(number: SecureBytes(Array("378282246310005".utf8)), expiry: CardExpiry(month: 1, year: 2031),
                             cvc: SecureBytes(Array("1234".utf8)))
    switch target {
    case "card-json":
        add(nil, #"{"number":"4242424242424242","exp_month":12,"exp_year":2030,"cvc":"123"}"#)
        add(nil, #"{"number":"3782 822463 10005","exp_month":"01","exp_year":"31","cvc":"1234","name":"Jane Q. Public"}"#)
        add(nil, #"{"number":"5555-5555-5555-4444","exp_month":2,"exp_year":2029,"cvc":null,"name":"\u00c9mile \ud83d\ude00"}"#)
        add(nil, #" { "exp_year" : 2030 , "exp_month" : 7 , "number" : "4000000000000002" } "#)
    case "card-number":
        for pan in ["4242 4242 4242 4242", "3782-822463-10005", "6011111111111117", "5555555555554444", "4000000000000002", "42424242424242424242", "4\t2-4 2"] { add(0, pan) }
        for exp in ["12/30", "12/2030", "1/2031", "01 / 27", "13/30", "00/00"] { add(1, exp) }
        for cvc in ["123", "1234", "12", "12a"] { add(2, cvc) }
        add(3, "range_start,range_end,brand,type,issuer,country\n42424242,42424242,visa,credit,Test Bank,GB\n510000,519999,mastercard,debit,,US\n")
    case "sealed-value":
        add(0, secret.publicKey.seal(SecureBytes(Array("4242424242424242".utf8))).text)
        add(0, otherSecret.publicKey.seal(SecureBytes(Array("hello".utf8))).text + "\n")
        add(1, "any bytes at all")
        add(0x41, "")
    case "envelope":
        let m = try! CardEnvelope.validate(visa)
        add(nil, CardEnvelope.seal(visa, metadata: m, to: secret.publicKey).json)
        let a = try! CardEnvelope.validate(amex)
        add(nil, CardEnvelope.seal(amex, metadata: a, to: secret.publicKey).json)
        add(nil, CardEnvelope.seal(amex, metadata: a, to: secret.publicKey).droppingCVC().json)
        add(nil, CardEnvelope.seal(visa, metadata: m, to: otherSecret.publicKey).json)
    case "envelope-fields":
        add(nil, "4242424242424242\0\u{0C}\u{1E}\0" + "123\0Jane\0visa\0" + "424242424242\0" + "1234567890123456")
        add(nil, "378282246310005\0\u{01}\u{1F}\0" + "1234\0\0amex\0" + "378282\0" + "123456789012345")
        add(nil, "4242424242424242\0\u{0C}\u{1E}\0" + "12\0\u{7F}\0visa\0" + "42424242\0" + "1234567890123456")
    case "key-files":
        add(0, secret.publicKey.text + "\n")
        add(0, "# a comment\n" + otherSecret.publicKey.text)
        add(1, secret.bytes.withUnsafeBytes { Base64.encode($0) } + "\n")   // the head is added by the target
        add(2, "vault:fk:v1:" + [UInt8](repeating: 3, count: 32).withUnsafeBytes { Base64.encode($0) } + "\n")
        let ring = try! KeyRingFile(entries: [
            .init(kid: secret.kid, status: .primary, created: Date(timeIntervalSince1970: 1_800_000_000)),
            .init(kid: otherSecret.kid, status: .retired, created: Date(timeIntervalSince1970: 1_700_000_000), changed: Date(timeIntervalSince1970: 1_800_000_000)),
        ])
        add(3, ring.text)
        if let protected = try? ProtectedKey.seal(secret.bytes, passphrase: SecureBytes(Array("fuzz".utf8)), cost: .interactive) {
            seeds.append([4] + protected.withUnsafeBytes { Array($0) })
        }
    case "jwt":
        let now = Date(timeIntervalSince1970: 1_900_000_000)
        for action in ["SUCCESS", "FAILURE", "NOPE"] {
            let signed = blocking { try! await threeDS.sign(action: action, audience: "chl_fuzz", issuedAt: now, expiresAt: now + 600, id: "jti_\(action)") }
            add(0, signed)
        }
        add(1, #"{"iss":"fuzz-3ds","aud":"chl_fuzz","iat":1900000000,"exp":1900000600,"jti":"r1","Payload":{"ActionCode":"SUCCESS"}}"#)
        add(1, #"{"iss":"fuzz-3ds","aud":["chl_fuzz"],"iat":1900000000.5,"exp":1900000600,"jti":"","Payload":{"ActionCode":"TIMEOUT"}}"#)
    case "relay":
        add(0, #"{"name":"stripe-style","request":{"method":"POST","url":"https://api.example.com/v1/charges","headers":[["Authorization","Bearer {{env:PROCESSOR_KEY}}"],["Idempotency-Key","{{idempotency_key}}"]],"form":[["amount","{{amount}}"],["currency","{{currency_lower}}"],["card[number]","{{pan}}"],["card[exp]","{{exp_month}}/{{exp_year2}}"]]},"timeout_seconds":30,"response":{"status":"status","succeeded":["succeeded"],"declined":["failed"],"requires_action":["requires_action"],"decline_code":"failure_code","reference":"id","declined_http_statuses":[402],"error_decline_code":"error.decline_code"}}"#)
        add(0, #"{"request":{"url":"{{env:BASE}}/pay","json":{"amount":"{{#amount}}","card":{"pan":"{{pan}}","cvc":"{{cvc}}"}}},"response":{"status":"result.state","succeeded":["OK"]}}"#)
        add(1, #"{"id":"ch_1","status":"succeeded"}"#)
        add(5, #"{"id":"ch_2","status":"failed","failure_code":"card_declined"}"#)
        add(7, #"{"error":{"decline_code":"insufficient_funds"},"id":"ch_3"}"#)
    case "audit":
        let path = workDir + "/seed-audit.log"
        if let log = try? AuditLog(path: path, process: "sidecar") {
            _ = log.record(AuditEvent(action: "tokenize", uid: 1000, token: "tok_abc", kid: String(secret.kid.rawValue)))
            _ = log.record(AuditEvent(action: "pay", outcome: "declined", payment: "pay_1", detail: [("amount", 1050)]))
            log.close()
            if let data = FileManager.default.contents(atPath: path) { seeds.append(Array(data)) }
        }
    default: break
    }
    for (i, seed) in seeds.enumerated() {
        _ = FileManager.default.createFile(atPath: "\(dir)/seed-\(i)", contents: Data(seed))
    }
}
