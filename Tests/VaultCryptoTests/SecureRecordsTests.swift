import Testing
@testable import VaultCrypto

@Suite struct SecureRecordsTests {
    private func value(_ r: SecureRecords, _ i: Int) -> [UInt8] { r.withValue(at: i) { Array($0) } }

    @Test func storesReadsAndWipesAcrossPages() {
        // 4 records of 7 bytes a page (4 KiB pages would be 512): indexes 0…9 span three pages.
        let r = SecureRecords(valueBytes: 7, pageBytes: 32)
        for i in 0..<10 {
            let bytes: [UInt8] = Array(repeating: UInt8(i + 1), count: i % 8)
            #expect(bytes.withUnsafeBytes { r.store($0, at: i) })
        }
        #expect(r.capacity == 12)
        for i in 0..<10 { #expect(value(r, i) == Array(repeating: UInt8(i + 1), count: i % 8)) }
        // Overwriting a longer value with a shorter one leaves nothing of the old behind.
        #expect(([9, 9] as [UInt8]).withUnsafeBytes { r.store($0, at: 7) })
        #expect(value(r, 7) == [9, 9])
        r.wipe(at: 3)
        #expect(value(r, 3).isEmpty)
        #expect(value(r, 2) == [3, 3])
        #expect(value(r, 4) == [5, 5, 5, 5])
        // Out of range reads as empty.
        #expect(value(r, 99).isEmpty)
    }

    @Test func refusesValuesLongerThanARecord() {
        let r = SecureRecords(valueBytes: 4, pageBytes: 64)
        #expect(([1, 2, 3, 4] as [UInt8]).withUnsafeBytes { r.store($0, at: 0) })
        #expect(!([1, 2, 3, 4, 5] as [UInt8]).withUnsafeBytes { r.store($0, at: 1) })
        #expect(value(r, 1).isEmpty)
        #expect(value(r, 0) == [1, 2, 3, 4])
    }

    @Test func releasesItsPages() {
        let r = SecureRecords()
        #expect(r.lockedBytes == 0)
        #expect(([1] as [UInt8]).withUnsafeBytes { r.store($0, at: 5000) })
        // 64 KiB pages of 1,024 records of 64 bytes: five pages for index 5,000.
        #expect(r.capacity == 5 * 1024)
        #expect(r.lockedBytes == 5 * 64 * 1024)
        r.removeAll()
        #expect(r.lockedBytes == 0 && r.capacity == 0)
        #expect(value(r, 5000).isEmpty)
    }
}
