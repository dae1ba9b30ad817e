import CardRules
import Testing
@_spi(Opening) import VaultCrypto
import VaultClient
@_spi(Opening) import VaultOpen

@Suite struct CardNumberInputTests {
    @Test func eventsAsDigitsAreTyped() throws {
        let field = CardNumberInput()
        var e = field.type("4")
        #expect(e.length == 1)
        #expect(e.brand == .visa || e.candidates.contains(.visa))
        #expect(e.bin == nil)
        for c in "242 4242-4242 424" { e = field.type(c) }
        #expect(e.length == 15)
        #expect(!e.valid)
        e = field.type("2")
        #expect(e.length == 16)
        #expect(e.valid)
        #expect(e.luhn)
        #expect(e.brand == .visa)
        #expect(e.bin == "424242")
        #expect(e.errors.isEmpty)
        #expect(e.formattedMask == "4242 42•• •••• 4242")
        #expect(!e.formattedMask.contains("4242 4242 4242 4242"))
        e = field.deleteBackward()
        #expect(e.length == 15)
        e = field.clear()
        #expect(e.length == 0)
    }

    @Test func candidatesNarrowAsTheNumberGrows() {
        let field = CardNumberInput()
        let two = field.type("2")
        #expect(Set(two.candidates).isSuperset(of: [.mastercard, .jcb, .mir]))
        let twentyTwo = field.type("2")
        #expect(twentyTwo.candidates.contains(.mir) && twentyTwo.candidates.contains(.mastercard))
        #expect(!twentyTwo.candidates.contains(.jcb))
    }

    @Test func pasteAndRefusals() {
        let field = CardNumberInput()
        let pasted = Array("5555 5555 5555 4444".utf8).withUnsafeBytes { field.paste($0) }
        #expect(pasted.valid && pasted.brand == .mastercard)
        let refused = Array("12ab".utf8).withUnsafeBytes { field.paste($0) }
        #expect(refused.length == 16)
        #expect(refused.errors.contains(.nonDigit))
        let tooLong = Array("4444".utf8).withUnsafeBytes { field.paste($0) }
        #expect(tooLong.length == 16)
        #expect(tooLong.errors.contains(.tooLong))
        #expect(field.type("x").errors.contains(.nonDigit))
    }

    @Test func neverExposesTheDigits() throws {
        let field = CardNumberInput()
        _ = Array("4242424242424242".utf8).withUnsafeBytes { field.paste($0) }
        // No property, description or mirror of the field or its events holds the number.
        var dumped = ""
        dump(field, to: &dumped)
        dump(field.current(), to: &dumped)
        dumped += "\(field) \(String(reflecting: field))"
        #expect(!dumped.contains("4242424242424242"))
        #expect(!dumped.contains("4242 4242 4242 4242"))
    }

    @Test func sealsDirectlyAndTheGatewayOpensIt() throws {
        let skBytes = SecureBytes.random(count: 32)
        let secret = try SecretKey(bytes: skBytes)
        var ring = KeyRing()
        ring.add(secret)
        var events: [CardNumberInput.Event] = []
        let sink = EventSink()
        let field = CardNumberInput(onChange: { sink.append($0) })
        for c in "378282246310005" { field.type(c) }
        events = sink.events
        #expect(events.count == 15)
        #expect(events.last?.brand == .amex)
        let envelope = try field.seal(expiry: CardExpiry(month: 1, year: 2031), cvc: SecureBytes(Array("1234".utf8)), name: nil, to: secret.publicKey)
        #expect(envelope.card.brand == .amex && envelope.card.last4 == "0005")
        let opened = try EnvelopeOpener(ring: ring).open(envelope)
        #expect(opened.card.number.withUnsafeBytes { Array($0) } == Array("378282246310005".utf8))
    }

    @Test func cardSealerValidatesAndSeals() throws {
        let secret = try SecretKey(bytes: SecureBytes.random(count: 32))
        let sealer = CardSealer(publicKey: secret.publicKey)
        let info = Array("4242-4242-4242-4242".utf8).withUnsafeBytes { sealer.validate(number: $0) }
        #expect(info.valid && info.brand == .visa)
        let bad = Array("4242 x".utf8).withUnsafeBytes { sealer.validate(number: $0) }
        #expect(!bad.valid && bad.errors == [.nonDigit])
        let json = Array(#"{"number":"6011111111111117","exp_month":6,"exp_year":2029}"#.utf8)
        let envelope = try json.withUnsafeBytes { b in Result { () throws(VaultError) in try sealer.seal(cardJSON: b) } }.get()
        #expect(envelope.card.brand == .discover)
        #expect(envelope.fields[.cvc] == nil)
    }
}

final class EventSink: @unchecked Sendable {
    private var stored: [CardNumberInput.Event] = []
    func append(_ e: CardNumberInput.Event) { stored.append(e) }
    var events: [CardNumberInput.Event] { stored }
}
