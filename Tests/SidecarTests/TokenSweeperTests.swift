import Foundation
import Logging
import Sidecar
import Testing
import Tokenizer
import VaultCrypto

@Suite struct TokenSweeperTests {
    final class Clock: @unchecked Sendable { var now = Date(timeIntervalSince1970: 1_800_000_000) }

    @Test func sweepsExpiredTokensAndCVCs() async throws {
        let dir = NSTemporaryDirectory() + "vault-sweep-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let store = try await sqliteTokenStore(dir + "/t.sqlite")
        let clock = Clock()
        let tokenizer = Tokenizer(
            store: store, primaryKey: try PublicKey(rawBytes: Array(repeating: 3, count: 32)),
            policy: TokenPolicy(tokenTTL: 600, cvcTTL: 60), now: { clock.now })
        let card = try CardData(number: SecureBytes(Array("4242424242424242".utf8)), expiry: .init(month: 12, year: 2030), cvc: SecureBytes(Array("123".utf8)))
        let a = try await tokenizer.tokenize(card)
        let sweeper = TokenSweeper(tokenizer: tokenizer, logger: Logger(label: "test"))
        #expect(await sweeper.sweep() == PurgeResult(tokensDeleted: 0, cvcsDropped: 0))
        clock.now = clock.now.addingTimeInterval(61)
        #expect(await sweeper.sweep() == PurgeResult(tokensDeleted: 0, cvcsDropped: 1))
        #expect(try await tokenizer.record(a.token).hasCVC == false)
        clock.now = clock.now.addingTimeInterval(600)
        #expect(await sweeper.sweep() == PurgeResult(tokensDeleted: 1, cvcsDropped: 0))
        #expect(try await store.count() == 0)
    }
}
