import CardRules
import Foundation
import Logging
import Payments
import Store
import Testing
import Tokenizer
import VaultCrypto

/// The tokens table as key rotation sees it (`EnvelopeTable`), on both backends: paging in id
/// order, counts by kid, and compare-and-swap replacement that never overwrites a row changed
/// meanwhile (deleted, or its CVC dropped).
@Suite struct EnvelopeTableTests {
    /// A key other than the suite's `publicKey`: what a rewrap would seal to.
    static let newKey = try! PublicKey(rawBytes: Array(repeating: 8, count: 32))

    /// A token store and its envelope table over the same fresh database, and cleanup.
    struct TableHarness: Sendable {
        let store: any TokenStore
        let table: any EnvelopeTable
        let cleanup: @Sendable () async -> Void
    }

    /// The suite's store harness and its tokens table (`SQLTokenStore.envelopeTable`).
    func makeTable(_ backend: Backend) async throws -> TableHarness {
        let h = try await backend.make()
        let store = SQLTokenStore(database: h.db)
        return TableHarness(store: store, table: store.envelopeTable, cleanup: h.cleanup)
    }

    /// The same card as `sampleEnvelope`, sealed to `key` (a rewrapped envelope).
    static func envelope(to key: PublicKey, _ number: String = "4242424242424242", cvc: String? = "123") throws -> CardEnvelope {
        let card = try CardData(
            number: SecureBytes(Array(number.utf8)), expiry: CardExpiry(month: 12, year: 2030), cvc: cvc.map { SecureBytes(Array($0.utf8)) })
        return try CardEnvelope.seal(card, to: key, now: CalendarMonth(year: 2026, month: 11))
    }

    /// A change over `row` to a fresh envelope sealed to `newKey`, stored as the tokens table
    /// stores it (envelope without its CVC, the CVC field apart).
    static func rewrap(_ row: EnvelopeRow) throws -> EnvelopeChange {
        let e = try envelope(to: newKey)
        return EnvelopeChange(row: row, envelope: e.droppingCVC().json, cvc: nil)
    }

    /// The row of `token` as the table reads it now.
    func row(_ token: String, in table: any EnvelopeTable) async throws -> EnvelopeRow? {
        try await table.rows(after: nil, limit: 1000).first { $0.id == token }
    }

    /// Pages of `rows(after:limit:)` cover every row once, in id order, with nothing after the last.
    @Test(arguments: Backend.available)
    func pagesThroughAllRowsInIdOrder(_ backend: Backend) async throws {
        let h = try await makeTable(backend)
        defer { Task { await h.cleanup() } }
        #expect(try await h.table.rows(after: nil, limit: 10).isEmpty)
        var records: [TokenRecord] = []
        for i in 0..<7 {
            let r = record(try sampleEnvelope(cvc: i % 2 == 0 ? "123" : nil))
            try await h.store.insert(r)
            records.append(r)
        }
        #expect(h.table.name == "tokens")
        #expect(try await h.table.rowCount() == 7)

        var seen: [EnvelopeRow] = []
        var pageSizes: [Int] = []
        var cursor: String?
        while true {
            let page = try await h.table.rows(after: cursor, limit: 3)
            guard let last = page.last else { break }
            pageSizes.append(page.count)
            seen += page
            cursor = last.id
            #expect(pageSizes.count <= 3, "paging does not end")
            if pageSizes.count > 3 { break }
        }
        #expect(pageSizes == [3, 3, 1])
        #expect(seen.map(\.id) == records.map(\.token).sorted())
        #expect(Set(seen.map(\.id)).count == seen.count, "no row twice")
        // Each row holds what the store wrote: the envelope without its CVC, the CVC field apart.
        for r in records {
            let got = try #require(seen.first { $0.id == r.token })
            #expect(got.envelope == r.envelope.json)
            #expect(got.cvc == nil)   // CVCs are never in the store
            #expect(!got.envelope.contains("\"cvc\""))
        }
        // A cursor past the last id gives nothing; one before the first gives the first rows.
        #expect(try await h.table.rows(after: seen.last!.id, limit: 3).isEmpty)
        #expect(try await h.table.rows(after: "tok_", limit: 2).map(\.id) == Array(seen.prefix(2).map(\.id)))
    }

    /// `kidCounts` counts rows by the kid of their envelope.
    @Test(arguments: Backend.available)
    func kidCountsCountByKid(_ backend: Backend) async throws {
        let h = try await makeTable(backend)
        defer { Task { await h.cleanup() } }
        #expect(try await h.table.kidCounts() == [:])
        for _ in 0..<3 { try await h.store.insert(record(try sampleEnvelope())) }
        for _ in 0..<2 { try await h.store.insert(record(try Self.envelope(to: Self.newKey, "5555555555554444"))) }
        #expect(try await h.table.kidCounts() == [publicKey.kid.rawValue: 3, Self.newKey.kid.rawValue: 2])
    }

    /// A change over the row as read is applied: the answer is [true] and the row then holds the
    /// new envelope and CVC; the same change again is stale and refused.
    @Test(arguments: Backend.available)
    func replaceOverTheRowAsReadApplies(_ backend: Backend) async throws {
        let h = try await makeTable(backend)
        defer { Task { await h.cleanup() } }
        let r = record(try sampleEnvelope())
        try await h.store.insert(r)
        let read = try #require(try await row(r.token, in: h.table))
        let change = try Self.rewrap(read)
        #expect(try await h.table.replace([change]) == [true])

        let after = try #require(try await row(r.token, in: h.table))
        #expect(after.envelope == change.envelope)
        #expect(after.cvc == change.cvc)
        let got = try #require(try await h.store.get(r.token, now: Date()))
        #expect(got.envelope.kid == Self.newKey.kid)
        #expect(got.cvcField == change.cvc)
        #expect(got.fullEnvelope.fields[.cvc] == change.cvc)
        #expect(try await h.table.kidCounts() == [Self.newKey.kid.rawValue: 1])

        // Replaying the change: the row no longer holds what it was read as.
        #expect(try await h.table.replace([change]) == [false])
        #expect(try await h.table.replace([]) == [])
    }

    /// No table holds a CVC any more: a change that would write one is refused, the row unchanged.
    @Test(arguments: Backend.available)
    func aChangeCarryingACVCIsRefused(_ backend: Backend) async throws {
        let h = try await makeTable(backend)
        defer { Task { await h.cleanup() } }
        let r = record(try sampleEnvelope())
        try await h.store.insert(r)
        let read = try #require(try await row(r.token, in: h.table))
        var withCVC = try Self.rewrap(read)
        withCVC.cvc = try Self.envelope(to: Self.newKey).fields[.cvc]
        let plain = try Self.rewrap(read)
        #expect(try await h.table.replace([withCVC, plain]) == [false, true])
        #expect(try await row(r.token, in: h.table)?.envelope == plain.envelope)
    }

    /// After the CVC was dropped, a change read before the drop is refused ([false]) and does not
    /// bring the CVC back; a change read after the drop applies and keeps it gone.
    /// A change to a row deleted meanwhile is refused and creates nothing.
    @Test(arguments: Backend.available)
    func replaceAfterDeleteIsRefused(_ backend: Backend) async throws {
        let h = try await makeTable(backend)
        defer { Task { await h.cleanup() } }
        let r = record(try sampleEnvelope())
        try await h.store.insert(r)
        let read = try #require(try await row(r.token, in: h.table))
        #expect(try await h.store.delete(r.token))
        #expect(try await h.table.replace([try Self.rewrap(read)]) == [false])
        #expect(try await h.table.rowCount() == 0)
        #expect(try await h.store.get(r.token, now: Date()) == nil)
    }

    /// In one batch, a stale change is refused and a fresh one applied, answered in order.
    @Test(arguments: Backend.available)
    func batchAnswersEachChangeInOrder(_ backend: Backend) async throws {
        let h = try await makeTable(backend)
        defer { Task { await h.cleanup() } }
        let a = record(try sampleEnvelope())
        let b = record(try sampleEnvelope("5555555555554444"))
        try await h.store.insert(a)
        try await h.store.insert(b)
        let readA = try #require(try await row(a.token, in: h.table))
        let readB = try #require(try await row(b.token, in: h.table))
        let changeA = try Self.rewrap(readA), changeB = try Self.rewrap(readB)
        // a changes after it was read (deleted and made again with another envelope).
        #expect(try await h.store.delete(a.token))
        var a2 = a
        a2.envelope = try sampleEnvelope("6011111111111117").droppingCVC()
        try await h.store.insert(a2)

        #expect(try await h.table.replace([changeA, changeB]) == [false, true])
        let gotA = try #require(try await h.store.get(a.token, now: Date()))
        #expect(gotA.envelope == a2.envelope && gotA.cvcField == nil)
        let gotB = try #require(try await h.store.get(b.token, now: Date()))
        #expect(gotB.envelope.kid == Self.newKey.kid && gotB.cvcField == changeB.cvc)
    }

    /// The stored instruments' table: rows without CVC, counts by kid, compare-and-swap.
    @Test(arguments: Backend.available)
    func instrumentsTable(_ backend: Backend) async throws {
        let h = try await backend.make()
        defer { Task { await h.cleanup() } }
        let customers = SQLCustomerStore(database: h.db)
        let table = customers.envelopeTable
        #expect(table.name == "instruments")

        let t = Date(timeIntervalSince1970: 1_800_000_000)
        let customer = CustomerRecord(id: RandomID.make(prefix: "cus_"), reference: nil, createdAt: t)
        try await customers.create(customer)
        let one = InstrumentRecord(id: RandomID.make(prefix: "ins_"), customer: customer.id, envelope: try sampleEnvelope(), createdAt: t)
        let two = InstrumentRecord(
            id: RandomID.make(prefix: "ins_"), customer: customer.id, envelope: try sampleEnvelope("5555555555554444"), createdAt: t)
        #expect(try await customers.attach(one, makeDefault: false))
        #expect(try await customers.attach(two, makeDefault: false))

        #expect(try await table.rowCount() == 2)
        let rows = try await table.rows(after: nil, limit: 10)
        #expect(rows.map(\.id) == [one.id, two.id].sorted())
        #expect(rows.allSatisfy { $0.cvc == nil })
        #expect(try await table.rows(after: rows[0].id, limit: 10).map(\.id) == [rows[1].id])
        #expect(try await table.kidCounts() == [publicKey.kid.rawValue: 2])

        let readOne = try #require(rows.first { $0.id == one.id })
        let e = try Self.envelope(to: Self.newKey)
        let change = EnvelopeChange(row: readOne, envelope: e.droppingCVC().json, cvc: nil)
        #expect(try await table.replace([change]) == [true])
        #expect(try await customers.instrument(one.id)?.envelope.kid == Self.newKey.kid)
        #expect(try await table.replace([change]) == [false], "stale after the first swap")
        #expect(try await table.kidCounts() == [publicKey.kid.rawValue: 1, Self.newKey.kid.rawValue: 1])

        // Detached meanwhile: refused, nothing comes back.
        let readTwo = try #require(rows.first { $0.id == two.id })
        #expect(try await customers.detach(customer: customer.id, instrument: two.id))
        #expect(try await table.replace([EnvelopeChange(row: readTwo, envelope: e.droppingCVC().json, cvc: nil)]) == [false])
        #expect(try await customers.instrument(two.id) == nil)
        #expect(try await table.rowCount() == 1)
    }
}
