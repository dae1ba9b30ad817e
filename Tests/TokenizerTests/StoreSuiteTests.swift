import CardRules
import Foundation
import Testing
import Tokenizer
import VaultCrypto

/// The token store contract, run against every backend (SQLite here; PostgreSQL joins it with
/// its backend).
enum Backend: String, CaseIterable, CustomTestStringConvertible {
    case sqlite
    var testDescription: String { rawValue }

    /// A fresh store and a way to open it again (durability) and to clean up.
    func make() throws -> (store: any TokenStore, reopen: () throws -> any TokenStore, files: [String], cleanup: () -> Void) {
        switch self {
        case .sqlite:
            let dir = NSTemporaryDirectory() + "vault-store-" + UUID().uuidString
            try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
            let path = dir + "/tokens.sqlite"
            return (try SQLiteTokenStore(path: path), { try SQLiteTokenStore(path: path) },
                    [path, path + "-wal", path + "-shm"], { try? FileManager.default.removeItem(atPath: dir) })
        }
    }
}

let publicKey = try! PublicKey(rawBytes: Array(repeating: 7, count: 32))
let fingerprintKey = try! FingerprintKey(secureBytes: SecureBytes(Array(repeating: 5, count: 32)))

func sampleEnvelope(_ number: String = "4242424242424242", cvc: String? = "123", name: String? = nil) throws -> CardEnvelope {
    let card = try CardData(
        number: SecureBytes(Array(number.utf8)), expiry: CardExpiry(month: 12, year: 2030),
        cvc: cvc.map { SecureBytes(Array($0.utf8)) }, name: name.map { SecureBytes(Array($0.utf8)) })
    return try CardEnvelope.seal(card, to: publicKey, fingerprintKey: fingerprintKey, now: CalendarMonth(year: 2026, month: 11))
}

func record(_ envelope: CardEnvelope, token: String = RandomID.make(prefix: "tok_"), at t: Date = Date(), ttl: Double = 900, cvcTTL: Double = 300) -> TokenRecord {
    TokenRecord(
        token: token, envelope: envelope.droppingCVC(), cvcField: envelope.fields[.cvc], createdAt: t,
        expiresAt: t.addingTimeInterval(ttl), cvcExpiresAt: envelope.fields[.cvc] == nil ? nil : t.addingTimeInterval(cvcTTL),
        singleUse: true)
}

@Suite struct StoreSuiteTests {
    @Test(arguments: Backend.allCases)
    func insertGetDeleteRoundTrip(_ backend: Backend) async throws {
        let (store, _, _, cleanup) = try backend.make()
        defer { cleanup() }
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let r = record(try sampleEnvelope(), at: now)
        try await store.insert(r)
        let got = try #require(try await store.get(r.token, now: now))
        #expect(got.token == r.token)
        #expect(got.envelope == r.envelope)
        #expect(got.cvcField == r.cvcField)
        #expect(got.fullEnvelope == r.fullEnvelope)
        #expect(got.card == r.card)
        #expect(got.expiresAt == r.expiresAt)
        #expect(got.singleUse)
        #expect(try await store.count() == 1)
        #expect(try await store.delete(r.token))
        #expect(try await store.delete(r.token) == false)
        #expect(try await store.get(r.token, now: now) == nil)
    }

    @Test(arguments: Backend.allCases)
    func duplicatesAreRefusedAndChangeNothing(_ backend: Backend) async throws {
        let (store, _, _, cleanup) = try backend.make()
        defer { cleanup() }
        let r = record(try sampleEnvelope())
        try await store.insert(r)
        var other = record(try sampleEnvelope("5555555555554444"))
        other.token = r.token
        let error = await #expect(throws: TokenStoreError.self) { try await store.insert(other) }
        #expect(error?.code == .tokenExists)
        #expect(try await store.get(r.token, now: Date())?.card.last4 == "4242")
        #expect(try await store.count() == 1)
    }

    @Test(arguments: Backend.allCases)
    func expiryCVCTTLAndPurge(_ backend: Backend) async throws {
        let (store, _, _, cleanup) = try backend.make()
        defer { cleanup() }
        let t0 = Date(timeIntervalSince1970: 1_800_000_000)
        let a = record(try sampleEnvelope(), at: t0, ttl: 600, cvcTTL: 60)
        let b = record(try sampleEnvelope("5555555555554444"), at: t0, ttl: 1200, cvcTTL: 60)
        let c = record(try sampleEnvelope("378282246310005", cvc: nil), at: t0, ttl: 1200)
        for r in [a, b, c] { try await store.insert(r) }
        // Past the CVC TTL: the CVC is no longer returned, even before a purge.
        #expect(try await store.get(a.token, now: t0.addingTimeInterval(61))?.cvcField == nil)
        #expect(try await store.get(a.token, now: t0.addingTimeInterval(59))?.cvcField != nil)
        // Past a's TTL: a is gone for readers, then purged; b loses its CVC; c had none.
        #expect(try await store.get(a.token, now: t0.addingTimeInterval(600)) == nil)
        let purged = try await store.purgeExpired(now: t0.addingTimeInterval(700))
        #expect(purged == PurgeResult(tokensDeleted: 1, cvcsDropped: 1))
        #expect(try await store.count() == 2)
        let bAfter = try #require(try await store.get(b.token, now: t0.addingTimeInterval(700)))
        #expect(bAfter.cvcField == nil && bAfter.fullEnvelope.fields[.cvc] == nil)
        #expect(try await store.purgeExpired(now: t0.addingTimeInterval(700)) == PurgeResult(tokensDeleted: 0, cvcsDropped: 0))
    }

    @Test(arguments: Backend.allCases)
    func dropCVC(_ backend: Backend) async throws {
        let (store, _, _, cleanup) = try backend.make()
        defer { cleanup() }
        let r = record(try sampleEnvelope())
        try await store.insert(r)
        #expect(try await store.dropCVC(r.token))
        #expect(try await store.dropCVC(r.token) == false)
        let got = try #require(try await store.get(r.token, now: Date()))
        #expect(got.cvcField == nil)
        #expect(got.envelope.fields[.pan] == r.envelope.fields[.pan])
    }

    @Test(arguments: Backend.allCases)
    func acknowledgedTokensSurviveReopening(_ backend: Backend) async throws {
        let (store, reopen, _, cleanup) = try backend.make()
        defer { cleanup() }
        var tokens: [String] = []
        for _ in 0..<20 {
            let r = record(try sampleEnvelope())
            try await store.insert(r)
            tokens.append(r.token)
        }
        let again = try reopen()
        for t in tokens { #expect(try await again.get(t, now: Date()) != nil) }
    }

    @Test(arguments: Backend.allCases)
    func storeFilesHoldNoCardData(_ backend: Backend) async throws {
        let (store, _, files, cleanup) = try backend.make()
        defer { cleanup() }
        let tokenizer = Tokenizer(store: store, primaryKey: publicKey, fingerprintKey: fingerprintKey)
        let pans = ["4242424242424242", "5555555555554444", "378282246310005", "6011111111111117"]
        for pan in pans {
            let card = try CardData(
                number: SecureBytes(Array(pan.utf8)), expiry: CardExpiry(month: 12, year: 2031),
                cvc: SecureBytes(Array((pan.hasPrefix("37") ? "7391" : "739").utf8)), name: SecureBytes(Array("Zebediah Quux".utf8)))
            _ = try await tokenizer.tokenize(card)
        }
        var scanned = 0
        for file in files {
            guard let data = FileManager.default.contents(atPath: file) else { continue }
            scanned += data.count
            let text = String(decoding: data, as: UTF8.self)
            for pan in pans { #expect(!text.contains(pan), "\(file) holds a PAN") }
            #expect(!text.contains("Zebediah"), "\(file) holds a cardholder name")
        }
        #expect(scanned > 0)
    }
}
