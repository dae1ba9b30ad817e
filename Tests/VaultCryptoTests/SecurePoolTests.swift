import Testing
#if canImport(Glibc)
import Glibc
#endif
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

    /// Every size class, and a slot's whole width: after release, nothing of what the buffer
    /// held is left in the slot. A random marker (not a PAN) is used, so a slot that another test
    /// running at the same time takes over cannot hold it by chance.
    @Test(arguments: SecurePool.classes.map { $0 - SecurePool.canaryBytes })
    func everyClassIsWipedOnRelease(capacity: Int) {
        let marker = (0..<capacity).map { _ in UInt8.random(in: 1...255) }
        var address: UInt = 0
        do {
            let b = SecureBytes(capacity: capacity) { out in
                out.copyBytes(from: marker)
                return capacity
            }
            address = b.withUnsafeBytes { UInt(bitPattern: $0.baseAddress!) }
            #expect(b.withUnsafeBytes { Array($0) } == marker)
        }
        // The slab stays mapped (slots are reused), so the released slot can be read.
        let raw = UnsafeRawPointer(bitPattern: address)!
        let after = (0..<capacity).map { raw.load(fromByteOffset: $0, as: UInt8.self) }
        let window = min(8, capacity)
        let leftovers = stride(from: 0, through: capacity - window, by: window).filter { i in
            after[i..<(i + window)].elementsEqual(marker[i..<(i + window)])
        }
        #expect(leftovers.isEmpty, "\(leftovers.count) 8-byte runs of the released buffer are still in its slot")
    }

    /// A write one byte past a sensitive buffer lands in its zeroed canary and is caught when the
    /// buffer is released: the process stops rather than carry on with corrupted memory.
    @Test func aWritePastTheEndStopsTheProcess() async {
        await #expect(processExitsWith: .failure) {
            let b = SecureBytes(capacity: 16) { out in
                out.copyBytes(from: Array("4242424242424242".utf8))
                return 16
            }
            b.withUnsafeBytes { UnsafeMutableRawPointer(mutating: $0.baseAddress!).storeBytes(of: 0x41, toByteOffset: 16, as: UInt8.self) }
        }
    }

    /// A large buffer is its own `sodium_malloc`: its end touches a guard page, so reading past it
    /// faults at once instead of reading whatever follows. (A SIGSEGV; under AddressSanitizer,
    /// whose handler reports the fault, exit status 1.)
    @Test func readingPastALargeBufferFaults() async {
        await #expect(processExitsWith: .failure) {
            let b = SecureBytes(capacity: 70_000 - SecurePool.canaryBytes) { out in out.count }
            // The buffer with its canary is 70,000 bytes; the next byte is the guard page's first.
            let end = b.withUnsafeBytes { UnsafeRawPointer($0.baseAddress!) } + 70_000
            _ = end.load(as: UInt8.self)
        }
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
