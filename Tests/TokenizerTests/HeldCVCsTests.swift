import Foundation
import Testing
import VaultCrypto
@testable import Tokenizer

/// `HeldCVCs` keeps each CVC in a fixed-size record (not an object per CVC); these pin down what
/// it answers: the field back only for the same sealing and while live, once for `take`, the
/// oldest evicted past capacity, long fields and long ids, and slots reused without mixing.
@Suite struct HeldCVCsTests {
    let t = Date(timeIntervalSinceReferenceDate: 1_000_000)
    /// A realistic sealed CVC field: base64 of 24 + 4 + 16 bytes (60 characters).
    func field(_ i: Int) -> String { Data((0..<44).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ i) }).base64EncodedString() }

    @Test func answersOnlyTheSameSealingWhileLive() {
        let held = HeldCVCs()
        held.hold(field(1), token: "tok_AAAAAAAAAAAAAAAAAAAAAAAAAA", sealedKey: "sealed-1", expiresAt: t + 60)
        #expect(held.field(for: "tok_AAAAAAAAAAAAAAAAAAAAAAAAAA", sealedKey: "sealed-1", now: t)?.field == field(1))
        #expect(held.field(for: "tok_AAAAAAAAAAAAAAAAAAAAAAAAAA", sealedKey: "sealed-1", now: t)?.expiresAt == t + 60)
        // Another sealing (a rewrap): dropped, never answered with the old field.
        #expect(held.field(for: "tok_AAAAAAAAAAAAAAAAAAAAAAAAAA", sealedKey: "sealed-2", now: t) == nil)
        #expect(held.field(for: "tok_AAAAAAAAAAAAAAAAAAAAAAAAAA", sealedKey: "sealed-1", now: t) == nil)
        #expect(held.count == 0)
        // Past its TTL: nil, and gone.
        held.hold(field(2), token: "4242420000004242", sealedKey: "k", expiresAt: t + 60)
        #expect(held.field(for: "4242420000004242", sealedKey: "k", now: t + 60) == nil)
        #expect(held.count == 0)
    }

    @Test func takeAnswersOnce() {
        let held = HeldCVCs()
        held.hold(field(3), token: "tok_B", sealedKey: "k", expiresAt: t + 60)
        #expect(held.records.withValue(at: 0) { String(decoding: $0, as: UTF8.self) } == field(3))
        #expect(held.take("tok_B", sealedKey: "k", now: t) == field(3))
        #expect(held.take("tok_B", sealedKey: "k", now: t) == nil)
        // What was taken is wiped, not only forgotten.
        #expect(held.records.withValue(at: 0) { $0.allSatisfy { $0 == 0 } })
        held.hold(field(4), token: "tok_C", sealedKey: "k", expiresAt: t + 60)
        #expect(held.take("tok_C", sealedKey: "other", now: t) == nil)
        #expect(held.count == 0)
        held.hold(field(5), token: "tok_D", sealedKey: "k", expiresAt: t + 60)
        #expect(held.drop("tok_D"))
        #expect(!held.drop("tok_D"))
    }

    @Test func holdingAgainReplaces() {
        let held = HeldCVCs()
        held.hold(field(6), token: "tok_E", sealedKey: "k1", expiresAt: t + 60)
        held.hold(field(7), token: "tok_E", sealedKey: "k2", expiresAt: t + 120)
        #expect(held.count == 1)
        #expect(held.field(for: "tok_E", sealedKey: "k2", now: t + 90)?.field == field(7))
    }

    @Test func longFieldsAndLongIds() {
        let held = HeldCVCs()
        let long = String(repeating: "A", count: 300)
        let longID = "tok_" + String(repeating: "Z", count: 60)
        held.hold(long, token: "tok_F", sealedKey: "k", expiresAt: t + 60)
        held.hold(field(8), token: longID, sealedKey: "k", expiresAt: t + 60)
        // Ids that share their first 32 bytes are still two keys.
        held.hold(field(9), token: "tok_" + String(repeating: "Z", count: 59) + "Y", sealedKey: "k", expiresAt: t + 60)
        #expect(held.field(for: "tok_F", sealedKey: "k", now: t)?.field == long)
        #expect(held.field(for: longID, sealedKey: "k", now: t)?.field == field(8))
        #expect(held.count == 3)
        #expect(held.take("tok_F", sealedKey: "k", now: t) == long)
        // Its slot is reused by the next hold, with a short field: nothing of the long one left.
        held.hold(field(10), token: "tok_G", sealedKey: "k", expiresAt: t + 60)
        #expect(held.field(for: "tok_G", sealedKey: "k", now: t)?.field == field(10))
    }

    @Test func evictsTheOldestPastCapacityAndSkipsFreedSlots() {
        let held = HeldCVCs(capacity: 3)
        for i in 0..<3 { held.hold(field(i), token: "tok_\(i)", sealedKey: "k", expiresAt: t + 60) }
        // tok_0 is taken; its slot is reused by tok_3. The next eviction must take tok_1 (the
        // oldest still held), not tok_3 through tok_0's stale place in the order.
        _ = held.take("tok_0", sealedKey: "k", now: t)
        held.hold(field(3), token: "tok_3", sealedKey: "k", expiresAt: t + 60)
        held.hold(field(4), token: "tok_4", sealedKey: "k", expiresAt: t + 60)
        #expect(held.count == 3)
        #expect(held.field(for: "tok_1", sealedKey: "k", now: t) == nil)
        #expect(held.field(for: "tok_3", sealedKey: "k", now: t)?.field == field(3))
        #expect(held.field(for: "tok_4", sealedKey: "k", now: t)?.field == field(4))
        #expect(held.field(for: "tok_2", sealedKey: "k", now: t)?.field == field(2))
    }

    @Test func purgeCountsExpiredAndEvictedAndStartsOver() {
        let held = HeldCVCs(capacity: 1000)
        for i in 0..<2000 {
            held.hold(field(i), token: "tok_\(i)", sealedKey: "k", expiresAt: t + (i < 500 ? 10 : 60))
        }
        #expect(held.count == 1000)
        // 1,000 evicted (the oldest: tok_0…tok_999, which includes every short-lived one).
        #expect(held.purge(now: t + 20) == 1000)
        #expect(held.field(for: "tok_1500", sealedKey: "k", now: t + 20)?.field == field(1500))
        #expect(held.purge(now: t + 60) == 1000)
        #expect(held.count == 0)
        // After everything went, it works as new.
        held.hold(field(1), token: "tok_again", sealedKey: "k", expiresAt: t + 120)
        #expect(held.field(for: "tok_again", sealedKey: "k", now: t + 61)?.field == field(1))
    }
}
