import CardRules
import Foundation
import Logging
import Payments
import Rewrap
import Store
import Testing
import Tokenizer
import VaultCrypto
import VaultOpen

/// Versioned fingerprints (`fp1_<fkid>_<hex>`) and fingerprint-key rotation (docs/key-files.md
/// "Rotating the fingerprint key"), on every backend: a real opener with real key files, the
/// tokenizer, the store, the key-file steps and the recompute.
@Suite struct FingerprintRotationTests {
    func card(_ number: String) throws -> CardData {
        try CardData(number: SecureBytes(Array(number.utf8)), expiry: CardExpiry(month: 12, year: 2030), cvc: nil)
    }

    @Test func theNamedFormNamesItsKeyAndRoundTrips() throws {
        let key = try FingerprintKey(secureBytes: SecureBytes(Array(repeating: 7, count: 32)))
        let digits = Array("4242424242424242".utf8)
        let named = digits.withUnsafeBytes { key.namedFingerprint(ofDigits: $0) }
        let bare = digits.withUnsafeBytes { key.fingerprint(ofDigits: $0) }
        #expect(named == "fp1_\(key.kid)_\(bare)" && named.count == FingerprintName.namedLength)
        let parsed = try #require(FingerprintName.parse(named))
        #expect(parsed.kid == key.kid && parsed.hex == bare)
        #expect(FingerprintName.format(kid: parsed.kid!, hex: parsed.hex) == named)
        // The legacy bare form parses without a kid; anything else does not parse.
        #expect(FingerprintName.parse(bare)?.kid == nil && FingerprintName.parse(bare)?.hex == bare)
        for bad in ["", "fp1_", named.uppercased(), "fp2" + named.dropFirst(3), named.replacingOccurrences(of: "_", with: "-"), String(named.dropLast())] {
            #expect(FingerprintName.parse(bad) == nil, "\(bad)")
        }
        // The kid is the first 8 bytes of unkeyed BLAKE2b-256 of the key: another key, another kid.
        let other = try FingerprintKey(secureBytes: SecureBytes(Array(repeating: 8, count: 32)))
        #expect(key.kid.count == 16 && key.kid != other.kid)
        let hash = [UInt8](repeating: 7, count: 32).withUnsafeBytes { Hash.blake2b256($0) }
        #expect(key.kid == hash.prefix(8).map { String(format: "%02x", $0) }.joined())
    }

    /// A gateway zone on disk: a sealing pair and the fingerprint keys, loaded as the gateway loads them.
    final class Zone: @unchecked Sendable {
        let dir: String
        let publicKey: PublicKey
        let ring: KeyRing
        let fingerprinter: OpenerFingerprinter

        init() throws {
            dir = NSTemporaryDirectory() + "vault-fprot-" + UUID().uuidString
            try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
            chmod(dir, 0o700)
            let kid = try KeyFiles.generateKeyPair(directory: dir)
            try KeyFiles.generateFingerprintKey(path: dir + "/fingerprint.fk")
            publicKey = try KeyFiles.loadPublicKey(path: "\(dir)/\(kid.rawValue).pub")
            ring = try KeyRing(paths: ["\(dir)/\(kid.rawValue).key"])
            fingerprinter = OpenerFingerprinter(opener: EnvelopeOpener(ring: ring, fingerprintKeys: nil))
            try reload()
        }

        /// What a gateway's SIGHUP does: reads the fingerprint key files again.
        func reload() throws {
            let names = try FileManager.default.contentsOfDirectory(atPath: dir)
            fingerprinter.opener = EnvelopeOpener(ring: ring, fingerprintKeys: try FingerprintKeys.load(directory: dir, names: names))
        }

        var keys: FingerprintKeys { fingerprinter.opener.fingerprintKeys! }
        func fingerprint(_ number: String, under kid: String) -> String {
            Array(number.utf8).withUnsafeBytes { keys.key(kid: kid)!.namedFingerprint(ofDigits: $0) }
        }
    }

    func tokens(_ tokenizer: Tokenizer, fingerprint: String) async throws -> Set<String> {
        Set(Self.items(try await tokenizer.list(ListQuery(limit: 100), fingerprint: fingerprint)).map(\.token))
    }

    static func items<T>(_ page: ListPage<T>) -> [T] {
        if case .page(let items, _) = page { return items }
        return []
    }

    @Test(arguments: Backend.available)
    func aRotationNeverSplitsACardAndTheRecomputeResumes(_ backend: Backend) async throws {
        let h = try await backend.make()
        let zone = try Zone()
        defer { try? FileManager.default.removeItem(atPath: zone.dir) }
        let tokenizer = Tokenizer(store: h.store, primaryKey: zone.publicKey, fingerprinter: zone.fingerprinter)
        let visa = "4242424242424242", mc = "5555555555554444"
        let a = zone.keys.primary.kid

        // Before the rotation: one key, named fingerprints. t0 stands for a token stored before
        // the named form (the legacy bare hex).
        let t0 = try await tokenizer.tokenize(card(visa)).token
        let t1 = try await tokenizer.tokenize(card(visa)).token
        let m1 = try await tokenizer.tokenize(card(mc)).token
        let aVisa = zone.fingerprint(visa, under: a)
        #expect(try await h.store.get(t1, now: Date())?.fingerprint == aVisa)
        try await h.sql("UPDATE vault_tokens SET fingerprint = '\(aVisa.suffix(64))' WHERE token = '\(t0)'")
        // ... and whose envelope carries it, as an older version sealed it there.
        var legacy = try #require(try await h.store.get(t0, now: Date())).envelope
        legacy.card.fingerprint = String(aVisa.suffix(64))
        try await h.sql("UPDATE vault_tokens SET envelope = '\(legacy.json)' WHERE token = '\(t0)'")
        _ = try zone.fingerprinter.opener.open(legacy, checkFingerprint: true)
        // A named lookup finds the legacy row too; a bare one finds what is stored bare.
        #expect(try await tokens(tokenizer, fingerprint: aVisa) == [t0, t1])
        #expect(try await tokens(tokenizer, fingerprint: String(aVisa.suffix(64))) == [t0])

        // An instrument keeps the token's fingerprint in its envelope and its column.
        let customers = try await h.customers()
        let customer = CustomerRecord(id: RandomID.make(prefix: "cus_"), reference: nil, createdAt: Date())
        try await customers.create(customer)
        var envelope = try #require(try await h.store.get(t1, now: Date())).envelope
        envelope.card.fingerprint = aVisa
        let instrument = InstrumentRecord(id: RandomID.make(prefix: "pm_"), customer: customer.id, envelope: envelope, createdAt: Date())
        #expect(try await customers.attach(instrument, makeDefault: false))

        // Add B beside A: answers stay A's, and carry B's too; the store links them.
        let b = try KeyFiles.addFingerprintKey(directory: zone.dir)
        try zone.reload()
        #expect(zone.keys.primary.kid == a && zone.keys.others.map(\.kid) == [b])
        let t2 = try await tokenizer.tokenize(card(visa)).token
        #expect(try await h.store.get(t2, now: Date())?.fingerprint == aVisa)

        // Promote B: new tokens get B's fingerprint, and one search by either finds every token of the card.
        #expect(try KeyFiles.promoteFingerprintKey(directory: zone.dir, kid: b) == a)
        try zone.reload()
        #expect(zone.keys.primary.kid == b && zone.keys.others.map(\.kid) == [a])
        let t3 = try await tokenizer.tokenize(card(visa)).token
        let bVisa = zone.fingerprint(visa, under: b)
        #expect(try await h.store.get(t3, now: Date())?.fingerprint == bVisa)
        let visaTokens: Set = [t0, t1, t2, t3]
        #expect(try await tokens(tokenizer, fingerprint: aVisa) == visaTokens)
        #expect(try await tokens(tokenizer, fingerprint: bVisa) == visaTokens)
        #expect(try await tokens(tokenizer, fingerprint: zone.fingerprint(mc, under: a)) == [m1])
        #expect(try await Self.items(customers.listInstruments(ListQuery(), fingerprint: bVisa, customer: nil)).map(\.id) == [instrument.id])

        // Retiring A is refused while stored fingerprints are not B's.
        #expect(try await FingerprintRecomputer.remaining(in: h.db, primaryKid: b) == 5)  // t0, t1, t2, m1 and the instrument

        // The recompute, interrupted after its first batch of one row ...
        let recomputer = try FingerprintRecomputer(
            database: h.db, opener: zone.fingerprinter.opener, batchSize: 1, workers: 1, logger: Logger(label: "test"))
        let interrupted = Task {
            try await recomputer.run { _ in withUnsafeCurrentTask { $0?.cancel() } }
        }
        await #expect(throws: CancellationError.self) { try await interrupted.value }
        #expect(try await FingerprintRecomputer.remaining(in: h.db, primaryKid: b) == 4)
        // ... and run again: the rest, each once.
        let counts = try await recomputer.run()
        #expect(counts.rewrapped == 4 && counts.failed == 0 && counts.skipped == 0)
        #expect(try await FingerprintRecomputer.remaining(in: h.db, primaryKid: b) == 0)
        #expect(try await recomputer.run() == Rewrapper.Counts())  // nothing left: nothing done
        for token in visaTokens { #expect(try await h.store.get(token, now: Date())?.fingerprint == bVisa) }
        #expect(try await h.store.get(m1, now: Date())?.fingerprint == zone.fingerprint(mc, under: b))
        let stored = try #require(try await customers.instrument(instrument.id))
        #expect(stored.envelope.card.fingerprint == bVisa)
        // Old fingerprints (named and bare) still find the card; the new one too.
        for fp in [aVisa, String(aVisa.suffix(64)), bVisa] { #expect(try await tokens(tokenizer, fingerprint: fp) == visaTokens, "\(fp)") }
        #expect(try await tokens(tokenizer, fingerprint: zone.fingerprint(mc, under: a)) == [m1])
        #expect(try await Self.items(customers.listInstruments(ListQuery(), fingerprint: aVisa, customer: nil)).map(\.id) == [instrument.id])

        // Retire A: its links are forgotten (whoever holds A could otherwise follow them to the
        // card's current fingerprint), so lookups by A's fingerprints, named or bare, match
        // nothing; B's finds every token of the card; the gateway answers B's only.
        #expect(try await FingerprintLinks.forget(kid: a, in: h.db) > 0)
        try KeyFiles.retireFingerprintKey(directory: zone.dir, kid: a)
        try zone.reload()
        #expect(zone.keys.others.isEmpty)
        let t4 = try await tokenizer.tokenize(card(visa)).token
        for fp in [aVisa, String(aVisa.suffix(64))] { #expect(try await tokens(tokenizer, fingerprint: fp).isEmpty, "\(fp)") }
        #expect(try await tokens(tokenizer, fingerprint: bVisa) == visaTokens.union([t4]))
        // The legacy envelope's own fingerprint was recomputed too: the gateway still opens it.
        let legacyAfter = try #require(try await h.store.get(t0, now: Date())).envelope
        #expect(legacyAfter.card.fingerprint == bVisa)
        _ = try zone.fingerprinter.opener.open(legacyAfter, checkFingerprint: true)
        #expect(try await h.db.query("SELECT COUNT(*) FROM vault_fingerprint_links WHERE fingerprint LIKE ? OR alias LIKE ?", ["fp1_\(a)_%", "fp1_\(a)_%"]).first?.int(0) == 0)
        await h.cleanup()
    }

    @Test func keyFileStepsKeepAPrimaryAndRefuseWhatWouldLoseOne() throws {
        let zone = try Zone()
        defer { try? FileManager.default.removeItem(atPath: zone.dir) }
        let a = zone.keys.primary.kid
        #expect(throws: VaultError.self) { try KeyFiles.retireFingerprintKey(directory: zone.dir, kid: a) }   // the primary
        #expect(throws: VaultError.self) { try KeyFiles.promoteFingerprintKey(directory: zone.dir, kid: a) }  // primary already
        #expect(throws: VaultError.self) { try KeyFiles.promoteFingerprintKey(directory: zone.dir, kid: "0123456789abcdef") }  // not added
        let b = try KeyFiles.addFingerprintKey(directory: zone.dir)
        #expect(FileManager.default.fileExists(atPath: zone.dir + "/fingerprint-\(b).fk"))
        _ = try KeyFiles.promoteFingerprintKey(directory: zone.dir, kid: b)
        try zone.reload()
        #expect(zone.keys.primary.kid == b && zone.keys.others.map(\.kid) == [a])
        let mode = try FileManager.default.attributesOfItem(atPath: zone.dir + "/fingerprint-\(a).fk")[.posixPermissions] as? Int
        #expect(mode == 0o600)
        // Under systemd the directory credential names the other key vault-keys_fingerprint-<fkid>.fk
        // (and copies the primary as vault-keys_fingerprint.fk, which is not the primary).
        let credentials = NSTemporaryDirectory() + "vault-fprot-cred-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: credentials, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: credentials) }
        try FileManager.default.copyItem(atPath: zone.dir + "/fingerprint.fk", toPath: credentials + "/fingerprint.fk")
        try FileManager.default.copyItem(atPath: zone.dir + "/fingerprint.fk", toPath: credentials + "/vault-keys_fingerprint.fk")
        try FileManager.default.copyItem(atPath: zone.dir + "/fingerprint-\(a).fk", toPath: credentials + "/vault-keys_fingerprint-\(a).fk")
        try FileManager.default.copyItem(atPath: zone.dir + "/fingerprint-\(a).fk", toPath: credentials + "/notfingerprint-\(a).fk")
        let loaded = try #require(try FingerprintKeys.load(directory: credentials, names: try FileManager.default.contentsOfDirectory(atPath: credentials)))
        #expect(loaded.primary.kid == b && loaded.others.map(\.kid) == [a])
        // Without fingerprint.fk there is nothing to add beside.
        let empty = NSTemporaryDirectory() + "vault-fprot-empty-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: empty, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: empty) }
        chmod(empty, 0o700)
        do {
            _ = try KeyFiles.addFingerprintKey(directory: empty)
            Issue.record("added a fingerprint key beside no primary")
        } catch { #expect(error.code == .fingerprintKeyMissing) }
    }
}
