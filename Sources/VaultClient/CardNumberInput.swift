import CardRules
import VaultCrypto

/// A card-number field for non-PCI callers, modelled on the Cashfree card component: digits go in
/// keystroke by keystroke or by paste; out come only events. There is no getter for the digits:
/// the only ways out are `seal(…)` into a card envelope and `clear()`.
///
/// Digits are held in `SecureBytes` (each edit makes a new buffer and the old one is wiped).
public final class CardNumberInput: @unchecked Sendable {
    /// What the field says after each edit: safe metadata only.
    public struct Event: Sendable, Equatable {
        /// Digits entered.
        public var length: Int
        /// Whether the digits so far pass the Luhn check.
        public var luhn: Bool
        /// The brand, once the prefix decides it.
        public var brand: CardBrand?
        /// Brands the number could still turn out to be.
        public var candidates: [CardBrand]
        /// BIN information, once 8 digits are in and a BIN table is configured.
        public var binInfo: BINInfo?
        /// The BIN (first 6 or 8 digits) once 8 digits are in.
        public var bin: String?
        /// The number grouped for display with unseen digits masked (`4242 4242 •••• 4242`).
        public var formattedMask: String
        /// Complete and valid.
        public var valid: Bool
        /// Errors no further typing can fix (or, when complete, why it is invalid).
        public var errors: [CardRulesError.Code]
    }

    private let validator: CardValidator
    private let lock = PThreadMutex()
    private var digits = SecureBytes(capacity: 0) { _ in 0 }
    private let onChange: (@Sendable (Event) -> Void)?

    /// Most digits a card number has.
    public static let maxDigits = 19

    /// A field using `validator`'s rules; `onChange` hears every event.
    public init(validator: CardValidator = CardValidator(), onChange: (@Sendable (Event) -> Void)? = nil) {
        self.validator = validator
        self.onChange = onChange
    }

    /// Types one character: digits are added, spaces and dashes ignored, anything else refused
    /// (returns the current event unchanged, with `NON_DIGIT_CHARACTERS`).
    @discardableResult
    public func type(_ character: Character) -> Event {
        guard let ascii = character.asciiValue else { return refuse() }
        if ascii == 32 || ascii == 45 { return current() }
        guard ascii >= 48, ascii <= 57 else { return refuse() }
        return append(CollectionOfOne(ascii))
    }

    /// Pastes text: spaces and dashes dropped; refused whole if it has other characters or would
    /// make the number longer than 19 digits.
    @discardableResult
    public func paste(_ bytes: UnsafeRawBufferPointer) -> Event {
        // Digits go straight into wiped memory; more than 19 is refused whole.
        var tooLong = false, nonDigit = false
        let digits = SecureBytes(capacity: Self.maxDigits) { out in
            var n = 0
            for b in bytes {
                if b == 32 || b == 45 || b == 9 { continue }
                guard b >= 48, b <= 57 else { nonDigit = true; return 0 }
                guard n < Self.maxDigits else { tooLong = true; return 0 }
                out[n] = b
                n += 1
            }
            return n
        }
        if nonDigit { return refuse() }
        if tooLong {
            var e = current()
            if !e.errors.contains(.tooLong) { e.errors.append(.tooLong) }
            return e
        }
        return digits.withUnsafeBytes { append($0) }
    }

    /// Deletes the last digit.
    @discardableResult
    public func deleteBackward() -> Event {
        lock.withLock {
            let old = digits
            digits = old.withUnsafeBytes { SecureBytes(copying: UnsafeRawBufferPointer(rebasing: $0.dropLast())) }
        }
        return publish(current())
    }

    /// Empties the field (the digits are wiped).
    @discardableResult
    public func clear() -> Event {
        lock.withLock { digits = SecureBytes(capacity: 0) { _ in 0 } }
        return publish(current())
    }

    /// The event for the digits as they stand.
    public func current() -> Event {
        let d = lock.withLock { digits }
        return d.withUnsafeBytes { Self.event(for: $0, validator: validator) }
    }

    /// Seals the number with the rest of the card into an envelope (public key only).
    /// - Throws: the card-rules codes of `CardEnvelope.seal`.
    public func seal(
        expiry: CardExpiry, cvc: SecureBytes?, name: SecureBytes?, to publicKey: PublicKey
    ) throws(VaultError) -> CardEnvelope {
        let number = lock.withLock { digits }
        let card = try CardData(number: number, expiry: expiry, cvc: cvc, name: name)
        return try CardEnvelope.seal(card, to: publicKey, validator: validator)
    }

    private func append(_ more: some Collection<UInt8>) -> Event {
        let ok: Bool = lock.withLock {
            guard digits.count + more.count <= Self.maxDigits else { return false }
            let old = digits
            digits = old.withUnsafeBytes { existing in
                SecureBytes(capacity: existing.count + more.count) { out in
                    if !existing.isEmpty { out.baseAddress!.copyMemory(from: existing.baseAddress!, byteCount: existing.count) }
                    var i = existing.count
                    for b in more { out[i] = b; i += 1 }
                    return i
                }
            }
            return true
        }
        guard ok else {
            var e = current()
            e.errors = Array(Set(e.errors + [.tooLong])).sorted { $0.rawValue < $1.rawValue }
            return e
        }
        return publish(current())
    }

    private func refuse() -> Event {
        var e = current()
        if !e.errors.contains(.nonDigit) { e.errors.append(.nonDigit) }
        return e
    }

    private func publish(_ event: Event) -> Event {
        onChange?(event)
        return event
    }

    static func event(for digits: UnsafeRawBufferPointer, validator: CardValidator) -> Event {
        let info = validator.validate(digits: digits, partial: true)
        let complete = validator.validate(digits: digits, partial: false)
        let showBIN = digits.count >= 8
        return Event(
            length: digits.count,
            luhn: info.luhn,
            brand: info.brand,
            candidates: info.candidates,
            binInfo: showBIN ? info.binInfo : nil,
            bin: showBIN ? info.bin : nil,
            formattedMask: CardFormatter.mask(digits, brand: info.brand),
            valid: complete.valid,
            errors: complete.valid ? [] : info.errors)
    }
}
