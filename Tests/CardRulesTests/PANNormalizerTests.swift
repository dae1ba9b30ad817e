import CardRules
import Testing

@Suite struct PANNormalizerTests {
    /// Normalizes `bytes` into a 32-byte buffer; returns the digits or the error and the buffer.
    func normalize(_ bytes: [UInt8], outputSize: Int = 32) -> (Result<[UInt8], CardRulesError>, [UInt8]) {
        var out = [UInt8](repeating: 0xAA, count: outputSize)
        let result = bytes.withUnsafeBytes { raw in
            out.withUnsafeMutableBytes { o in
                Result { () throws(CardRulesError) -> Int in try PANNormalizer.normalize(raw, into: o) }
            }
        }
        return (result.map { Array(out.prefix($0)) }, out)
    }

    func code(_ bytes: [UInt8]) -> CardRulesError.Code? {
        if case .failure(let e) = normalize(bytes).0 { return e.code }
        return nil
    }

    @Test func dropsSpacesDashesAndTabs() throws {
        #expect(try normalize(ascii("4242 4242-4242\t4242")).0.get() == ascii("4242424242424242"))
        #expect(try normalize(ascii("  4242424242424242  ")).0.get() == ascii("4242424242424242"))
        #expect(try normalize(ascii("3782-822463-10005")).0.get() == ascii("378282246310005"))
        #expect(try normalize(ascii("--4--")).0.get() == ascii("4"))
        #expect(try normalize(ascii("4000 0000 0000 0000 006")).0.get().count == 19)
    }

    @Test func refusesEveryOtherByte() {
        let bad: [[UInt8]] = [
            ascii("4242x"), [0x34, 0x00, 0x34], ascii("4242４"), ascii("4242.4242"), ascii("4242\n"), ascii("4242\r"),
            ascii("4242/4242"), ascii("+4242"), [0x34, 0xFF], [0x34, 0x7F], ascii("４２４２"), ascii("4242_4242"),
        ]
        for bytes in bad {
            #expect(code(bytes) == .nonDigit, "\(bytes)")
        }
    }

    @Test func lengthLimits() {
        #expect(code(ascii("12345678901234567890")) == .tooLong)
        #expect(code(ascii("1234 5678 9012 3456 7890")) == .tooLong)
        #expect(code(ascii("1234567890123456789")) == nil)
        #expect(code(ascii("")) == .empty)
        #expect(code(ascii(" - \t")) == .empty)
        // The first fault in input order wins.
        #expect(code(ascii("12345678901234567890x")) == .tooLong)
        #expect(code(ascii("x12345678901234567890")) == .nonDigit)
    }

    @Test func anOutputOf19BytesIsEnough() throws {
        let (result, _) = normalize(ascii("4000 0000 0000 0000 006 "), outputSize: 19)
        #expect(try result.get() == ascii("4000000000000000006"))
        let (small, _) = normalize(ascii("42"), outputSize: 2)
        #expect(try small.get() == ascii("42"))
    }

    @Test func wipesWhatItWroteWhenItFails() {
        let (result, out) = normalize(ascii("4242 4242 4242 x"))
        guard case .failure(let e) = result else {
            Issue.record("expected a failure")
            return
        }
        #expect(e.code == .nonDigit)
        #expect(out.prefix(12).allSatisfy { $0 == 0 })
        #expect(out[12...].allSatisfy { $0 == 0xAA })
        let (long, out2) = normalize(ascii("42424242424242424242"))
        #expect((try? long.get()) == nil)
        #expect(out2.prefix(19).allSatisfy { $0 == 0 })
    }
}
