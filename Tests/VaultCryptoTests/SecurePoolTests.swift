import Testing
@testable import VaultCrypto

@Suite struct SecurePoolTests {
    /// A released SecureBytes leaves zeros behind: the pool keeps its slabs mapped, so the slot
    /// can be read after release, and must hold no trace of the card number.
    @Test func releasedBytesAreWiped() {
        // A 3000-byte buffer lives in the 4096-byte class, which nothing else in this test
        // process uses, so the released slot is not handed out again before it is read.
        var address: UInt = 0
        do {
            let b = SecureBytes(capacity: 3000) { out in
                out.copyBytes(from: Array("4242424242424242".utf8))
                return 16
            }
            address = b.withUnsafeBytes { UInt(bitPattern: $0.baseAddress!) }
            #expect(b.withUnsafeBytes { Array($0) } == Array("4242424242424242".utf8))
        }
        let raw = UnsafeRawPointer(bitPattern: address)!
        let after = (0..<32).map { raw.load(fromByteOffset: $0, as: UInt8.self) }
        #expect(after == [UInt8](repeating: 0, count: 32))
    }

    @Test func slotsAreReusedAndSizedByClass() {
        for size in [0, 1, 31, 32, 33, 255, 4096, 4097, 70_000] {
            let b = SecureBytes(capacity: size) { out in
                for i in 0..<out.count { out[i] = 0xAB }
                return out.count
            }
            #expect(b.count == size)
            #expect(b.withUnsafeBytes { $0.allSatisfy { $0 == 0xAB } })
        }
        // Many live at once (crosses slab boundaries), all distinct.
        let many = (0..<5000).map { i in SecureBytes(Array(String(i).utf8)) }
        let addresses = Set(many.map { $0.withUnsafeBytes { UInt(bitPattern: $0.baseAddress!) } })
        #expect(addresses.count == 5000)
        #expect(many[4321].withUnsafeBytes { Array($0) } == Array("4321".utf8))
    }

    @Test func concurrentUseIsSafe() async {
        await withTaskGroup(of: Bool.self) { group in
            for t in 0..<8 {
                group.addTask {
                    var ok = true
                    for i in 0..<2000 {
                        let text = Array("\(t)-\(i)".utf8)
                        let b = SecureBytes(text)
                        ok = ok && b.withUnsafeBytes { Array($0) } == text
                    }
                    return ok
                }
            }
            for await ok in group { #expect(ok) }
        }
    }
}
