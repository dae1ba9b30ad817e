import Testing
@testable import VaultCrypto

@Suite struct SecureBytesTests {
    @Test func printsRedactedEverywhere() {
        let b = SecureBytes(Array("4242424242424242".utf8))
        #expect(b.description == "<redacted>")
        #expect(String(describing: b) == "<redacted>")
        #expect("\(b)" == "<redacted>")
        #expect(String(reflecting: b) == "SecureBytes(<redacted>)")
        var dumped = ""
        dump(b, to: &dumped)
        #expect(!dumped.contains("4242"))
    }

    @Test func comparesContents() {
        #expect(SecureBytes([1, 2, 3]) == SecureBytes([1, 2, 3]))
        #expect(SecureBytes([1, 2, 3]) != SecureBytes([1, 2, 4]))
        #expect(SecureBytes([1, 2, 3]) != SecureBytes([1, 2]))
        #expect(SecureBytes([]) == SecureBytes([]))
    }

    @Test func randomIsRandom() {
        let a = SecureBytes.random(count: 32), b = SecureBytes.random(count: 32)
        #expect(a.count == 32)
        #expect(a != b)
    }

    @Test func fillKeepsOnlyWhatWasUsedAndRethrows() throws {
        let b = SecureBytes(capacity: 10) { out in out[0] = 7; out[1] = 8; return 2 }
        #expect(b.count == 2)
        #expect(b.withUnsafeBytes { Array($0) } == [7, 8])
        struct Boom: Error {}
        #expect(throws: Boom.self) { _ = try SecureBytes(capacity: 4) { (_: UnsafeMutableRawBufferPointer) throws(Boom) -> Int in throw Boom() } }
    }
}
